"""How `provision setup-cluster` shows a run: the live line per host (or per changed task in a
log), each changed or failed task with -v's detail, and the recap (one line per host, folded into
groups above :data:`HOST_ROWS` hosts), the pair check and each role's summary."""

from __future__ import annotations

import json

import typer

from provision.cli.output import stderr, warn

HOST_ROWS = 32  # hosts: a line each (live, and in the recap); above, hosts counted and folded into groups


def _kind_of(status: str) -> str:
    """A host's live status counted as ``done``, ``stopped``, ``waiting`` or ``at work``."""
    if status in ("done", "waiting"):
        return status
    return "stopped" if status.startswith("stopped") else "at work"


class LiveView:
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

    def start(self, hosts: list[str]) -> None:
        """The run begins on ``hosts``: each waits, drawn live on a terminal."""
        self.state = {name: "waiting" for name in hosts}
        if self.live:
            self.live.start()

    def stop(self) -> None:
        """The run is over (or never began): the live lines go."""
        if self.live and self.live.is_started:
            self.live.stop()

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


def warn_all(warnings: list[str]) -> None:
    """Print the warnings not printed yet (each once)."""
    while warnings:
        warn(warnings.pop(0))


def print_recap(console, done) -> None:
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


def show_run(console, done, as_json: bool) -> None:
    """The run's warnings on stderr, then its results as JSON or the recap."""
    warn_all(done.warnings)
    if as_json:
        typer.echo(json.dumps(done.as_dict(), indent=2))
    else:
        print_recap(console, done)
