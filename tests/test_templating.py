"""Sandboxed Jinja2: native values, shell quoting in commands, when: without eval, template errors."""

import pytest
from jinja2 import UndefinedError
from jinja2.exceptions import SecurityError

from conftest import run_cli
from provision.templating import TemplateError, evaluate_when, render_template, render_value, template_loader
from provision.templating.filters import (
    home_shared,
    home_writer,
    host_key_entries,
    node_keys,
    registered,
)


def test_native_values_and_strings():
    ctx = {"users": [{"name": "a", "uid": 1}], "n": 3}
    assert render_value("{{ users }}", ctx) == ctx["users"]
    assert render_value({"x": ["{{ n }}", "n={{ n }}"]}, ctx) == {"x": [3, "n=3"]}
    assert render_value("{{ users[0].uid | default(5) }}", ctx) == 1


def test_undefined_is_an_error():
    with pytest.raises(UndefinedError):
        render_value("{{ nope }}", {})
    with pytest.raises(UndefinedError):
        render_value("a {{ nope }}", {})


HOSTILE = ["a'; touch {pwned}; '", "$(touch {pwned})", '"; touch {pwned}; "', "`touch {pwned}`", "a b\n*", ""]


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize(
    "command",
    [
        "printf '%s|' {{ x }}",
        "printf '%s|' \"$(printf %s {{ x }})\"",  # inside $(...) within double quotes: a word of that command
        "printf '%s|' {{ x }}{{ x }} # it's a comment",
        "{% for v in [x, x] %}printf '%s|' {{ v }}; {% endfor %}",
    ],
)
def test_a_value_in_a_command_is_one_word_never_code(tmp_path, command, value):
    import subprocess

    from provision.templating.shell import command_text

    pwned = tmp_path / "pwned"
    value = value.format(pwned=pwned)
    script = render_value(command, {"x": value}, shell=True)
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    assert not pwned.exists()
    assert value in out.split("|") or value + value in out.split("|")
    assert value not in command_text(script) or not value  # the text run is the playbook's, values apart


@pytest.mark.parametrize(
    "command",
    [
        "echo '{{ x }}'",
        'echo "{{ x }}"',
        'sh -c "echo {{ x }}"',
        "su alice -c 'cd {{ x }}'",
        "echo $(( {{ x }} + 1 ))",
        "cat <<EOF\n{{ x }}\nEOF",
        "echo \\{{ x }}",
    ],
)
def test_a_value_inside_shell_quotes_is_refused(command):
    with pytest.raises(TemplateError, match="inside"):
        render_value(command, {"x": "a'; touch /tmp/pwned; '"}, shell=True)


def test_commands_without_values_are_unchanged():
    assert render_value("echo 'it''s' \"$HOME\" {% if true %}x{% endif %}", {}, shell=True) == "echo 'it''s' \"$HOME\" x"


@pytest.mark.parametrize(
    "expression,expected",
    [
        ("x == 1", True),
        ("x > 1 or y", True),
        ("x is defined and not y", False),
        ("'a' in names", True),
        (["x == 1", "y"], True),
        (False, False),
    ],
)
def test_when(expression, expected):
    assert evaluate_when(expression, {"x": 1, "y": True, "names": ["a"]}) == expected


@pytest.mark.parametrize("expression", ["x.__class__.__mro__", "().__class__.__bases__[0].__subclasses__()"])
def test_when_is_sandboxed(expression):
    with pytest.raises((SecurityError, UndefinedError)):
        evaluate_when(expression, {"x": 1})


def test_when_that_does_not_parse():
    with pytest.raises(TemplateError, match="does not parse"):
        evaluate_when("x ==== 1", {})


def test_template_failure_names_template_line_and_variable(tmp_path):
    (tmp_path / "t.j2").write_text("line one\nport={{ port }}\n")
    env = template_loader([tmp_path])
    assert render_template(env, "t.j2", {"port": 22}) == "line one\nport=22\n"
    with pytest.raises(TemplateError) as caught:
        render_template(env, "t.j2", {})
    assert "t.j2:2" in str(caught.value) and "'port' is undefined" in str(caught.value)


