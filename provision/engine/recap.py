"""The end of a run: every task result and Ansible's recap line per host."""

from __future__ import annotations

from dataclasses import dataclass, field

from provision.engine.hostrun import HostRun, TaskResult


@dataclass
class Recap:
    """Ansible's recap line for one host."""

    host: str
    ok: int = 0
    changed: int = 0
    unreachable: int = 0
    failed: int = 0
    skipped: int = 0
    round_trips: int = 0
    message: str = ""

    def line(self, width: int = 0) -> str:
        """``HOST : ok=N changed=N unreachable=N failed=N skipped=N``."""
        return (
            f"{self.host.ljust(width)} : ok={self.ok} changed={self.changed} unreachable={self.unreachable} "
            f"failed={self.failed} skipped={self.skipped}"
        )


@dataclass
class RunReport:
    """Every task result, the recap per host and the hosts' final state."""

    results: list[TaskResult] = field(default_factory=list)
    recap: list[Recap] = field(default_factory=list)
    runs: dict[str, HostRun] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no host failed or was unreachable."""
        return not any(r.failed or r.unreachable for r in self.recap)

    def count_failed_checks(self, failures: list[tuple[str, str]]) -> None:
        """Count each failed check of the verification after the run, ``(host, what failed)``,
        in that host's recap (``failed=N``), so that a run which exits 1 for a failed check never
        shows a clean recap; the first one becomes the host's message when it has none."""
        by_host = {recap.host: recap for recap in self.recap}
        for host, text in failures:
            recap = by_host.get(host)
            if recap is None:
                continue
            recap.failed += 1
            if not recap.message:
                recap.message = f"verification failed: {text}"


def report_of(runs: dict[str, HostRun]) -> RunReport:
    """Every host's task results in order, and its recap line (a host that stopped without a
    failed task counts one failure, with why it stopped)."""
    report = RunReport(runs=runs)
    for name, run in runs.items():
        recap = Recap(name, round_trips=run.round_trips)
        for result in run.results:
            report.results.append(result)
            if result.status in ("ok", "changed"):
                recap.ok += 1
            recap.changed += result.status == "changed"
            recap.failed += result.status == "failed"
            recap.skipped += result.status == "skipped"
        if run.unreachable:
            recap.unreachable, recap.message = 1, run.unreachable
        elif run.failed and not recap.failed:
            recap.failed = 1
        if run.failed and not recap.message:
            recap.message = next((r.message for r in run.results if r.status == "failed"), run.error or "failed")
        report.recap.append(recap)
    return report
