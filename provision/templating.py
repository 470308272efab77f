"""Jinja2 for playbooks and operations (the templates layer, below both): sandboxed,
StrictUndefined, native values for ``"{{ expr }}"``, values kept out of shell code (a command's
values are passed as shell variables, never as text), and ``when:`` expressions without ``eval``."""

from __future__ import annotations

import contextvars
import re
import shlex
import traceback
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.sandbox import SandboxedEnvironment

from provision import __version__
from provision.errors import FactsError, ProvisionError
from provision.plans.gres import plan_gres
from provision.probe.store import load_host
from provision.resources import resource_dir

_SINGLE = re.compile(r"^\{\{(?P<expr>(?:(?!\}\}).)*)\}\}$", re.DOTALL)


class TemplateError(ProvisionError):
    """A template or expression failed to parse or render; the message names where and why."""


def _quote(value: Any) -> str:
    return shlex.quote(str(value))


def _environment(**extra) -> SandboxedEnvironment:
    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False, **extra)
    env.filters["quote"] = _quote
    env.filters["pluck"] = pluck
    env.filters["registered"] = registered
    env.filters["host_key_entries"] = host_key_entries
    env.filters["node_keys"] = node_keys
    env.filters["cluster_addresses"] = cluster_addresses
    env.filters["home_writer"] = home_writer
    env.filters["slurm_files"] = slurm_files
    env.filters["present_users"] = lambda users: [u for u in users or [] if u.get("state", "present") != "absent"]
    env.filters["absent_users"] = lambda users: [u for u in users or [] if u.get("state", "present") == "absent"]
    return env


def registered(hostvars: Any, name: str) -> list:
    """``hostvars | registered('user_keys')``: every host's registered results of that name
    (loop results flattened, each with ``host`` added), hosts without it skipped."""
    out = []
    for host, values in sorted((hostvars or {}).items()):
        value = values.get(name) if isinstance(values, dict) else None
        if not isinstance(value, dict):
            continue
        for result in value.get("results", [value]):
            if isinstance(result, dict):
                out.append({**result, "host": host})
    return out


def _host_names(host: str, values: dict) -> list[str]:
    """Every name ``host`` is reached by: inventory name (first), ``[address]:port`` (or
    address), host name, FQDN, short name and addresses (names a node reports are its claims)."""
    facts = values.get("facts") or {}
    address, port = values.get("inventory_address"), values.get("inventory_port")
    names = [host]
    if address:
        names.append(f"[{address}]:{port}" if port and port != 22 else address)
    names += [facts.get("hostname"), facts.get("fqdn"), facts.get("short"), *(facts.get("addresses") or [])]
    return [n for n in dict.fromkeys(names) if n]


def _check_claims(hostvars: dict) -> None:
    """Two hosts claiming one name or address is an error naming both (a compromised node must
    not pose as another in every node's known_hosts or in the NFS export list)."""
    owner: dict[str, str] = {}
    for host, values in sorted(hostvars.items()):
        for name in _host_names(host, values if isinstance(values, dict) else {}):
            other = owner.setdefault(name.lower(), host)
            if other != host:
                raise TemplateError(f"hosts {other} and {host} both claim the name or address {name!r}: fix it on the wrong one")


def host_key_entries(hostvars: Any) -> list:
    """known_hosts entries for every inventory host: ``node``, its names (see
    :func:`_host_names`) and its host keys (read over the verified connection, or cached from
    its last run); ``keys`` None when nothing is known of it (its present lines are kept)."""
    hostvars = hostvars or {}
    _check_claims(hostvars)
    entries = []
    for host, values in sorted(hostvars.items()):
        keys = (values.get("facts") or {}).get("host_keys") or None
        entries.append({"node": host, "names": _host_names(host, values), "keys": list(keys) if keys else None})
    return entries


