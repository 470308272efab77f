"""`provision setup-cluster`: run playbooks/setup-cluster.yml (or --playbook) on the inventory."""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Annotated

import typer

from provision.cli import command_table, options as opt
from provision.cli.output import command_again, stderr, stdout, warn

commands = command_table()


HOST_ROWS = 32  # hosts: a line each (live, and in the recap); above, hosts counted and folded into groups


def _kind_of(status: str) -> str:
    """A host's live status counted as ``done``, ``stopped``, ``waiting`` or ``at work``."""
    if status in ("done", "waiting"):
        return status
    return "stopped" if status.startswith("stopped") else "at work"


class _Live:
    """A live line per host (a terminal) or one line per changed/failed task (a log).

    The display is drawn by rich's own refresh (8 times a second) from the current state, never
    rebuilt per update: each host's status changes several times in a run, and a table of every
    host rebuilt at each change cost the controller O(hosts²): a no-change run of 1024 simulated
    hosts did not finish in 300 s (issue 37). Above :data:`HOST_ROWS` hosts it shows how many hosts
    are in each state and the first hosts still at work."""

    def __init__(self, hosts: list[str], console, quiet: bool, verbosity: int = 0, check: bool = False):
        self.state = {h: "waiting" for h in hosts}
        self.console, self.quiet = console, quiet
        self.verbosity, self.check = verbosity, check
        self.live = None
        if stderr().is_terminal and not quiet:
            from rich.live import Live

            self.live = Live(self, console=stderr(), transient=True, refresh_per_second=8)

    def __rich__(self):
        from rich.markup import escape
        from rich.table import Table

        table = Table(show_header=False, box=None)
        states = list(self.state.items())  # a copy: the hosts' threads update it meanwhile
        if len(states) <= HOST_ROWS:
            for host, text in states:
                table.add_row(escape(host), escape(text[:100]))
            return table
        counts = {"done": 0, "stopped": 0, "waiting": 0, "at work": 0}
        busy = []
        for host, text in states:
            kind = _kind_of(text)
            counts[kind] += 1
            if kind == "at work" and len(busy) < HOST_ROWS // 2:
                busy.append((host, text))
        table.add_row(f"{len(states)} hosts", ", ".join(f"{n} {kind}" for kind, n in counts.items()))
        for host, text in busy:
            table.add_row(escape(host), escape(text[:100]))
        return table

    def host(self, host: str, text: str) -> None:
        """What ``host`` is doing now (its live line, drawn at the next refresh)."""
        self.state[host] = text

    def result(self, result) -> None:
        """Print a changed or failed task (with its diff); more with -v/-vv."""
        from rich.markup import escape

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


def print_verbose(console, result, verbosity: int, check: bool) -> None:
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