# Issue 33 finding 6: {{ 'x' * 4000000000 }} took gigabytes, then failed with an empty cause.
@pytest.mark.parametrize(
    "text,message",
    [
        ("{{ 'x' * 4000000000 }}", "'*' would build 4000000000 characters: templates build at most 16777216"),
        ("echo {{ 4000000000 * 'ab' }}", "'*' would build 8000000000 characters"),
        ("{{ [0, 1] * 10 ** 9 }}", "'*' would build 2000000000 items"),
        ("{{ 9 ** (9 ** 9) }}", "'**' would build a number of about 1549681956 bits"),
    ],
)
def test_a_value_too_large_to_build_is_refused_at_once(text, message):
    for render in (lambda: render_value(text, {}), lambda: render_value(text, {}, shell=True)):
        with pytest.raises(SecurityError) as caught:
            render()
        assert str(caught.value) == message if text.startswith("{{ '") else message in str(caught.value)
    with pytest.raises(SecurityError, match="would build"):
        evaluate_when(text.replace("echo ", "")[3:-3], {})
    assert render_value("{{ 'ab' * 3 }}{{ [0] * 2 }}{{ 2 ** 64 }}", {}) == "ababab[0, 0]18446744073709551616"


def test_running_out_of_memory_says_so_with_the_task_and_the_file(tmp_path, monkeypatch):
    import provision.sandbox

    monkeypatch.setattr(provision.sandbox, "MAX_BUILT", 1 << 70)  # unbounded: malloc refuses 4 EiB at once
    with pytest.raises(TemplateError, match=r"^its value is too large to build \(out of memory\)$"):
        render_value("{{ 'x' * 2 ** 62 }}", {})
    (tmp_path / "t.j2").write_text("a\n{{ [0] * 2 ** 61 }}\n")
    with pytest.raises(TemplateError, match=r"^template t.j2: its value is too large to build \(out of memory\)$"):
        render_template(template_loader([tmp_path]), "t.j2", {})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts.yml").write_text("hosts:\n  n1: {address: 127.0.0.1}\n")
    big = "command: {cmd: \"echo {{ 'x' * 2 ** 62 }}\"}"
    (tmp_path / "pb.yml").write_text(f"- hosts: all\n  tasks:\n    - name: big\n      {big}\n")
    done = run_cli("setup-cluster", "-i", "hosts.yml", "--playbook", "pb.yml", "--syntax-check")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "provision: error: pb.yml:3: task 'big' on n1: its value is too large to build (out of memory)"
    ), done.stderr


def test_user_templates_override_built_in(tmp_path):
    (tmp_path / "rankfile.j2").write_text("mine\n")
    assert render_template(template_loader([tmp_path]), "rankfile.j2", {}) == "mine\n"
    with pytest.raises(TemplateError, match="not found"):
        render_template(template_loader([tmp_path]), "nope.j2", {})


def test_registered_and_host_key_entries():
    hostvars = {
        "n1": {
            "keys": {"results": [{"user": "a", "public_key": "ssh-ed25519 AAA a@n1"}]},
            "facts": {
                "hostname": "n1",
                "fqdn": "n1.c",
                "short": "n1",
                "addresses": ["10.0.0.1"],
                "host_keys": ["ssh-ed25519 HK1"],
            },
            "inventory_address": "127.0.0.1",
            "inventory_port": 2201,
        },
        "n2": {"facts": {}},
    }
    assert registered(hostvars, "keys") == [{"user": "a", "public_key": "ssh-ed25519 AAA a@n1", "host": "n1"}]
    # n2 is known of nothing (outside the run, never cached): keys None, so its lines are kept.
    assert host_key_entries(hostvars) == [
        # 10.0.0.1 is only reported (hostname -I): not vouched for, not written (issue 24, finding 4)
        {"node": "n1", "names": ["n1", "[127.0.0.1]:2201", "n1.c"], "keys": ["ssh-ed25519 HK1"]},
        {"node": "n2", "names": ["n2"], "keys": None},
    ]
    assert node_keys(hostvars, "keys", "a") == {"n1": ["ssh-ed25519 AAA a@n1"], "n2": None}
    assert node_keys(hostvars, "keys", "b") == {"n1": None, "n2": None}


def _node(name, *addresses, **extra):
    facts = {"hostname": name, "fqdn": "", "short": name, "addresses": list(addresses), "host_keys": ["ssh-ed25519 K"]}
    return {"facts": {**facts, **extra}, "inventory_address": addresses[0] if addresses else None, "inventory_port": 22}