def node_keys(hostvars: Any, name: str, user: str) -> dict:
    """``hostvars | node_keys('user_keys', 'alice')``: {inventory host: [alice's public keys it
    registered under ``name``]} for every host; None for a host that registered none (unknown:
    its present lines are kept)."""
    out: dict[str, list | None] = {}
    for host in sorted(hostvars or {}):
        results = registered({host: hostvars[host]}, name)
        keys = [r["public_key"] for r in results if r.get("user") == user and r.get("public_key")]
        out[host] = keys or None
    return out


def cluster_addresses(hostvars: Any) -> list:
    """Every inventory host's addresses (live or cached), for lists that must name the whole
    cluster (NFS clients). A host with no known address is an error naming it and what to run:
    the list never shrinks to the hosts of this run."""
    hostvars = hostvars or {}
    _check_claims(hostvars)
    missing = sorted(h for h, v in hostvars.items() if not (v.get("facts") or {}).get("addresses"))
    if missing:
        raise TemplateError(
            f"no address known of {', '.join(missing)} (not reached in this run nor in an earlier one): "
            f"run setup-cluster once with {', '.join(missing)} reachable and in --limit, or set nfs_clients"
        )
    return list(dict.fromkeys(a for h in sorted(hostvars) for a in hostvars[h]["facts"]["addresses"]))


# File systems one server (or cluster) serves to many nodes: the same source and inode on every
# node is the same folder. On local disks the same inode proves nothing (nodes cloned from one
# image share inode numbers), so a local /home is never taken as shared unless told.
NETWORK_FS = frozenset({"nfs", "nfs4", "lustre", "gpfs", "ceph", "beegfs", "glusterfs", "fuse", "fuseblk", "smb2", "cifs"})


def home_shared(homes: list) -> bool:
    """Whether every node's /home (``{fs, id: dev:inode, source}`` from hostinfo) is one network
    file system: the same type, source and inode on every node (device numbers of a network
    mount differ between clients, so only the inode is compared)."""
    if len(homes) < 2 or not all(isinstance(h, dict) and h.get("fs") in NETWORK_FS for h in homes):
        return False
    return len({(h["fs"], h.get("source"), str(h.get("id", "")).rpartition(":")[2]) for h in homes}) == 1


def home_writer(hostvars: Any, play_hosts: list, setting: Any = "auto") -> str | None:
    """The one node that writes the users' key pairs and authorized_keys when /home is shared
    (``shared_home: true``, or ``auto`` and detected by :func:`home_shared`): the first host of
    the play that answered this run. None when every node has its own /home."""
    hostvars = hostvars or {}
    live = [h for h in play_hosts or [] if h in hostvars and not hostvars[h].get("cached") and not hostvars[h].get("unknown")]
    if setting in (False, "false", "no", None) or not live:
        return None
    if setting in (True, "true", "yes"):
        return live[0]
    if setting != "auto":
        raise TemplateError(f"shared_home: {setting!r} is not true, false or auto")
    return live[0] if home_shared([(hostvars[h].get("facts") or {}).get("home") for h in live]) else None


SLURM_DEFAULTS = {"conf": "/etc/slurm/slurm.conf", "gres": "/etc/slurm/gres.conf", "nodes": "all", "facts_dir": None}


def _slurm_nodes(nodes: Any, groups: dict) -> list[str]:
    """The inventory hosts ``nodes`` names (a group or host name, or a list of them), in
    inventory order; a name that is neither is an error naming it."""
    names = [nodes] if isinstance(nodes, str) else nodes
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise TemplateError(f"slurm: nodes must be a group or host name or a list of them, not {nodes!r}")
    every = list(groups.get("all") or [])
    chosen: set[str] = set()
    for name in names:
        if name in groups:
            chosen.update(groups[name])
        elif name in every:
            chosen.add(name)
        else:
            raise TemplateError(f"slurm: nodes: {name!r} is no group or host of the inventory")
    return [host for host in every if host in chosen]


@lru_cache(maxsize=8)
def _slurm_plan(names: tuple[str, ...], facts_dir: str, _stamp: int) -> tuple[str, str]:
    # Facts files are replaced by rename, so the folder's mtime (``_stamp``) changes with any of them.
    facts, errors = [], []
    for name in names:
        try:
            facts.append(load_host(Path(facts_dir), name))
        except FactsError as error:
            errors.append(str(error))
    plan = plan_gres(facts, __version__)
    errors.extend(plan.errors)
    if errors:
        raise TemplateError("slurm: " + "; ".join(errors))
    return plan.gres_conf, plan.slurm_conf


