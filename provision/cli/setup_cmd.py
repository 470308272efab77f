"""`provision setup-cluster`: run playbooks/setup-cluster.yml (or --playbook) on the inventory."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from provision.checks.roles import role_summary
from provision.checks.ssh_pairs import verify_pairs
from provision.cli import SafeConsole, app, fail, options as opt, stderr, warn
from provision.engine.membership import new_hosts_problem
from provision.engine.runner import BadInput, Runner, RunOptions
from provision.engine.selection import split_tags
from provision.errors import ProvisionError
from provision.inventory.model import open_inventory
from provision.inventory.patterns import name_list
from provision.operations.jupyter import remember_password
from provision.playbook.cluster_users import rotation_names, run_users
from provision.playbook.model import load_playbook
from provision.playbook.variables import Variables, parse_extra_vars
from provision.resources import resource_dir


class _Live:
    """A live line per host (a terminal) or one line per changed/failed task (a log)."""

    def __init__(self, hosts: list[str], console: Console, quiet: bool, verbosity: int = 0, check: bool = False):
        self.state = {h: "waiting" for h in hosts}
        self.console, self.quiet = console, quiet
        self.verbosity, self.check = verbosity, check
        self.live = (
            Live(self._table(), console=stderr, transient=True, refresh_per_second=8)
            if stderr.is_terminal and not quiet
            else None
        )

    def _table(self) -> Table:
        table = Table(show_header=False, box=None)
        for host, text in self.state.items():
            table.add_row(escape(host), escape(text[:100]))
        return table

    def host(self, host: str, text: str) -> None:
        """What ``host`` is doing now (its live line)."""
        self.state[host] = text
        if self.live:
            self.live.update(self._table())

    def result(self, result) -> None:
        """Print a changed or failed task (with its diff); more with -v/-vv."""
        if self.quiet or (result.status not in ("changed", "failed") and self.verbosity < 2):
            return
        label = result.item_label()
        item = f" ({label})" if label else ""
        colour = {"changed": "yellow", "failed": "red"}.get(result.status, "green")
        line = f"[{colour}]{result.status}[/{colour}]: " + escape(f"[{result.host}] {result.task}{item}")
        if result.message:
            line += escape(f": {result.message}")
        self.console.print(line, highlight=False, markup=True, soft_wrap=True)
        print_verbose(self.console, result, self.verbosity, self.check)
        for diff in result.diff:
            self.console.print(diff, highlight=False, markup=False, soft_wrap=True, end="")


def print_verbose(console: Console, result, verbosity: int, check: bool) -> None:
    """-v: the commands a task ran on its node and the whole output of a failed one; -vv: the
    output of every change too (and ok/skipped tasks are listed)."""
    if verbosity < 1:
        return
    if result.detail:
        console.print(f"  {result.detail}", highlight=False, markup=False, soft_wrap=True)
    if result.item is not None and result.item_label() != str(result.shown_item()):
        console.print(f"  item: {result.shown_item()}", highlight=False, markup=False, soft_wrap=True)
    for command in result.commands:
        prefix = "  would run: " if check else "  ran: "
        console.print(prefix + command.replace("\n", "\n" + " " * len(prefix)), highlight=False, markup=False, soft_wrap=True)
    if result.status == "failed" or verbosity >= 2:
        for output in result.output:
            console.print("  output:", highlight=False, markup=False)
            for text in output.splitlines():
                console.print(f"    {text}", highlight=False, markup=False, soft_wrap=True)


@app.command(
    "setup-cluster",
    epilog="Examples:\n\n"
    "  provision setup-cluster -i inventory/hosts.yml --check --diff\n\n"
    "  provision setup-cluster --limit 'gpu:!w3' --tags users,ssh\n\n"
    "  provision setup-cluster --list-tasks --tags nfs\n\n"
    "  provision setup-cluster -e @more-vars.yml --ask-become-pass -v",
)
def setup_cluster(
    inventory: Path = opt.INVENTORY,
    check: bool = typer.Option(False, "--check", help="Say what would change; change nothing."),
    diff: bool = typer.Option(
        False, "--diff", help="Show a unified diff of each file change, headed host:path (secrets masked)."
    ),
    limit: list[str] = typer.Option(
        None,
        "--limit",
        "-l",
        metavar="PATTERN",
        help="Only these hosts: names, groups, racks, w1,w2, 'gpu:!w3', 'gpu:&rack1', 'w[1:3]', 'w*' (repeatable).",
    ),
    tags: str = typer.Option(
        None, "--tags", "-t", metavar="TAGS", help="Only tasks with these tags (comma-separated; see --list-tags)."
    ),
    skip_tags: str = typer.Option(None, "--skip-tags", metavar="TAGS", help="Skip tasks with these tags (comma-separated)."),
    start_at_task: str = typer.Option(
        None,
        "--start-at-task",
        metavar="NAME",
        help="Skip the tasks before the first one with this name (a glob; see --list-tasks).",
    ),
    extra_vars: list[str] = typer.Option(
        None,
        "-e",
        "--extra-vars",
        metavar="KEY=VALUE|@FILE",
        help="Variables over all others: KEY=VALUE or @FILE.yml (repeatable).",
    ),
    playbook: Path = typer.Option(None, "--playbook", metavar="FILE", help="Run this playbook instead of the built-in one."),
    templates: list[Path] = typer.Option(
        None, "--templates", metavar="DIR", help="Folder whose templates override the built-in ones (repeatable)."
    ),
    ask_become_pass: bool = typer.Option(
        False, "--ask-become-pass", "-K", help="Ask once for the sudo password (sent on stdin)."
    ),
    ask_jupyter_pass: bool = typer.Option(
        False, "--ask-jupyter-pass", help="Ask for the Jupyter password of each user without jupyter_password_file."
    ),
    rotate_user_keys: str = typer.Option(
        None, "--rotate-user-keys", help="Replace these users' key pairs on every node (comma-separated); old keys revoked."
    ),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Check BatchMode SSH between every pair of nodes afterwards."),
    list_hosts: bool = typer.Option(False, "--list-hosts", help="List the hosts each play would run on; touch none."),
    list_tasks: bool = typer.Option(False, "--list-tasks", help="List the tasks this run would take, with their tags."),
    list_tags: bool = typer.Option(False, "--list-tags", help="List the tags of the tasks this run would take."),
    syntax_check: bool = typer.Option(
        False, "--syntax-check", help="Check the playbook, inventory and variables; touch no host."
    ),
    verbose: int = typer.Option(
        0,
        "--verbose",
        "-v",
        count=True,
        help="-v: the commands each change ran on its node, all of a failure's output; -vv: all output.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print per-task results as JSON."),
    forks: int = opt.SETUP_FORKS,
    connect_timeout: float = opt.CONNECT_TIMEOUT,
    command_timeout: float = typer.Option(
        300.0,
        "--command-timeout",
        min=1,
        help="Seconds each change (one step) may run on a host; a round trip may run as long as its "
        "steps together. The Anaconda installer has its own limit (its timeout, default 1800).",
    ),
    accept_new_host_keys: bool = opt.ACCEPT_NEW,
    known_hosts: Path = opt.KNOWN_HOSTS,
    ssh_config: Path = opt.SSH_CONFIG,
    facts_dir: Path = opt.FACTS_DIR,
) -> None:
    """Make the cluster ready for distributed training: the same users (uid/gid) on every node,
    passwordless SSH all-to-all, an NFS share, Anaconda in /opt with a clone per user, Jupyter,
    and (asked for) Slurm's node lines and gres.conf from the probed facts.

    Runs the built-in playbook (or --playbook) over the inventory; each role can run alone with
    --tags users|ssh|nfs|anaconda|jupyter|slurm (see --list-tags). Variables come from the inventory's
    vars:, group_vars/ and host_vars/ beside it (as in Ansible) and -e."""
    inv = open_inventory(inventory)
    if not inv.hosts:
        raise fail("no hosts: give an inventory with -i (see 'provision inventory --help')")
    source = playbook or resource_dir("playbooks") / "setup-cluster.yml"
    plays = load_playbook(source)
    extra = parse_extra_vars(extra_vars or [])
    rotate = rotation_names(rotate_user_keys, bool(limit))
    if rotate:
        extra["rotate_user_keys"] = rotate
    variables = Variables(inv, extra, facts_dir)
    for warning in variables.warnings:
        warn(warning)
    options = RunOptions(
        check=check,
        diff=diff,
        forks=forks,
        template_dirs=tuple(templates or ()),
        step_timeout=command_timeout,
        tags=split_tags(tags),
        skip_tags=split_tags(skip_tags) or frozenset(),
        start_at_task=start_at_task,
    )
    ssh = opt.ssh_options(
        known_hosts, ssh_config, accept_new=accept_new_host_keys, connect_timeout=connect_timeout, command_timeout=command_timeout
    )
    console = SafeConsole()
    live = _Live([], console, quiet=as_json, verbosity=verbose, check=check)
    runner = Runner(
        plays,
        inv,
        variables,
        ssh,
        options,
        limit=limit or None,
        on_result=live.result,
        on_host=live.host,
        keep_sessions=verify and not check,
    )
    try:
        runner.select()
    except BadInput as error:
        raise fail(str(error)) from None
    if list_hosts or list_tasks or list_tags:
        for line in runner.outline(str(source), hosts=list_hosts, tasks=list_tasks, tags=list_tags):
            typer.echo(line.expandtabs(8))
        return
    cluster = run_users(variables, list(runner.hosts.values()))
    if cluster.unset and runner.uses("cluster_users"):
        warn(
            f"cluster_users is not set for {name_list(cluster.unset)} (in the inventory's vars:, group_vars/, "
            "host_vars/ or -e): no cluster user is made or checked there"
        )
    cluster.check_rotation(rotate)
    users_of, users = cluster.by_host, cluster.users
    if ask_become_pass:
        options.become_password = getpass.getpass("BECOME password: ")
    if ask_jupyter_pass:  # issue 8: hashed on this machine, never sent, logged or shown
        for user in users:
            if user.get("jupyter_port") is not None and not user.get("jupyter_password_file"):
                try:
                    remember_password(user["name"], getpass.getpass(f"Jupyter password for {user['name']}: "))
                except ProvisionError as error:
                    raise fail(str(error)) from None
    password = options.become_password
    try:
        runner.prepare()
    except BadInput as error:
        raise fail(str(error)) from None
    if syntax_check:
        tasks = sum(1 for play in plays for task in play.tasks if runner.selected(task))
        typer.echo(f"playbook: {source}: syntax OK ({len(plays)} plays, {tasks} tasks checked for {len(runner.hosts)} hosts)")
        return
    if limit and "ssh" in runner.tags_taken():
        problem = new_hosts_problem(inv, list(runner.hosts), runner.cache, f"provision setup-cluster -i {inventory}")
        if problem:
            raise fail(problem)
    live.state = {name: "waiting" for name in runner.hosts}
    if live.live:
        live.live.start()
    try:
        report = runner.run()
    finally:
        if live.live:
            live.live.stop()
    for tag in runner.idle_tags(report):
        warn(f"--tags {tag}: its tasks did nothing on any host (all skipped): are the variables it reads set?")
    pairs, summary = [], []
    try:
        selected = runner.tags_taken()  # the pair check and each role's summary only for what this run did
        if verify and not check and users and {"users", "ssh"} & selected:
            healthy = {n: r for n, r in report.runs.items() if not r.failed and not r.unreachable}
            names = {n: (r.facts_hostname() or n) for n, r in healthy.items()}
            user_names = {n: [u["name"] for u in users_of.get(n, [])] for n in healthy}
            pairs = verify_pairs({n: r.session for n, r in healthy.items()}, names, user_names, forks, password)
        if verify and not check:  # issue 8's roles: NFS same path/content, clone sizes, Jupyter access
            variables = {n: runner.variables.for_host(h) for n, h in runner.hosts.items()}
            summary = role_summary(report.runs, variables, forks, password, roles=selected)
    finally:
        for run in report.runs.values():
            run.session.close()
    bad_pairs = [p for p in pairs if not p.ok]
    report.count_failed_checks(
        [(p.source, f"BatchMode SSH {p.user}@{p.source} -> {p.target}") for p in bad_pairs]
        + [(line.host, f"{line.role}: {line.text}") for line in summary if not line.ok]
    )
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "results": [r.as_dict() for r in report.results],
                    "recap": [vars(r) for r in report.recap],
                    "verify": [vars(p) for p in pairs],
                    "summary": [vars(line) for line in summary],
                },
                indent=2,
            )
        )
    else:
        width = max((len(r.host) for r in report.recap), default=0)
        console.print("\nRECAP", style="bold")
        for recap in report.recap:
            style = "red" if recap.failed or recap.unreachable else ("yellow" if recap.changed else "green")
            console.print(recap.line(width), style=style, highlight=False, markup=False)
            if recap.message:
                console.print(f"  {recap.message}", highlight=False, markup=False, soft_wrap=True)
        if pairs:
            console.print(f"BatchMode SSH: {len(pairs) - len(bad_pairs)}/{len(pairs)} ordered pairs connect", highlight=False)
            for pair in bad_pairs:
                console.print(
                    f"  FAILED {pair.user}@{pair.source} -> {pair.target}: {pair.message}",
                    style="red",
                    highlight=False,
                    markup=False,
                )
        for line in summary:
            console.print(
                ("" if line.ok else "FAILED ") + f"{line.role} {line.host}: {line.text}",
                style=None if line.ok else "red",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
    if not report.ok or bad_pairs or any(not line.ok for line in summary):
        raise typer.Exit(1)
