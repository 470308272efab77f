"""Run a playbook: check everything that can be checked before any command runs on a host (the
first hosts' SSH handshakes may overlap those checks: :meth:`Runner.connect_ahead`), then play
by play (hosts in parallel, bounded by ``forks``; tasks in order on each host), and recap."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from provision import defaults
from provision.engine.hostrun import HostFailed, HostRun, TaskResult
from provision.engine.membership import HostCache, cache_folder, fill_hostvars, save_records, verified_key_problem
from provision.engine.names import check_entry_keys, check_near_misses, own_fields, read_names
from provision.engine.recap import RunReport, report_of
from provision.engine.render import Render, names_in
from provision.engine.selection import BadInput, check_tags, outline, tag_selected, tasks_before
from provision.engine.statecache import IDENTITY
from provision.engine.task import becomes, perform, predict
from provision.errors import NodeFault, ProvisionError, noting_faults
from provision.inventory.model import Host, Inventory
from provision.inventory.patterns import PatternError, select_hosts
from provision.operations.base import StateKey
from provision.playbook.model import Play, Task
from provision.playbook.variables import Variables
from provision.resources import resource_dir
from provision.templating.filters import HostVars
from provision.transport.options import SshOptions
from provision.transport.parallel import fan_out

DEFERRED = {"facts", "hostvars", "play_hosts"}  # known only while running
DEFAULT_FORKS = defaults.FORKS  # one default for every command's --forks


@dataclass
class RunOptions:
    """How to run: --check, --diff, --tags/--skip-tags, --start-at-task, --forks, the become
    password, template folders."""

    check: bool = False
    diff: bool = False
    tags: frozenset[str] | None = None
    skip_tags: frozenset[str] = frozenset()
    forks: int = DEFAULT_FORKS
    become_password: str | None = field(default=None, repr=False)
    template_dirs: tuple = ()
    step_timeout: float | None = defaults.COMMAND_TIMEOUT  # seconds each change may run on a host (--command-timeout)
    start_at_task: str | None = None
    # Secrets asked at the prompt, {operation: {user: secret}}: given to that operation's tasks for
    # that user as their ``password`` argument (--ask-jupyter-pass); this run only, never shown.
    prompted: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)


class Runner:
    """A prepared run of ``plays`` on an inventory; call :meth:`prepare` then :meth:`run`."""

    def __init__(
        self,
        plays: list[Play],
        inventory: Inventory,
        variables: Variables,
        ssh: SshOptions,
        options: RunOptions,
        limit: list[str] | None = None,
        session_factory: Callable | None = None,
        on_result: Callable[[TaskResult], None] | None = None,
        on_host: Callable[[str, str], None] | None = None,
        keep_sessions: bool = False,
    ):
        from provision.transport.session import Session

        self.plays, self.inventory, self.variables, self.ssh, self.options = plays, inventory, variables, ssh, options
        self.limit_patterns = list(limit) if limit else None
        self.limit: set[str] | None = None
        self.skipped: set[int] = set()  # id() of the tasks before --start-at-task
        self.session_factory = session_factory or Session
        self.on_result, self.on_host = on_result, on_host
        self.keep_sessions = keep_sessions
        self.deferred = DEFERRED | {t.register for p in plays for t in (*p.tasks, *p.handlers) if t.register}
        self.hostvars: dict[str, dict] = {}
        self.prefetch: dict[str, dict[StateKey, None]] = {}
        self.upcoming: dict[str, list[tuple[Task, list[StateKey]]]] = {}  # per host, in task order
        self.root: dict[str, bool] = {}
        self.hosts: dict[str, Host] = {}
        self.sessions: dict[str, object] = {}  # each host's session, made on first need (connect_ahead, run)
        self.play_hosts: list[list[Host]] = []
        self.cache = HostCache(cache_folder(inventory))
        self.known: dict[str, dict | None] = {}  # each inventory host's cached record (read once)
        self.faults: dict[str, str] = {}  # {host: why} left out for what it reported (in the run, it fails that task)
        self.render = Render(
            variables, plays, self.play_hosts, self.hostvars, options.tags, options.template_dirs, options.prompted
        )

    # -- selection -----------------------------------------------------------------------------
    def selected(self, task: Task) -> bool:
        """Whether --start-at-task and --tags/--skip-tags select ``task``."""
        return id(task) not in self.skipped and tag_selected(task, self.options.tags, self.options.skip_tags)

    def select(self) -> None:
        """Check --tags/--skip-tags/--start-at-task/--limit against the playbook and inventory
        (a typo that would run nothing is refused, listing what exists) and resolve each play's
        hosts. Touches no host; :meth:`prepare` calls it."""
        if self.play_hosts:
            return
        check_tags(self.plays, self.options.tags, "--tags")
        check_tags(self.plays, self.options.skip_tags or None, "--skip-tags")
        self.skipped = tasks_before(self.plays, self.options.start_at_task)
        try:
            if self.limit_patterns:
                self.limit = {h.name for h in select_hosts(self.inventory, self.limit_patterns, what="--limit")}
            for play in self.plays:
                hosts = self._hosts_of(play)
                self.play_hosts.append(hosts)
                for host in hosts:
                    self.hosts[host.name] = host
        except PatternError as error:
            raise BadInput(str(error)) from None
        if not self.hosts:
            chosen = f"--limit {','.join(self.limit_patterns)}" if self.limit_patterns else "the inventory"
            raise BadInput(f"{chosen} leaves no host for the playbook's plays (hosts: {', '.join(self.plays[0].hosts)})")

    def outline(self, source: str, *, hosts: bool = False, tasks: bool = False, tags: bool = False) -> list[str]:
        """What --list-hosts/--list-tasks/--list-tags print for this run (no host touched)."""
        self.select()
        names = [[h.name for h in hosts_] for hosts_ in self.play_hosts]
        return outline(source, self.plays, names, self.selected, hosts=hosts, tasks=tasks, tags=tags)

    def tags_taken(self) -> frozenset[str]:
        """The tags of the tasks this run takes (after --tags, --skip-tags, --start-at-task)."""
        return frozenset(tag for play in self.plays for task in play.tasks if self.selected(task) for tag in task.tags)

    def idle_tags(self, report: RunReport) -> list[str]:
        """The tags named in --tags whose tasks did nothing on any host: every result skipped, or
        a loop over nothing (a role whose variables are not set). Ansible is silent there; this
        is said, so a typo'd variable file is not taken for a converged cluster."""
        if not self.options.tags or not any(not r.failed and not r.unreachable for r in report.recap):
            return []  # no host ran its tasks to the end: nothing to say of the tags
        acted = {(r.play, r.task) for r in report.results if r.status != "skipped"}
        idle = []
        for tag in sorted(self.options.tags - {"all", "tagged", "untagged", "always"}):
            tasks = {(p.name, t.name) for p in self.plays for t in p.tasks if tag in t.tags and self.selected(t)}
            if tasks and not tasks & acted:
                idle.append(tag)
        return idle

    def uses(self, name: str) -> bool:
        """Whether a task this run takes reads the variable ``name``."""
        return any(name in names_in([t.args, t.loop]) for play in self.plays for t in play.tasks if self.selected(t))

    def _hosts_of(self, play: Play) -> list[Host]:
        hosts = self.inventory.resolve(list(play.hosts))
        return [h for h in hosts if self.limit is None or h.name in self.limit]

    def _session(self, name: str):
        if name not in self.sessions:
            self.sessions[name] = self.session_factory(self.hosts[name], self.ssh)
        return self.sessions[name]

    # -- before any command runs on a host -----------------------------------------------------
    def connect_ahead(self) -> None:
        """Start the SSH handshakes of the hosts the run reaches first (its first play's, ``forks``
        of them and no more than a process keeps connected, in the order :meth:`run` takes them)
        and return at once, so that they overlap :meth:`prepare`'s checks and predictions (a
        no-change run of 3 hosts spent ~0.2 s there, then ~0.3 s in each handshake). Nothing
        runs on a host before :meth:`run`; :meth:`abandon` closes them when the run does not
        happen. Sessions without ``open_ahead`` connect on first use."""
        from provision.transport.session import open_limit

        self.select()
        for host in self.play_hosts[0][: min(self.options.forks, open_limit())]:
            open_ahead = getattr(self._session(host.name), "open_ahead", None)
            if open_ahead is not None:
                open_ahead()

    def abandon(self, wait: float = 0.0) -> None:
        """Close what :meth:`connect_ahead` opened, when the run is not to happen (bad input),
        waiting up to ``wait`` seconds in all for handshakes under way to end cleanly."""
        from provision.transport.session import abandon_all

        abandon_all(self.sessions.values(), wait)

    def prepare(self) -> None:
        """Resolve hosts, render every task that can be rendered now and check its arguments;
        collect the facts each host's tasks need (read in its first round trip). Raises
        :class:`BadInput` naming file:line, task, host and cause."""
        self.select()
        folders = [*self.options.template_dirs, *(play.base / "templates" for play in self.plays), resource_dir("templates")]
        try:
            check_near_misses(self.variables, self.hosts.values(), read_names(self.plays, folders))
            check_entry_keys(self.variables, self.hosts.values(), own_fields(self.plays, folders))
        except ProvisionError as error:
            raise BadInput(str(error)) from None
        with noting_faults() as left_out:
            for play, hosts in zip(self.plays, self.play_hosts, strict=True):
                for host in hosts:
                    self._predict_host(play, host)
        for name, why in left_out.items():  # also the nodes outside this run (--limit), which fail no task
            self.faults.setdefault(name, why)

    def _predict_host(self, play: Play, host: Host) -> None:
        self.prefetch.setdefault(host.name, {})
        self.upcoming.setdefault(host.name, [])
        for task in [t for t in play.tasks if self.selected(t)] + list(play.handlers):
            self.root[host.name] = self.root.get(host.name, False) or becomes(task, play)
            try:
                predicted = predict(self.render, play, task, host, self.deferred)
            except NodeFault as fault:  # this host fails the task when it reaches it; the others go on
                self.faults.setdefault(host.name, str(fault))
                predicted = []
            for keys in predicted:
                self.upcoming[host.name].append((task, keys))
                self.prefetch[host.name].update(dict.fromkeys(keys))

    # -- running -------------------------------------------------------------------------------
    def run(self) -> RunReport:
        """Run every play; a failing host stops its own tasks, never the others."""
        runs = {
            name: HostRun(
                host,
                self._session(name),
                self.options.check,
                self.options.become_password,
                on_result=self._emit,
                root=self.root.get(name, False),
                step_timeout=self.options.step_timeout,
                command_timeout=self.ssh.command_timeout,
            )
            for name, host in self.hosts.items()
        }
        self.known = {name: self.cache.load(name) for name in self.inventory.hosts}
        self._fill_hostvars(runs)
        try:
            # Threads only (workers=1): each host's session and state live across plays in this process.
            for play, hosts in zip(self.plays, self.play_hosts, strict=True):
                fan_out(hosts, lambda h, play=play: self._play_on_host(play, runs[h.name]), self.options.forks, workers=1)
                self._fill_hostvars(runs)
            if not self.options.check:
                kept = {t.register for p in self.plays for t in (*p.tasks, *p.handlers) if t.register and not t.no_log}
                save_records(self.cache, self.inventory, runs, self.hostvars, self.known, kept)
        finally:
            if not self.keep_sessions:
                fan_out(
                    list(runs.values()), lambda r: r.session.close(), self.options.forks, on_error=lambda _r, _e: None, workers=1
                )
        return report_of(runs)

    def _fill_hostvars(self, runs: dict[str, HostRun]) -> None:
        """Every host's variables as they stand now; the templates get a new snapshot of them."""
        fill_hostvars(self.hostvars, self.inventory, runs, self.known)
        self.render.hostvars = HostVars(self.hostvars)

    def _play_on_host(self, play: Play, run: HostRun) -> None:
        if run.failed or run.unreachable:
            return
        try:
            if not run.identity():
                self._status(run, "reading state")
                run.need([*self.prefetch.get(run.host.name, {}), IDENTITY], self.root.get(run.host.name, False))
                verified = getattr(run.session, "verified_host_key", lambda: None)()
                run.connected_address = getattr(run.session, "connected_address", lambda: None)()
                problem = verified_key_problem(run.host.name, run.identity(), verified)
                if problem:
                    run.untrusted, run.failed = True, True
                    raise HostFailed(problem)
            notified: list[str] = []
            for task in play.tasks:
                if self.selected(task):
                    self._task(play, task, run, notified)
            for handler in play.handlers:
                if handler.name in notified:
                    self._task(play, handler, run, None)
            if run.pending:
                self._status(run, f"applying {len(run.pending)} changes")
            run.flush()
            self._status(run, "done")
        except HostFailed as error:
            run.error = run.error or str(error)
            self._status(run, f"stopped: {error}")
        except Exception as error:  # noqa: BLE001 - whatever goes wrong on one host stops that host alone
            run.failed, run.error = True, run.error or f"{type(error).__name__}: {error}"
            self._status(run, f"stopped: {run.error}")
        finally:
            run.report_ready(everything=True)

    def _status(self, run: HostRun, text: str) -> None:
        if self.on_host:
            self.on_host(run.host.name, text)

    def _task(self, play: Play, task: Task, run: HostRun, notified: list[str] | None) -> None:
        self._status(run, task.name)
        upcoming = self.upcoming.get(run.host.name, [])
        last = max((i for i, (t, _keys) in enumerate(upcoming) if t is task), default=-1)
        wanted = [key for _t, keys in upcoming[last + 1 :] for key in keys]
        perform(self.render, play, task, run, notified, wanted, self.options.diff)

    def _emit(self, result: TaskResult) -> None:
        """Report a final result to the caller (called by the host's run, in task order)."""
        if self.on_result:
            self.on_result(result)