def slurm_files(settings: Any, groups: Any, facts_dir: Any = None, base_dir: Any = ".") -> dict:
    """``slurm | default({}) | slurm_files(groups, provision_facts_dir, inventory_dir)``: the
    role's settings (:data:`SLURM_DEFAULTS` filled in) with ``gres_conf`` (gres.conf) and
    ``node_lines`` (``GresTypes=gpu`` and the NodeName lines), exactly as ``provision slurm-gres``
    and its ``--slurm-conf`` write them, for every host ``nodes`` names in the inventory (not
    only this run's: the files are cluster-wide). A host without facts, or whose GPUs are
    unknown, is an error naming it and what to run. ``facts_dir`` (relative to ``base_dir``, the
    inventory's folder) defaults to setup-cluster's ``--facts-dir``."""
    if settings in (None, False):
        settings = {}
    if not isinstance(settings, dict):
        raise TemplateError(f"slurm: must be a mapping ({', '.join(SLURM_DEFAULTS)}), not {settings!r}")
    unknown = sorted(set(settings) - set(SLURM_DEFAULTS))
    if unknown:
        raise TemplateError(f"slurm: unknown key {', '.join(unknown)} (known: {', '.join(SLURM_DEFAULTS)})")
    merged = {**SLURM_DEFAULTS, **{k: v for k, v in settings.items() if v is not None}}
    for key in ("conf", "gres"):
        if not isinstance(merged[key], str) or not merged[key].startswith("/"):
            raise TemplateError(f"slurm: {key} must be an absolute path, not {merged[key]!r}")
    if merged["facts_dir"] is not None:  # the inventory's setting: relative to its folder
        if not isinstance(merged["facts_dir"], str) or not merged["facts_dir"]:
            raise TemplateError(f"slurm: facts_dir must be a folder, not {merged['facts_dir']!r}")
        folder = Path(str(base_dir or ".")) / Path(merged["facts_dir"]).expanduser()
    elif facts_dir:  # setup-cluster's --facts-dir (relative to where it runs, as for probe and slurm-gres)
        folder = Path(str(facts_dir))
    else:
        raise TemplateError("slurm: no facts folder: set slurm.facts_dir or give setup-cluster --facts-dir")
    names = _slurm_nodes(merged["nodes"], dict(groups or {}))
    try:
        stamp = folder.stat().st_mtime_ns
    except OSError:
        stamp = 0  # no folder: every host is reported without facts
    gres_conf, node_lines = _slurm_plan(tuple(names), str(folder), stamp)
    return {**merged, "facts_dir": str(folder), "nodes": names, "gres_conf": gres_conf, "node_lines": node_lines}


def pluck(results: Any, field: str) -> list:
    """``registered | pluck('public_key')``: the field of each result (loop results flattened),
    skipping missing or empty values."""
    out = []
    items = results if isinstance(results, list) else [results]
    for item in items:
        if isinstance(item, dict) and "results" in item:
            out.extend(pluck(item["results"], field))
        elif isinstance(item, dict) and item.get(field) not in (None, ""):
            out.append(item[field])
    return out


ENV = _environment()
_VALUES: contextvars.ContextVar[list | None] = contextvars.ContextVar("_VALUES", default=None)


def _collect(value: Any) -> Any:
    # Each ``{{ }}`` of a command renders as a marker; the value itself is kept aside.
    values = _VALUES.get()
    if values is None or isinstance(value, jinja2.runtime.Undefined):
        return value
    values.append("" if value is None else str(value))
    return f"\x00{len(values)}\x00"


SHELL_ENV = _environment(finalize=_collect)


@lru_cache(maxsize=4096)
def variables_in(text: str) -> frozenset[str]:
    """The top-level variable names a template string refers to."""
    try:
        return frozenset(meta.find_undeclared_variables(ENV.parse(text)))
    except jinja2.TemplateSyntaxError:
        return frozenset()