@commands.command(
    "setup-cluster",
    epilog="Examples:\n\n"
    "  provision setup-cluster -i inventory/hosts.yml --check --diff\n\n"
    "  provision setup-cluster --limit 'gpu:!w3' --tags users,ssh\n\n"
    "  provision setup-cluster --list-tasks --tags nfs\n\n"
    "  provision setup-cluster -e @more-vars.yml --ask-become-pass -v",
)
def setup_cluster(
    ctx: typer.Context,
    *,
    inventory: opt.Inventory,
    check: Annotated[bool, typer.Option("--check", help="Say what would change; change nothing.")] = False,
    diff: Annotated[
        bool, typer.Option("--diff", help="Show a unified diff of each file change, headed host:path (secrets masked).")
    ] = False,
    limit: Annotated[
        list[str],
        typer.Option(
            "--limit",
            "-l",
            metavar="PATTERN",
            help="Only these hosts: names, groups, racks, w1,w2, 'gpu:!w3', 'gpu:&rack1', 'w[1:3]', 'w*' (repeatable).",
        ),
    ] = None,
    tags: Annotated[
        str, typer.Option("--tags", "-t", metavar="TAGS", help="Only tasks with these tags (comma-separated; see --list-tags).")
    ] = None,
    skip_tags: Annotated[
        str, typer.Option("--skip-tags", metavar="TAGS", help="Skip tasks with these tags (comma-separated).")
    ] = None,
    start_at_task: Annotated[
        str,
        typer.Option(
            "--start-at-task",
            metavar="NAME",
            help="Skip the tasks before the first one with this name (a glob; see --list-tasks).",
        ),
    ] = None,
    extra_vars: Annotated[
        list[str],
        typer.Option(
            "-e",
            "--extra-vars",
            metavar="KEY=VALUE|@FILE",
            help="Variables over all others: KEY=VALUE or @FILE.yml (repeatable).",
        ),
    ] = None,
    playbook: Annotated[
        Path, typer.Option("--playbook", metavar="FILE", help="Run this playbook instead of the built-in one.")
    ] = None,
    templates: Annotated[
        list[Path],
        typer.Option("--templates", metavar="DIR", help="Folder whose templates override the built-in ones (repeatable)."),
    ] = None,
    ask_become_pass: Annotated[
        bool, typer.Option("--ask-become-pass", "-K", help="Ask once for the sudo password (sent on stdin).")
    ] = False,
    ask_jupyter_pass: Annotated[
        bool, typer.Option("--ask-jupyter-pass", help="Ask for the Jupyter password of each user without jupyter_password_file.")
    ] = False,
    rotate_user_keys: Annotated[
        str,
        typer.Option(
            "--rotate-user-keys", help="Replace these users' key pairs on every node (comma-separated); old keys revoked."
        ),
    ] = None,
    verify: Annotated[
        bool, typer.Option("--verify/--no-verify", help="Check BatchMode SSH between every pair of nodes afterwards.")
    ] = True,
    list_hosts: Annotated[bool, typer.Option("--list-hosts", help="List the hosts each play would run on; touch none.")] = False,
    list_tasks: Annotated[
        bool, typer.Option("--list-tasks", help="List the tasks this run would take, with their tags.")
    ] = False,
    list_tags: Annotated[bool, typer.Option("--list-tags", help="List the tags of the tasks this run would take.")] = False,
    syntax_check: Annotated[
        bool, typer.Option("--syntax-check", help="Check the playbook, inventory and variables; touch no host.")
    ] = False,
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            help="-v: the commands each change ran on its node, all of a failure's output; -vv: all output.",
        ),
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print per-task results as JSON.")] = False,
    forks: opt.SetupForks,
    connect_timeout: opt.ConnectTimeout,
    command_timeout: opt.CommandTimeout,
    accept_new_host_keys: opt.AcceptNew,
    known_hosts: opt.KnownHosts,
    ssh_config: opt.SshConfig,
    facts_dir: opt.FactsDir,
) -> None:
    """Make the cluster ready for distributed training: the same users (uid/gid) on every node,
    passwordless SSH all-to-all, an NFS share, Anaconda in /opt with a clone per user, Jupyter,
    and (asked for) Slurm's node lines and gres.conf from the probed facts.

    Runs the built-in playbook (or --playbook) over the inventory; each role can run alone with
    --tags users|ssh|nfs|anaconda|jupyter|slurm (see --list-tags). Variables come from the inventory's
    vars:, group_vars/ and host_vars/ beside it (as in Ansible) and -e."""
    from provision.cluster_setup import ClusterSetup, SetupRequest

    request = SetupRequest(
        inventory,
        playbook,
        tuple(extra_vars or ()),
        rotate_user_keys,
        tuple(limit or ()),
        tags,
        skip_tags,
        start_at_task,
        tuple(templates or ()),
        check,
        diff,
        verify,
        command_again(ctx, drop=("limit",)),
    )
    console = stdout()
    live = _Live([], console, quiet=as_json, verbosity=verbose, check=check)
    setup = ClusterSetup(request, opt.settings(ctx), on_result=live.result, on_host=live.host)
    _warn_all(setup.warnings)
    setup.select()
    if list_hosts or list_tasks or list_tags:
        for line in setup.outline(hosts=list_hosts, tasks=list_tasks, tags=list_tags):
            typer.echo(line)
        return
    setup.users()  # who each host's cluster users are (a warning where none are set)
    jupyter_users = setup.jupyter_users() if ask_jupyter_pass else []
    _warn_all(setup.warnings)
    become = getpass.getpass("BECOME password: ") if ask_become_pass else None
    # issue 8: hashed on this machine, never sent, logged or shown; kept in this run's options only
    asked = {user: getpass.getpass(f"Jupyter password for {user}: ") for user in jupyter_users}
    setup.prepare(become_password=become, jupyter_passwords=asked)
    if syntax_check:
        typer.echo(setup.syntax_line())
        return
    live.state = {name: "waiting" for name in setup.hosts}
    if live.live:
        live.live.start()
    try:
        done = setup.run()
    finally:
        if live.live:
            live.live.stop()
    _warn_all(done.warnings)
    if as_json:
        typer.echo(json.dumps(done.as_dict(), indent=2))
    else:
        _print_recap(console, done)
    if not done.ok:
        raise typer.Exit(1)


