"""provision.yaml_lines: every YAML file provision reads (issue 33 finding 6): a key written twice
is an error naming both lines, and aliases cannot expand a document without bound; through each
reader that uses it (inventory, group_vars/host_vars, -e @FILE, playbook) via the real CLI."""

from __future__ import annotations

import time

import pytest

from conftest import run_cli
from provision.errors import InventoryError
from provision.yaml_lines import MAX_DEPTH, MAX_EXPANDED, load_yaml_with_lines


def _chain(indent: str, depth: int = 9) -> tuple[list[str], str]:
    """Lines ``a: &a [x,...]``, ``b: &b [*a,...]``... nine deep (9^9 values), and the last anchor."""
    lines, previous = [], None
    for name in "abcdefghi"[:depth]:
        items = ['"x"'] * 9 if previous is None else [f"*{previous}"] * 9
        lines.append(f"{indent}{name}: &{name} [{', '.join(items)}]")
        previous = name
    return lines, previous


def _load(tmp_path, text: str):
    path = tmp_path / "f.yml"
    path.write_text(text)
    return load_yaml_with_lines(path)


@pytest.mark.parametrize(
    "text,line,message",
    [
        ("a: 1\nb: 2\na: 3\n", 3, "key 'a' written twice (first on line 1)"),
        ("hosts:\n  n1: {address: x, address: y}\n", 2, "key 'address' written twice (first on line 2)"),
        ("- name: t\n  command: {cmd: a}\n  command: {cmd: b}\n", 3, "key 'command' written twice (first on line 2)"),
        ("{1: a, true: b}\n", 1, "key true written twice (first on line 1)"),  # one key in Python: the first was lost
        ("d: &d {x: 1}\ne: {<<: *d, x: 2, x: 3}\n", 2, "key 'x' written twice"),
        ("a: &a [*a]\n", 1, "an alias names a value that holds it"),
    ],
)
def test_duplicate_keys_and_recursive_aliases_name_the_line(tmp_path, text, line, message):
    with pytest.raises(InventoryError) as caught:
        _load(tmp_path, text)
    assert str(caught.value).startswith(f"{tmp_path / 'f.yml'}:{line}: ") and message in str(caught.value), str(caught.value)


def test_a_key_that_overrides_a_merged_one_is_not_a_duplicate(tmp_path):
    data = _load(tmp_path, "d: &d {x: 1, y: 2}\ne:\n  <<: *d\n  x: 3\nf: {<<: [*d, {x: 9}]}\n")
    assert data == {"d": {"x": 1, "y": 2}, "e": {"x": 3, "y": 2}, "f": {"x": 1, "y": 2}}


def test_aliases_within_the_bound_load_and_a_chain_past_it_is_refused_fast(tmp_path):
    lines, _ = _chain("", depth=5)  # 9^5 = 59049 values: a big document, within the bound
    assert len(_load(tmp_path, "\n".join(lines) + "\n")["e"]) == 9
    lines, last = _chain("")
    started = time.process_time()
    with pytest.raises(InventoryError) as caught:
        _load(tmp_path, "\n".join([*lines, f"z: *{last}"]) + "\n")
    assert time.process_time() - started < 5  # loose: it took minutes when a reader walked the values
    # the innermost value over the bound: g (9^7 values; f, 9^6 = 531441, is within it)
    assert str(caught.value) == (
        f"{tmp_path / 'f.yml'}:7: YAML syntax: aliases expand this value to more than {MAX_EXPANDED} values (an alias chain?)"
    )


def _nested(form: str, depth: int) -> str:
    """A document ``a: 1`` then ``x:`` holding ``depth`` sequences (or mappings) one in another,
    around the scalar 1: the document is ``depth + 2`` values deep."""
    if form == "block":  # a block sequence one level deeper on each line
        return "a: 1\nx:\n" + "".join("  " * level + "-\n" for level in range(depth)) + "  " * depth + "1\n"
    opening, closing = ("[", "]") if form == "flow" else ("{a: ", "}")
    return "a: 1\nx: " + opening * depth + "1" + closing * depth + "\n"


@pytest.mark.parametrize("form", ["flow", "mapping", "block"])
def test_values_nested_past_the_bound_are_refused_with_their_line(tmp_path, form):
    """Python builds a document, and every reader walks it, by recursion: 300 levels of ``[``
    (under libyaml's own bound of 1000) ended in a RecursionError's traceback. Nesting is bounded
    as aliases are, whatever writes it (flow, a mapping, block sequences)."""
    assert _load(tmp_path, _nested(form, MAX_DEPTH - 2))["a"] == 1
    for depth in (MAX_DEPTH - 1, 300, 997):
        with pytest.raises(InventoryError) as caught:
            _load(tmp_path, _nested(form, depth))
        said = str(caught.value)
        assert said.startswith(f"{tmp_path / 'f.yml'}:") and f"YAML syntax: values nested more than {MAX_DEPTH} deep" in said


PLAY = "- name: p\n  hosts: all\n  tasks:\n    - name: t\n      command:\n        cmd: 'true'\n"
TASK = PLAY.split("\n", 2)[2]  # the task, without the play's first two lines
HOSTS = "hosts:\n  n1: {address: 127.0.0.1}\n"


@pytest.mark.parametrize(
    "files,extra,expected",
    [
        (
            {"hosts.yml": HOSTS + "hosts:\n  n2: {}\n"},
            [],
            "hosts.yml:3: YAML syntax: key 'hosts' written twice (first on line 1)",
        ),  # noqa: E501
        (
            {"group_vars/all.yml": "cluster_users: []\ncluster_users: [{name: a, uid: 2001}]\n"},
            [],
            "all.yml:2: YAML syntax: key 'cluster_users' written twice (first on line 1)",
        ),
        ({"host_vars/n1.yml": "x: 1\nx: 2\n"}, [], "n1.yml:2: YAML syntax: key 'x' written twice (first on line 1)"),
        ({"extra.yml": "x: 1\nx: 2\n"}, ["-e", "@extra.yml"], "extra.yml:2: YAML syntax: key 'x' written twice"),
        (
            {"pb.yml": PLAY + "        cmd: 'rm -rf /tmp/x'\n"},
            ["--playbook", "pb.yml"],
            "pb.yml:7: YAML syntax: key 'cmd' written twice (first on line 6)",
        ),
        (
            {"hosts.yml": HOSTS + "vars:\n  a: " + "{a: " * 300 + "1" + "}" * 300 + "\n"},
            [],
            "hosts.yml:4: YAML syntax: values nested more than",
        ),
        (
            {"pb.yml": "- name: p\n  hosts: all\n  vars:\n    a: " + "[" * 300 + "]" * 300 + f"\n{TASK}"},
            ["--playbook", "pb.yml"],
            "pb.yml:4: YAML syntax: values nested more than",
        ),
        (
            {"pb.yml": "- name: p\n  hosts: all\n  vars:\n" + "\n".join(_chain("    ")[0]) + f"\n{TASK}        creates: *i\n"},
            ["--playbook", "pb.yml"],
            "pb.yml:10: YAML syntax: aliases expand this value to more than",
        ),
    ],
)
def test_every_yaml_file_of_a_run_is_checked(tmp_path, monkeypatch, files, extra, expected):
    """The finding's cases through the real CLI: one line naming file and line, exit 2, no host touched."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts.yml").write_text(HOSTS)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    done = run_cli("setup-cluster", "-i", "hosts.yml", *extra, "--syntax-check")
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = [line for line in done.stderr.splitlines() if "error" in line]
    assert expected in line, done.stderr