@pytest.mark.parametrize(
    ("hostvars", "error"),
    [
        # a node claiming another's address or name: both named
        ({"n1": _node("n1", "10.0.0.1"), "n2": _node("n2", "10.0.0.2", addresses=["10.0.0.2", "10.0.0.1"])}, "'10.0.0.1', which"),
        ({"n1": _node("n1", "10.0.0.1"), "n2": _node("n1", "10.0.0.2")}, "host n2 reports the name or address 'n1', which is"),
    ],
)
def test_two_hosts_claiming_one_name_or_address_is_an_error(hostvars, error):
    with pytest.raises(TemplateError, match=error):
        host_key_entries(hostvars)


def _attacker(**claims):
    """n1 and n3 honest; n2 (root on it) prints what ``claims`` say for hostname, -f and -I."""
    n2 = _node("n2", "10.0.0.2")
    n2["facts"].update(claims)
    return {"n1": _node("n1", "10.0.0.1", fqdn="n1.cluster"), "n2": n2, "n3": _node("n3", "10.0.0.3")}


def test_known_hosts_names_are_only_those_the_controller_vouches_for():
    # A fake `hostname` on n2: -f prints gitlab.example.com, -I adds addresses outside the cluster.
    hostvars = _attacker(fqdn="gitlab.example.com", addresses=["10.0.0.2", "192.0.2.7", "2001:db8::7"])
    for renderer in ("n1", "n2", "n3"):  # no conflict with another host: nobody fails
        entries = {e["node"]: e["names"] for e in host_key_entries(hostvars, renderer)}
        assert entries == {"n1": ["n1", "10.0.0.1", "n1.cluster"], "n2": ["n2", "10.0.0.2"], "n3": ["n3", "10.0.0.3"]}
    # A reported FQDN whose first label is the inventory name is the same host: kept.
    hostvars = _attacker(fqdn="n2.cluster")
    assert host_key_entries(hostvars, "n1")[1]["names"] == ["n2", "10.0.0.2", "n2.cluster"]


@pytest.mark.parametrize(
    "claims",
    [{"fqdn": "n1.cluster"}, {"hostname": "n1", "short": "n1"}, {"addresses": ["10.0.0.2", "10.0.0.3"]}, {"hostname": "N3"}],
    ids=["another's FQDN", "another's name", "another's address", "another's name in capitals"],
)
def test_a_node_claiming_another_hosts_name_fails_alone(claims):
    hostvars = _attacker(**claims)
    with pytest.raises(TemplateError, match=r"^host n2 reports the name or address .*, which is host n[13]'s") as error:
        host_key_entries(hostvars, "n2")
    assert "\n" not in str(error.value)
    for renderer in ("n1", "n3"):  # the others go on, n2's keys under its vouched-for names only
        entries = {e["node"]: e["names"] for e in host_key_entries(hostvars, renderer)}
        assert entries["n2"] == ["n2", "10.0.0.2"] and entries["n1"][:2] == ["n1", "10.0.0.1"], entries
    with pytest.raises(TemplateError, match="host n2 reports"):
        host_key_entries(hostvars)  # without a host to render for: any conflict is an error


NFS_HOME = {"fs": "nfs", "id": "41:2", "source": "fs1:/export/home"}


@pytest.mark.parametrize(
    ("homes", "setting", "writer"),
    [
        ([NFS_HOME, {**NFS_HOME, "id": "47:2"}], "auto", "n1"),  # one NFS export: device numbers differ, inode same
        ([NFS_HOME, {**NFS_HOME, "source": "fs2:/export/home"}], "auto", None),  # two servers
        ([{"fs": "ext2/ext3", "id": "2049:2", "source": "/dev/sda2"}] * 2, "auto", None),  # cloned local disks
        ([{"fs": "ext2/ext3", "id": "2049:2", "source": "/dev/sda2"}] * 2, True, "n1"),  # told so
        ([NFS_HOME, NFS_HOME], False, None),
    ],
)
def test_home_writer(homes, setting, writer):
    hostvars = {f"n{i + 1}": _node(f"n{i + 1}", f"10.0.0.{i + 1}", home=home) for i, home in enumerate(homes)}
    assert home_writer(hostvars, list(hostvars), setting) == writer
    assert home_shared(homes) == (homes[0]["fs"] == "nfs" and homes[0]["source"] == homes[1]["source"])


