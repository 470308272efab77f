"""doctor's verdict line and exit code (provision.doctor.verdict)."""

from __future__ import annotations

from provision.doctor.model import CheckResult
from provision.doctor.verdict import verdict


def test_verdict_and_strict():
    results = [CheckResult("a", "pass"), CheckResult("b", "warn")]
    assert verdict(results) == ("ready, with 1 warning(s) (b)", 0)
    assert verdict(results, strict=True)[1] == 1
