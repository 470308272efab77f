"""doctor's one-line verdict on all its checks, and the exit code.

>>> from provision.doctor.model import CheckResult
>>> verdict([CheckResult("limits", WARN, ("n2",), "memlock 64 MiB on n2")])
('ready, with 1 warning(s) (limits)', 0)
"""

from __future__ import annotations

from provision.doctor.model import FAIL, WARN, CheckResult


def verdict(results: list[CheckResult], strict: bool = False) -> tuple[str, int]:
    """The one-line verdict and the exit code (1 when a check fails, or warns under ``strict``)."""
    failing = [r.name for r in results if r.status == FAIL or (strict and r.status == WARN)]
    warning = [r.name for r in results if r.status == WARN and not strict]
    if failing:
        return f"NOT READY: {len(failing)} check(s) fail ({', '.join(failing)})" + (
            f", {len(warning)} warn ({', '.join(warning)})" if warning else ""
        ), 1
    if warning:
        return f"ready, with {len(warning)} warning(s) ({', '.join(warning)})", 0
    return f"ready: all {len(results)} checks pass", 0