@lru_cache(maxsize=4096)
def _compiled(text: str, shell: bool) -> jinja2.Template:
    return (SHELL_ENV if shell else ENV).from_string(text)


def render_value(value: Any, context: dict, *, shell: bool = False) -> Any:
    """Render every string inside ``value`` (dicts and lists walked). A string that is exactly one
    ``{{ expression }}`` keeps the expression's native type (a list stays a list). With
    ``shell``, a string is a shell command: see :func:`render_command`."""
    if isinstance(value, dict):
        return {key: render_value(item, context, shell=shell) for key, item in value.items()}
    if isinstance(value, list):
        return [render_value(item, context, shell=shell) for item in value]
    if not isinstance(value, str) or ("{{" not in value and "{%" not in value):
        return value
    if shell:
        return render_command(value, context)
    single = _SINGLE.match(value.strip())
    if single:
        result = compile_expression(single.group("expr"))(**context)
        if isinstance(result, jinja2.runtime.Undefined):
            result._fail_with_undefined_error()
        return result
    return _compiled(value, False).render(context)


VALUES_END = ": provision values end"  # the line after the assignments of a command's values
_VARIABLE = "_pv{}"


def render_command(text: str, context: dict) -> str:
    """Render a shell command so that no value can become shell code, whatever the quotes around
    it: every ``{{ }}`` becomes a reference to a shell variable (``"${_pv1}"``), assigned first
    from the shell-quoted value, so the value is one word and is never parsed. A value inside
    quotes or a here-document is refused (:class:`TemplateError`): there it could end the quotes,
    or be run by a nested shell (``sh -c "... {{ x }}"``). A value inside ``$(...)``, even within
    double quotes, is a word of that command and allowed."""
    values: list[str] = []
    token = _VALUES.set(values)
    try:
        rendered = _compiled(text, True).render(context)
    finally:
        _VALUES.reset(token)
    if not values:
        return rendered
    body = _place_values(rendered, values)
    assignments = [f"{_VARIABLE.format(n)}={shlex.quote(value)}" for n, value in enumerate(values, 1)]
    return "\n".join([*assignments, VALUES_END, body])


def command_text(command: str) -> str:
    """The command as written, without the assignments of its values (the text that runs)."""
    head, marker, body = command.partition("\n" + VALUES_END + "\n")
    return body if marker else command


_REFERENCE = re.compile(r'"\$\{_pv(\d+)\}"')


def command_display(command: str) -> str:
    """The command for DISPLAY only (live output, recap, --diff): each value shown in place of its
    variable, as the one shell word it is passed as. Never run it: values are only ever passed as
    variables (:func:`render_command`). Callers mask secrets and control characters."""
    head, marker, body = command.partition("\n" + VALUES_END + "\n")
    if not marker:
        return command
    values = {}
    for word in shlex.split(head):  # the assignments render_command wrote, one shell word each
        name, _, value = word.partition("=")
        values[name] = value
    return _REFERENCE.sub(lambda m: shlex.quote(values.get(_VARIABLE.format(m.group(1)), m.group(0))), body)


_COMMAND = ("top", "cmd", "tick", "param")  # contexts where the shell reads words and quotes
_OPENERS = {
    "top": ("$((", "$(", "${", "`", '"', "'"),
    "dq": ("$((", "$(", "${", "`"),
}
_CONTEXT = {"$((": "arith", "$(": "cmd", "${": "param", "`": "tick", '"': "dq", "'": "sq"}
_CLOSERS = {"dq": '"', "sq": "'", "tick": "`", "cmd": ")", "arith": ")", "param": "}"}


