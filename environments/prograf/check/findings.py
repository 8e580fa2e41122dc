"""What a check returns: pass, the measured value, a reason and a failure pattern."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Finding:
    passed: bool
    measured: Any = None
    reason: str = ""
    pattern: str | None = None


def ok(measured: Any, reason: str) -> Finding:
    return Finding(True, measured, reason)


def fail(pattern: str, measured: Any, reason: str) -> Finding:
    return Finding(False, measured, reason, pattern)


def count_finding(n: int, want: int, what: str) -> Finding:
    if n == want:
        return ok(n, f"{n} {what}")
    pattern = "extra_element" if n > want else "count_mismatch"
    return fail(pattern, n, f"{n} {what}, expected {want}")
