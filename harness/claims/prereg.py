"""Pre-registration you can check: every criterion's hash must be in its family's criterion log.

A family keeps one log (TOML, `[[change]]` entries) beside its claims. An entry names the claim,
the criterion hash it registers, the date, what changed, why, and whether any result of the claim
had been seen when the change was written -- an amendment after a look says so. A test asserts
that every claim's current hash has an entry (`unregistered`), so a criterion cannot change
silently; `first_committed` reads from git the date the hash first appeared in the log, which is
printed beside the verdict.
"""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from harness.claims.model import Claim
from harness.errors import HarnessError, invalid


class LogEntry(BaseModel):
    claim: str
    hash: str = Field(min_length=16, max_length=16)
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    change: str = Field(min_length=1, description="what the criterion is now, or what changed")
    why: str = Field(min_length=1)
    results_seen: str = Field(min_length=1, description="'none', or which results had been seen when it was written")


def load_log(path: Path) -> list[LogEntry]:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise HarnessError(f"criterion log {path}: not found (a family keeps one beside its claims)") from None
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"criterion log {path}: does not parse ({exc}); fix the entry it names") from None
    entries = []
    for i, entry in enumerate(data.get("change", []), start=1):
        try:
            entries.append(LogEntry.model_validate(entry))
        except ValidationError as exc:
            raise HarnessError(invalid(exc, f"criterion log {path}: does not parse: [[change]] entry {i}",
                                       "fix that entry")) from None
    return entries


def unregistered(claims: Iterable[Claim], log: list[LogEntry]) -> list[str]:
    """One line per claim whose current criterion hash has no log entry (empty: all registered)."""
    known = {(e.claim, e.hash) for e in log}
    return [f"{c.id}: criterion {c.criterion_hash()} ({c.criterion_text()}) has no entry in the criterion log; "
            f"add one saying what changed, why, and which results had been seen"
            for c in claims if (c.id, c.criterion_hash()) not in known]


def entry_for(claim: Claim, log: list[LogEntry]) -> LogEntry | None:
    matches = [e for e in log if e.claim == claim.id and e.hash == claim.criterion_hash()]
    return matches[0] if matches else None


@lru_cache(maxsize=256)
def first_committed(log_path: Path, criterion_hash: str) -> str | None:
    """The date (YYYY-MM-DD) of the first commit that put this hash in the log; None when it is
    not committed yet, or git cannot tell (no repository, no git). The log's history is followed
    across renames (a family's log moves when the family is split into subpackages), so a move is
    not mistaken for the criterion's first commit; `--follow` drops `--reverse`, so newest first."""
    try:
        out = subprocess.run(["git", "log", "--follow", "--format=%as", "-S", criterion_hash, "--", log_path.name],
                             capture_output=True, text=True, timeout=20, cwd=log_path.parent)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.split()
    return lines[-1] if out.returncode == 0 and lines else None