def test_home_writer_is_a_host_that_answered():
    hostvars = {"n1": {**_node("n1", "10.0.0.1"), "cached": True}, "n2": _node("n2", "10.0.0.2")}
    assert home_writer(hostvars, ["n1", "n2"], True) == "n2"
    with pytest.raises(TemplateError, match="not true, false or auto"):
        home_writer(hostvars, ["n1", "n2"], "maybe")


def test_home_writer_is_derived_once_per_snapshot_and_play(monkeypatch):
    """Issue 37: each task on each host asks for the home writer (22 times per host in the
    built-in playbook), and each answer scanned every host: O(hosts²). Given the engine's
    snapshot of hostvars (a new one after each play, never changed in place) and its play_hosts
    tuple, the scan runs once for them; the same answer as without the snapshot."""
    import provision.templating.filters as filters
    from provision.templating.filters import HostVars

    scans, scan = [], filters._home_writer

    def counted(*args):
        scans.append(args)
        return scan(*args)

    monkeypatch.setattr(filters, "_home_writer", counted)
    plain = {f"n{i}": _node(f"n{i}", f"10.0.{i // 250}.{i % 250}", home=NFS_HOME) for i in range(1, 1001)}
    snapshot, hosts = HostVars(plain), tuple(plain)
    assert {home_writer(snapshot, hosts, "auto") for _ in range(500)} == {"n1"}
    assert home_writer(snapshot, hosts, False) is None and len(scans) == 2  # once per (play, setting)
    assert home_writer(HostVars(plain), hosts, "auto") == "n1" and len(scans) == 3  # the next play's snapshot
    assert home_writer(plain, list(hosts), "auto") == "n1" and len(scans) == 4  # no snapshot: computed each time
    with pytest.raises(TypeError, match="snapshot"):
        snapshot.update({"n1": {}})


# Issue 33, second pass: the other ways a short template builds a huge value, each refused at once
# (estimated from its arguments, never built); the same calls at a sane size still work.
@pytest.mark.parametrize(
    "text,message",
    [
        ("{{ '%0*d' % (10 ** 9, 1) }}", "'%' would build 1000000001 characters"),  # a width taken from the values
        ("{{ '%999999999d' % 1 }}", "'%' would build 999999999 characters"),
        ("{{ '%.999999999f' % 1.5 }}", "'%' would build 999999999 characters"),
        ("{{ '%*s'|format(10 ** 9, '') }}", "format would build 1000000000 characters"),
        ("{{ '{:>999999999}'.format(1) }}", "format would build 999999999 characters"),
        ("{{ '{:>{w}}'.format(1, w=10 ** 9) }}", "format would build 1000000001 characters"),
        # a second reader's ways round the first bounds: summed over conversions, nested keys,
        # widths given as text or in a list, bytes, joins
        ("{{ ('%16000000d' * 6) % (1, 2, 3, 4, 5, 6) }}", "'%' would build 96000000 characters"),
        ("{{ ('{:16000000}' * 6).format(1, 2, 3, 4, 5, 6) }}", "format would build 96000000 characters"),
        ("{{ '%(a(b)x)100000000d' % {'a(b)x': 1} }}", "'%' would build 100000000 characters"),
        ("{{ '{0:>{1}}'.format('x', '100000000') }}", "format would build 100000000 characters"),
        ("{{ '{0:>{1[0]}}'.format('x', [100000000]) }}", "format would build 100000000 characters"),
        ("{{ 'x'.encode().center(100000000) }}", "center would build 100000000 characters"),
        ("{{ ('y' * 16000000).join('abcdef') }}", "join would build 80000006 characters"),
        ("{{ (['x' * 16000000] * 6)|join }}", "join would build 96000000 characters"),
        ("{{ ('x' * 16000000) + ('x' * 16000000) }}", "'+' would build 32000000 characters"),
        ("{{ 'x'.center(10 ** 9) }}", "center would build 1000000000 characters"),
        ("{{ 'x'.zfill(10 ** 9) }}", "zfill would build 1000000000 characters"),
        ("{{ 'x'|center(10 ** 9) }}", "center would build 1000000000 characters"),
        ("{{ ('a' * 10 ** 6).replace('', 'b' * 100) }}", "replace would build 101000100 characters"),
        ("{{ ('a' * 10 ** 6)|replace('a', 'b' * 100) }}", "replace would build 100000000 characters"),
        ("{{ ('a' * 10 ** 6)|replace('', 10 ** 99) }}", "replace would build 101000100 characters"),
        ("{{ ('\t' * 10 ** 6).expandtabs(10 ** 3) }}", "expandtabs would build 1000000000 characters"),
        ("{{ ('a\n' * 10 ** 6)|indent(10 ** 3) }}", "indent would build 1000001000 characters"),
        ("{{ [1]|batch(10 ** 9, 0)|list }}", "batch would build 1000000000 items"),
        ("{{ [1]|slice(10 ** 9)|list }}", "slice would build 1000000000 items"),
        ("{{ lipsum(10 ** 6) }}", "lipsum would build 1200000000 characters"),
    ],
)
def test_every_way_a_template_pads_or_repeats_is_bounded(text, message):
    with pytest.raises(SecurityError) as caught:
        render_value(text, {})
    assert str(caught.value) == f"{message}: templates build at most 16777216"


