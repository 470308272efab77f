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

from provision.cli import app, fail, options as opt, stderr
from provision.engine.membership import new_hosts_problem
from provision.engine.roles_summary import role_summary
from provision.engine.runner import BadInput, Runner, RunOptions
from provision.engine.verify import verify_pairs
from provision.errors import ProvisionError
from provision.inventory import open_inventory
from provision.operations.jupyter import remember_password
from provision.playbook.model import load_playbook
from provision.playbook.variables import Variables, check_cluster_users, parse_extra_vars
from provision.resources import resource_dir


class _Live:
    """A live line per host (a terminal) or one line per changed/failed task (a log)."""

    def __init__(self, hosts: list[str], console: Console, quiet: bool):
        self.state = {h: "waiting" for h in hosts}
        self.console, self.quiet = console, quiet
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
        """Print a changed or failed task (with its diff)."""
        if self.quiet or result.status not in ("changed", "failed"):
            return
        item = (
            f" ({result.item.get('name') if isinstance(result.item, dict) and 'name' in result.item else result.item})"
            if result.item is not None
            else ""
        )
        colour = "yellow" if result.status == "changed" else "red"
        line = f"[{colour}]{result.status}[/{colour}]: " + escape(f"[{result.host}] {result.task}{item}")
        if result.message:
            line += escape(f": {result.message}")
        self.console.print(line, highlight=False, markup=True, soft_wrap=True)
        for diff in result.diff:
            self.console.print(diff, highlight=False, markup=False, soft_wrap=True, end="")


@app.command(
    "setup-cluster",
    epilog="Examples:\n\n"
    "  provision setup-cluster -i inventory/hosts.yml --check --diff\n\n"
    "  provision setup-cluster -i inventory/hosts.yml --limit node01 --tags users\n\n"
    "  provision setup-cluster -e @more-vars.yml --ask-become-pass",
)
def setup_cluster(
    inventory: Path = opt.INVENTORY,
    check: bool = typer.Option(False, "--check", help="Say what would change; change nothing."),
    diff: bool = typer.Option(False, "--diff", help="Show a unified diff of each file change (secrets masked)."),
    limit: list[str] = typer.Option(None, "--limit", "-l", help="Only these hosts or groups (repeatable)."),
    tags: str = typer.Option(None, "--tags", "-t", help="Only tasks with these tags (comma-separated)."),
    skip_tags: str = typer.Option(None, "--skip-tags", help="Skip tasks with these tags."),
    extra_vars: list[str] = typer.Option(None, "-e", "--extra-vars", help="KEY=VALUE or @FILE.yml (repeatable)."),
    playbook: Path = typer.Option(None, "--playbook", help="Run this playbook instead of setup-cluster.yml."),
    templates: list[Path] = typer.Option(None, "--templates", help="Folder whose templates override the built-in ones."),
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
    as_json: bool = typer.Option(False, "--json", help="Print per-task results as JSON."),
    forks: int = opt.FORKS,
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
) -> None:
    """Cluster users with the same uid/gid on every node, and passwordless SSH all-to-all."""
    inv = open_inventory(inventory)
    extra = parse_extra_vars(extra_vars or [])
    users = check_cluster_users(extra.get("cluster_users", inv.vars.get("cluster_users")))
    plays = load_playbook(playbook or resource_dir("playbooks") / "setup-cluster.yml")
    if not inv.hosts and not limit:
        raise fail("no hosts: give an inventory with -i")
    if rotate_user_keys:
        rotate = [name.strip() for name in rotate_user_keys.split(",") if name.strip()]
        unknown = sorted(set(rotate) - {u["name"] for u in users if u.get("state", "present") != "absent"})
        if unknown:
            raise fail(f"--rotate-user-keys: {', '.join(unknown)} not in cluster_users (present)")
        if limit:  # the new keys must reach every node in the same run, the old ones leave every node
            raise fail("--rotate-user-keys replaces keys on every node: run it without --limit")
        extra["rotate_user_keys"] = rotate
    users = [u for u in users if u.get("state", "present") != "absent"]
    password = None
    if ask_become_pass:
        password = getpass.getpass("BECOME password: ")
    if ask_jupyter_pass:  # issue 8: hashed on this machine, never sent, logged or shown
        for user in users:
            if user.get("jupyter_port") is not None and not user.get("jupyter_password_file"):
                try:
                    remember_password(user["name"], getpass.getpass(f"Jupyter password for {user['name']}: "))
                except ProvisionError as error:
                    raise fail(str(error)) from None
    options = RunOptions(
        check=check,
        diff=diff,
        forks=forks,
        become_password=password,
        template_dirs=tuple(templates or ()),
        step_timeout=command_timeout,
        tags=frozenset(t.strip() for t in tags.split(",") if t.strip()) if tags else None,
        skip_tags=frozenset(t.strip() for t in skip_tags.split(",") if t.strip()) if skip_tags else frozenset(),
    )
    ssh = opt.ssh_options(
        known_hosts, ssh_config, accept_new=accept_new_host_keys, connect_timeout=connect_timeout, command_timeout=command_timeout
    )
    console = Console()
    live = _Live([], console, quiet=as_json)
    runner = Runner(
        plays,
        inv,
        Variables(inv, extra),
        ssh,
        options,
        limit=limit or None,
        on_result=live.result,
        on_host=live.host,
        keep_sessions=verify and not check,
    )
    try:
        runner.prepare()
    except BadInput as error:
        raise fail(str(error)) from None
    ssh_selected = options.tags is None or "ssh" in options.tags
    if limit and ssh_selected and "ssh" not in options.skip_tags:
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
    pairs, summary = [], []
    try:
        selected = options.tags  # the pair check and each role's summary only for what this run did
        if verify and not check and users and (selected is None or {"users", "ssh"} & selected):
            healthy = {n: r for n, r in report.runs.items() if not r.failed and not r.unreachable}
            names = {n: (r.facts_hostname() or n) for n, r in healthy.items()}
            pairs = verify_pairs({n: r.session for n, r in healthy.items()}, names, [u["name"] for u in users], forks, password)
        if verify and not check:  # issue 8's roles: NFS same path/content, clone sizes, Jupyter access
            variables = {n: runner.variables.for_host(h) for n, h in runner.hosts.items()}
            summary = role_summary(report.runs, variables, forks, password, roles=selected)
    finally:
        for run in report.runs.values():
            run.session.close()
    bad_pairs = [p for p in pairs if not p.ok]
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
                f"{line.role} {line.host}: {line.text}",
                style=None if line.ok else "red",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
    if not report.ok or bad_pairs or any(not line.ok for line in summary):
        raise typer.Exit(1)