def _warn_all(warnings: list[str]) -> None:
    """Print the warnings not printed yet (each once)."""
    while warnings:
        warn(warnings.pop(0))


def _print_recap(console, done) -> None:
    """RECAP (one line per host; above :data:`HOST_ROWS` hosts, one line per group of hosts with
    the same counts and message), the pair check and each role's summary."""
    report, pairs, bad_pairs = done.report, done.pairs, done.bad_pairs
    console.print("\nRECAP", style="bold")
    lines = recap_groups(report.recap)
    width = max((len(recap.host) for recap in lines), default=0)
    for recap in lines:
        style = "red" if recap.failed or recap.unreachable else ("yellow" if recap.changed else "green")
        console.print(recap.line(width), style=style, highlight=False, markup=False)
        if recap.message:
            console.print(f"  {recap.message}", highlight=False, markup=False, soft_wrap=True)
    if pairs:
        unchecked = done.unchecked_pairs
        tried = len(pairs) - len(unchecked)
        line = f"BatchMode SSH: {tried - len(bad_pairs)}/{tried} ordered pairs connect"
        if unchecked:
            why = "; ".join(f"{host} {reason}" for host, reason in done.stopped.items())
            line += f"; {len(unchecked)} of the {len(pairs)} not checked: {why}"
        console.print(line, highlight=False, markup=False, style="red" if unchecked or bad_pairs else None)
        for pair in bad_pairs:
            console.print(
                f"  FAILED {pair.user}@{pair.source} -> {pair.target}: {pair.message}", style="red", highlight=False, markup=False
            )
    for line in done.summary:
        style = None if line.ok else ("red" if line.checked else "yellow")
        text = ("" if line.ok or not line.checked else "FAILED ") + f"{line.role} {line.host}: {line.text}"
        console.print(text, style=style, highlight=False, markup=False, soft_wrap=True)


def recap_groups(recaps: list) -> list:
    """The recap lines to print: each host's own up to :data:`HOST_ROWS` hosts; above, one per
    group of hosts with the same counts and message (a host's own name in it read as ``<host>``),
    ``node[001-512] (512 hosts) : ok=8 changed=0 ...``, failed and unreachable groups first, then
    the largest. Every host's own line is in --json."""
    from dataclasses import replace

    if len(recaps) <= HOST_ROWS:
        return list(recaps)
    from provision.plans.hostlist import folded

    groups: dict[tuple, list] = {}
    for recap in recaps:
        message = recap.message.replace(recap.host, "<host>")
        groups.setdefault((recap.ok, recap.changed, recap.unreachable, recap.failed, recap.skipped, message), []).append(recap)
    ordered = sorted(groups.values(), key=lambda same: (not (same[0].failed or same[0].unreachable), -len(same)))
    lines = []
    for same in ordered:
        if len(same) == 1:
            lines.append(same[0])
            continue
        names = [recap.host for recap in same]
        lines.append(
            replace(
                same[0], host=f"{folded(names)} ({len(names)} hosts)", message=same[0].message.replace(same[0].host, "<host>")
            )
        )
    return lines
