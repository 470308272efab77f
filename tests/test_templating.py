"""Sandboxed Jinja2: native values, shell quoting in commands, when: without eval, template errors."""

import pytest
from jinja2 import UndefinedError
from jinja2.exceptions import SecurityError

from provision.templating import (
    TemplateError,
    evaluate_when,
    host_key_entries,
    registered,
    render_template,
    render_value,
    template_loader,
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


def test_values_in_commands_are_quoted():
    out = render_value("touch {{ path }}", {"path": "/tmp/x; rm -rf /"}, shell=True)
    assert out == "touch '/tmp/x; rm -rf /'"


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
    assert host_key_entries(hostvars) == [{"names": ["n1", "[127.0.0.1]:2201", "n1.c", "10.0.0.1"], "keys": ["ssh-ed25519 HK1"]}]
