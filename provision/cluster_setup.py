"""`provision setup-cluster` below the command line: one run of the playbook over the inventory,
then the checks of what it did (BatchMode SSH between every pair of nodes, each role's summary).

The command line reads options and prints; this module decides, in one call, in this order:
read and select (inventory, playbook, variables, hosts, tasks), the --list-* outlines, the cluster
users, the prompts (through ``hooks.ask``), every task rendered and checked before any host is
touched, --syntax-check's verdict, then the run and the checks of what it did. Example::

    outcome = setup_cluster(SetupRequest(inventory=Path("inventory/hosts.yml"), tags="users,ssh"), connection)
    print(outcome.done.ok, [line.text for line in outcome.done.summary])
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from provision.engine.membership import new_hosts_problem
from provision.engine.runner import BadInput, Runner, RunOptions
from provision.engine.selection import split_tags
from provision.errors import ProvisionError
from provision.files import unignored_in_git
from provision.inventory.model import Inventory, open_inventory
from provision.inventory.patterns import name_list
from provision.operations.jupyter import checked_password
from provision.playbook.cluster_users import rotation_names, run_users
from provision.playbook.model import load_playbook
from provision.playbook.variables import Variables, parse_extra_vars
from provision.resources import resource_dir
from provision.templating.nfs_clients import unreported_addresses

# Seconds a refused run waits in all for the handshakes under way to end, so that each ends as a
# clean logout rather than a login cut off half way (which sshd logs as a closed preauth connection).
ABANDON_WAIT = 2.0


@dataclass(frozen=True)
class SetupRequest:
    """What the user asked: which playbook over which inventory, which hosts, tasks and tags, the
    variables on top, --check/--diff, and whether to verify afterwards."""

    inventory: Path | None = None
    playbook: Path | None = None
    extra_vars: tuple[str, ...] = ()
    rotate_user_keys: str | None = None
    limit: tuple[str, ...] = ()
    tags: str | None = None
    skip_tags: str | None = None
    start_at_task: str | None = None
    templates: tuple[Path, ...] = ()
    check: bool = False
    diff: bool = False
    verify: bool = True
    again: str = "provision setup-cluster"  # this command as typed, less --limit: what a hint tells to run
    list_hosts: bool = False  # --list-hosts, --list-tasks, --list-tags: the outline only, no host touched
    list_tasks: bool = False
    list_tags: bool = False
    syntax_check: bool = False  # every task rendered and checked, no host touched
    ask_become_pass: bool = False  # ask for the sudo password (hooks.ask)
    ask_jupyter_pass: bool = False  # ask each Jupyter user's password where no jupyter_password_file is set


@dataclass(frozen=True)
class SetupHooks:
    """How a run talks to the person at the terminal while it goes: ``ask`` a secret (the prompt
    shown; the answer never echoed, kept in this run's options only), ``warn`` once per warning, as
    soon as it is known, ``started`` with the hosts when the first is reached, then each final
    task ``result`` and what each ``host`` is doing."""

    ask: Callable[[str], str] | None = None
    warn: Callable[[str], None] | None = None
    started: Callable[[list[str]], None] | None = None
    result: Callable | None = None
    host: Callable | None = None


@dataclass
class SetupOutcome:
    """What a setup-cluster call gives: the lines of --list-hosts/--list-tasks/--list-tags or
    --syntax-check (``done`` None: no host was touched), or the run's result."""

    lines: list[str] = field(default_factory=list)
    done: SetupResult | None = None


@dataclass
class SetupResult:
    """The run's report (results, recap), the pair checks and each role's summary, and warnings
    found while running (a tag whose tasks did nothing)."""

    report: object
    pairs: list = field(default_factory=list)
    summary: list = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # hosts outside the run left out of a cluster-wide file
    stopped: dict[str, str] = field(default_factory=dict)  # hosts of the run that failed or were unreachable: why

    @property
    def bad_pairs(self) -> list:
        """The pairs tried that did not connect."""
        return [pair for pair in self.pairs if not pair.ok and pair.checked]

    @property
    def unchecked_pairs(self) -> list:
        """The pairs not tried: a node of the pair stopped in the run."""
        return [pair for pair in self.pairs if not pair.checked]

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.bad_pairs and all(line.ok for line in self.summary) and not self.left_out

    def as_dict(self) -> dict:
        """The --json document."""
        return {
            "results": [r.as_dict() for r in self.report.results],
            "recap": [vars(r) for r in self.report.recap],
            "verify": [vars(p) for p in self.pairs],
            "summary": [vars(line) for line in self.summary],
            "left_out": list(self.left_out),
            "stopped": dict(self.stopped),
        }


def setup_cluster(request: SetupRequest, connection, hooks: SetupHooks = SetupHooks()) -> SetupOutcome:
    """One ``provision setup-cluster``: everything the user asked in ``request``, over
    ``connection`` (its ``ssh``, ``forks`` and ``facts_dir``). Bad input raises
    :class:`ProvisionError` naming the file, line, task or host, before any command runs on a host."""
    setup = ClusterSetup(request, connection, on_result=hooks.result, on_host=hooks.host)
    tell = hooks.warn or (lambda _text: None)
    try:
        _tell(setup.warnings, tell)
        setup.select()
        if request.list_hosts or request.list_tasks or request.list_tags:
            return SetupOutcome(setup.outline(hosts=request.list_hosts, tasks=request.list_tasks, tags=request.list_tags))
        if connects_ahead(request, connection):  # the handshakes overlap the checks below
            setup.runner.connect_ahead()  # no command runs before run()
        setup.users()  # who each host's cluster users are (a warning where none are set)
        jupyter_users = setup.jupyter_users() if request.ask_jupyter_pass else []
        _tell(setup.warnings, tell)
        if (request.ask_become_pass or jupyter_users) and hooks.ask is None:
            raise ProvisionError("a password is to be asked, and nobody is there to answer")
        become = hooks.ask("BECOME password: ") if request.ask_become_pass else None
        asked = {user: hooks.ask(f"Jupyter password for {user}: ") for user in jupyter_users}
        setup.prepare(become_password=become, jupyter_passwords=asked)
        if request.syntax_check:
            return SetupOutcome([setup.syntax_line()])
        if hooks.started is not None:
            hooks.started(setup.hosts)
        return SetupOutcome(done=setup.run())  # its warnings are the result's, printed with it
    except BaseException as error:  # bad input found after the handshakes began: no command ran
        setup.runner.abandon(abandon_wait(error))
        raise


def connect_first(inventory: Inventory, limit: tuple[str, ...], connection, into: dict) -> None:
    """Start the SSH handshakes of the hosts the shipped playbook reaches first (its plays all run
    on every host: ``tests/test_setup_cli.py`` holds it to that), in the order its run takes them
    (the inventory's, less what ``--limit`` leaves out; ``--forks`` of them, and no more than a
    process keeps connected), before the playbook is read and checked: they overlap that work as
    they overlap ``prepare``'s (:meth:`provision.engine.runner.Runner.connect_ahead`). Each
    session goes ``into`` the dict as it starts (the caller abandons them on an error); none when
    ``--limit`` does not parse (the run's own check says why)."""
    from provision.inventory.patterns import PatternError, select_hosts
    from provision.transport.session import Session, open_limit

    try:
        chosen = {h.name for h in select_hosts(inventory, list(limit), what="--limit")} if limit else None
    except PatternError:
        return
    hosts = [h for h in inventory.resolve(["all"]) if chosen is None or h.name in chosen]
    for host in hosts[: min(connection.forks, open_limit())]:
        into[host.name] = Session(host, connection.ssh)
        into[host.name].open_ahead()


def connects_ahead(request: SetupRequest, connection) -> bool:
    """Whether the run starts its first hosts' handshakes before its checks end: when it is to
    touch hosts at all (not --syntax-check or --list-*), and not with --accept-new-host-keys (a
    key learned is written to known_hosts: not for a run that bad input may still refuse)."""
    lists = request.syntax_check or request.list_hosts or request.list_tasks or request.list_tags
    return not (lists or connection.ssh.accept_new_host_keys)


def connects_first(request: SetupRequest, connection) -> bool:
    """Whether :func:`connect_first` starts them before the playbook is even read: as
    :func:`connects_ahead`, with the shipped playbook only (its hosts are known before)."""
    return connects_ahead(request, connection) and not request.playbook


def abandon_wait(error: BaseException) -> float:
    """Seconds to wait for handshakes under way when ``error`` stops the run: none on Ctrl-C."""
    return 0.0 if isinstance(error, KeyboardInterrupt) else ABANDON_WAIT


def _tell(warnings: list[str], warn: Callable[[str], None]) -> None:
    """Say each warning not said yet, once (they are taken off the list)."""
    while warnings:
        warn(warnings.pop(0))


def _bad_input(call):
    try:
        return call()
    except BadInput as error:
        raise ProvisionError(str(error)) from None


class ClusterSetup:
    """The steps of one setup-cluster run, in the order :func:`setup_cluster` takes them: read on
    creation (inventory, playbook, variables), :meth:`select`, :meth:`users`, :meth:`prepare` with
    the prompted secrets, then :meth:`run`. Bad input raises :class:`ProvisionError` naming the
    file, line, task or host; :attr:`warnings` are for the user."""

    def __init__(
        self,
        request: SetupRequest,
        connection,
        on_result: Callable | None = None,
        on_host: Callable | None = None,
    ):
        self.request, self.connection = request, connection
        self.inventory = open_inventory(request.inventory)
        if not self.inventory.hosts:
            raise ProvisionError("no hosts: give an inventory with -i (see 'provision inventory --help')")
        self.source = request.playbook or resource_dir("playbooks") / "setup-cluster.yml"
        early: dict = {}
        try:
            if connects_first(request, connection):
                connect_first(self.inventory, request.limit, connection, into=early)
            self._read(request, connection, on_result, on_host)
        except BaseException as error:
            from provision.transport.session import abandon_all

            abandon_all(early.values(), abandon_wait(error))
            raise
        self.runner.sessions.update(early)

    def _read(self, request: SetupRequest, connection, on_result: Callable | None, on_host: Callable | None) -> None:
        self.plays = load_playbook(self.source)
        extra = parse_extra_vars(list(request.extra_vars))
        self.rotate = rotation_names(request.rotate_user_keys, bool(request.limit))
        if self.rotate:
            extra["rotate_user_keys"] = self.rotate
        self.variables = Variables(self.inventory, extra, connection.facts_dir)
        self.warnings = list(self.variables.warnings)
        self.options = RunOptions(
            check=request.check,
            diff=request.diff,
            forks=connection.forks,
            template_dirs=tuple(request.templates),
            step_timeout=connection.ssh.command_timeout,
            tags=split_tags(request.tags),
            skip_tags=split_tags(request.skip_tags) or frozenset(),
            start_at_task=request.start_at_task,
        )
        self.runner = Runner(
            self.plays,
            self.inventory,
            self.variables,
            connection.ssh,
            self.options,
            limit=list(request.limit) or None,
            on_result=on_result,
            on_host=on_host,
            keep_sessions=request.verify and not request.check,
        )
        self.cluster = None

    def select(self) -> None:
        """Choose the hosts and tasks (--limit, --tags, --start-at-task); bad input raises."""
        _bad_input(self.runner.select)

    @property
    def hosts(self) -> list[str]:
        """The selected hosts' names."""
        return list(self.runner.hosts)

    def outline(self, hosts: bool, tasks: bool, tags: bool) -> list[str]:
        """--list-hosts / --list-tasks / --list-tags: the lines, touching no host."""
        return [line.expandtabs(8) for line in self.runner.outline(str(self.source), hosts=hosts, tasks=tasks, tags=tags)]

    def users(self) -> list[dict]:
        """The cluster users of the selected hosts (a warning when some host has none set)."""
        if self.cluster is None:
            self.cluster = run_users(self.variables, list(self.runner.hosts.values()))
            if self.cluster.unset and self.runner.uses("cluster_users"):
                self.warnings.append(
                    f"cluster_users is not set for {name_list(self.cluster.unset)} (in the inventory's vars:, group_vars/, "
                    "host_vars/ or -e): no cluster user is made or checked there"
                )
            self.cluster.check_rotation(self.rotate)
            self.warnings += self._secrets_in_git()
        return self.cluster.users

    def _secrets_in_git(self) -> list[str]:
        """A warning for each password file (``jupyter_password_file``) that sits in a git work
        tree and is not ignored there: one ``git add -A`` would publish it (issue 34)."""
        base = self.inventory.path.parent if self.inventory.path else Path(".")
        files = {str(u["jupyter_password_file"]) for u in self.cluster.users if isinstance(u.get("jupyter_password_file"), str)}
        found = []
        for name in sorted(files):
            path = Path(name) if Path(name).is_absolute() else base / name
            top = unignored_in_git(path)
            if top is not None:
                folder = shlex.quote(str(path.parent.resolve().relative_to(top.resolve())) + "/")
                found.append(
                    f"{path}: a password file inside the git work tree {top}, not ignored there: `git add -A` would "
                    f"commit it; keep it outside, or ignore it (echo {folder} >> {shlex.quote(str(top / '.gitignore'))})"
                )
        return found

    def jupyter_users(self) -> list[str]:
        """The users whose Jupyter password must be asked (a port and no jupyter_password_file)."""
        return [u["name"] for u in self.users() if u.get("jupyter_port") is not None and not u.get("jupyter_password_file")]

    def prepare(self, become_password: str | None = None, jupyter_passwords: dict[str, str] | None = None) -> None:
        """Take the prompted secrets (checked; kept in this run's options only, never written or
        shown), then render and check every task before any command runs on a host."""
        self.users()
        self.options.become_password = become_password
        # filled in place: the runner's renderer holds this same dict
        self.options.prompted["jupyter_config"] = {
            user: checked_password(user, text) for user, text in (jupyter_passwords or {}).items()
        }
        _bad_input(self.runner.prepare)

    def syntax_line(self) -> str:
        """--syntax-check's verdict (after :meth:`prepare`)."""
        tasks = sum(1 for play in self.plays for task in play.tasks if self.runner.selected(task))
        hosts = len(self.runner.hosts)
        return f"playbook: {self.source}: syntax OK ({len(self.plays)} plays, {tasks} tasks checked for {hosts} hosts)"

    def _nfs_clients_warning(self) -> str | None:
        """When this run exported to the default list (``nfs_server`` and ``nfs_exports`` set, no
        ``nfs_clients``): hosts reached at an address they do not report (see
        :func:`provision.templating.nfs_clients.unreported_addresses`), else None."""
        runner = self.runner
        first = next(iter(runner.hosts.values()), None)
        if "nfs" not in runner.tags_taken() or first is None:
            return None
        server = self.inventory.hosts.get(str(self.variables.for_host(first).get("nfs_server")))
        if server is None:
            return None
        values = self.variables.for_host(server)
        if not values.get("nfs_exports") or "nfs_clients" in values:
            return None
        return unreported_addresses(runner.hostvars)

    def run(self) -> SetupResult:
        """Run the plays, then (unless --check or --no-verify) the pair check and each role's
        summary for what this run did; every session is closed after."""
        runner, request = self.runner, self.request
        if request.limit and "ssh" in runner.tags_taken():
            problem = new_hosts_problem(self.inventory, list(runner.hosts), runner.cache, request.again)
            if problem:
                raise ProvisionError(problem)
        report = runner.run()
        done = SetupResult(report)
        for name, why in runner.faults.items():  # issue 24.3: one node's own report fails that node, not the run
            if name in report.runs:
                done.warnings.append(f"{why} (that host fails; the other hosts went on)")
            else:  # outside this run (--limit): no task of its fails, yet the others' files lack it
                done.warnings.append(f"{why} (that host is outside this run; the hosts of the run went on)")
                done.left_out.append(name)
        for tag in runner.idle_tags(report):
            done.warnings.append(
                f"--tags {tag}: its tasks did nothing on any host (all skipped): are the variables it reads set?"
            )
        nfs_warning = self._nfs_clients_warning()
        if nfs_warning:
            done.warnings.append(nfs_warning)
        done.stopped = {n: r.stop_reason() for n, r in report.runs.items() if r.failed or r.unreachable}
        password, forks = self.options.become_password, self.options.forks
        # the checks after the run: imported when there is one to do (--no-verify, --check: none)
        from provision.checks.roles import role_summary
        from provision.checks.ssh_pairs import unchecked_pairs, verify_pairs

        try:
            selected = runner.tags_taken()  # the pair check and each role's summary only for what this run did
            if request.verify and not request.check and self.cluster.users and {"users", "ssh"} & selected:
                healthy = {n: r for n, r in report.runs.items() if not r.failed and not r.unreachable}
                names = {n: (r.facts_hostname() or n) for n, r in healthy.items()}
                user_names = {n: [u["name"] for u in self.cluster.by_host.get(n, [])] for n in report.runs}
                done.pairs = verify_pairs(
                    {n: r.session for n, r in healthy.items()}, names, {n: user_names[n] for n in healthy}, forks, password
                )
                done.pairs += unchecked_pairs(user_names, done.stopped)
            if request.verify and not request.check:  # issue 8's roles: NFS same path/content, clone sizes, Jupyter access
                variables = {n: runner.variables.for_host(h) for n, h in runner.hosts.items()}
                done.summary = role_summary(report.runs, variables, forks, password, roles=selected)
        finally:
            for run in report.runs.values():
                run.session.close()
        report.count_failed_checks(
            [(p.source, f"BatchMode SSH {p.user}@{p.source} -> {p.target}") for p in done.bad_pairs]
            + [(line.host, f"{line.role}: {line.text}") for line in done.summary if not line.ok and line.checked]
        )
        return done