def _place_values(text: str, values: list[str]) -> str:
    """Replace each value marker by its variable reference, checking the shell quoting context it
    sits in (a small POSIX sh lexer: quotes, ``$(...)``, backquotes, comments, here-documents)."""
    out: list[str] = []
    stack = ["top"]
    i, heredoc = 0, False
    while i < len(text):
        ch, where = text[i], stack[-1]
        if ch == "\x00":
            end = text.index("\x00", i + 1)
            number = int(text[i + 1 : end])
            escaped = i > 0 and text[i - 1] == "\\"
            if heredoc or where in ("dq", "sq", "arith") or escaped:
                place = {"dq": "double quotes", "sq": "single quotes", "arith": "$(( ))"}.get(where, "a here-document")
                place = "a backslash escape" if escaped and not heredoc and where in _COMMAND else place
                raise TemplateError(
                    f"value {number} of this shell command sits inside {place}, where it could end the quotes or "
                    "run as code: put the {{ }} outside any quotes (it is passed as one word)"
                )
            out.append('"${' + _VARIABLE.format(number) + '}"')
            i = end + 1
            continue
        if ch == "\\" and where != "sq" and i + 1 < len(text) and text[i + 1] != "\x00":
            out.append(text[i : i + 2])
            i += 2
            continue
        if ch == _CLOSERS.get(where):
            stack.pop()
            out.append(ch)
            i += 1
            continue
        opener = next((o for o in _OPENERS.get("dq" if where == "dq" else "top", ()) if text.startswith(o, i)), None)
        if where in _COMMAND + ("dq",) and opener is not None:
            stack.append(_CONTEXT[opener])
            if opener == "$((":
                stack.append("arith")  # its two ")" each close one level
            out.append(opener)
            i += len(opener)
            continue
        if ch == "(" and where in ("top", "cmd", "arith"):
            stack.append("arith" if where == "arith" else "cmd")  # a subshell or a group: its ")" is its own
        elif ch == "#" and where in _COMMAND and (i == 0 or text[i - 1] in " \t\n;&|("):
            stop = text.find("\n", i)
            stop = len(text) if stop < 0 else stop
            out.append(text[i:stop])
            i = stop
            continue
        elif text.startswith("<<", i) and where in _COMMAND:
            heredoc = True
        out.append(ch)
        i += 1
    return "".join(out)


@lru_cache(maxsize=1024)
def compile_expression(expression: str):
    """A compiled (sandboxed) Jinja2 expression; raises :class:`TemplateError` when it does not
    parse. The result keeps undefined values strict."""
    try:
        return ENV.compile_expression(expression, undefined_to_none=False)
    except jinja2.TemplateSyntaxError as error:
        raise TemplateError(f"expression {expression.strip()!r} does not parse: {error.message}") from None


def evaluate_when(expression: Any, context: dict) -> bool:
    """Evaluate a ``when:`` (a string expression, a bool, or a list meaning "all of")."""
    if isinstance(expression, bool):
        return expression
    if isinstance(expression, list):
        return all(evaluate_when(item, context) for item in expression)
    result = compile_expression(str(expression))(**context)
    if isinstance(result, jinja2.runtime.Undefined):
        result._fail_with_undefined_error()
    return bool(result)


def template_loader(user_dirs: Iterable[Path]) -> jinja2.Environment:
    """An environment that finds templates in ``user_dirs`` first, then provision's ``templates/``."""
    env = _environment(loader=jinja2.FileSystemLoader([str(p) for p in user_dirs] + [str(resource_dir("templates"))]))
    return env


def render_template(env: jinja2.Environment, name: str, context: dict) -> str:
    """Render template file ``name``; a failure names the template, its line and the cause."""
    try:
        return env.get_template(name).render(context)
    except jinja2.TemplateNotFound:
        raise TemplateError(f"template {name!r} not found (searched {', '.join(env.loader.searchpath)})") from None
    except jinja2.TemplateSyntaxError as error:
        raise TemplateError(f"template {error.filename or name}:{error.lineno}: {error.message}") from None
    except (jinja2.UndefinedError, jinja2.TemplateError, TypeError, ValueError) as error:
        line = None
        for frame, lineno in traceback.walk_tb(error.__traceback__):
            if frame.f_code.co_filename.endswith(name):
                line = lineno
        where = f"{name}:{line}" if line else name
        raise TemplateError(f"template {where}: {error}") from None