def test_the_bounded_ways_still_work_at_a_sane_size():
    text = (
        "{{ '%03d' % 7 }} {{ '%*d' % (4, 7) }} {{ '%s-%s'|format('a', 'b') }} {{ '{:>4}'.format(1) }} "
        "{{ 'x'.center(3) }}|{{ 'x'|center(3) }}|{{ 'ab'.replace('', '.') }} {{ 'a\tb'.expandtabs(2) }} "
        "{{ [1, 2, 3]|batch(2, 0)|list }} {{ [1, 2, 3]|slice(2)|list }} {{ 'a\nb'|indent(2) }} {{ '100'.zfill(5) }}"
    )
    assert render_value(text, {}) == ("007    7 a-b    1  x | x |.a.b. a b [[1, 2], [3, 0]] [[1, 2], [3]] a\n  b 00100")
    assert render_value("{{ '%%999999999d' % () }} {{ [1] + [2] }} {{ 'a' + 'b' }} {{ [1, 2]|join('-') }}", {}) == (
        "%999999999d [1, 2] ab 1-2"
    )


def test_what_adds_up_in_a_loop_is_bounded_by_the_whole_output():
    # each step is within bounds (1 Mi characters), 100 steps print 100 Mi: stopped at 64 Mi
    with pytest.raises(SecurityError, match="the template printed more than 67108864 characters"):
        render_value("{% for i in range(100) %}{{ 'x' * 2 ** 20 }}{% endfor %}", {})


def test_the_variables_a_template_reads_are_jinja2s_own_answer_on_every_shipped_template_and_playbook():
    """variables_in walks the parsed template instead of generating its code (issue 37: setup-cluster
    reads every playbook value and template each run); jinja2's meta is the specification."""
    import yaml
    from jinja2 import meta

    from provision.engine.names import _strings
    from provision.resources import resource_dir
    from provision.templating import ENV, variables_in

    def strings(value):  # the playbook's strings that are templates
        return (text for text in _strings(value) if "{{" in text or "{%" in text)

    texts = [path.read_text() for path in sorted(resource_dir("templates").rglob("*.j2"))]
    for path in sorted(resource_dir("playbooks").glob("*.yml")):
        texts += list(strings(yaml.safe_load(path.read_text())))
    assert len(texts) > 100
    texts += [  # what a template sets itself (a second reader's cases: meta's answer holds there too)
        "{% set x = x|default(1) %}{{ x }}",
        "{{ x }}{% set x = 1 %}",
        "{% for h in hs %}{% endfor %}{{ h }}",
        "{% for item in item %}{{ item }}{% endfor %}",
        "{% with a = 1 %}{% endwith %}{{ a }}",
        "{% set ns = namespace(x=0) %}{% set ns.x = 1 %}{{ ns.x }}",
        "{{ loop }}",
        "{% macro f(user) %}{{ user }}{{ caller }}{% endmacro %}{{ f(1) }}{{ varargs }}",
        "{% for u in users if u.name != sel %}{% set sel = 1 %}{% endfor %}",
    ]
    for text in texts:
        assert variables_in(text) == meta.find_undeclared_variables(ENV.parse(text)), text[:200]
