"""What a claim check leaves: the verdict with everything it was computed from and everything a
reader needs beside it (the paper's sentence, the criterion and its hash and registration date,
each look, the departures), saved as `RUN_DIR/claims/CLAIM_ID.json` for the tables and reports --
`CLAIM_ID--SUBJECT.json` for a claim checked once per subject (ProGraf's, once per generator), so a
second subject's verdict does not replace the first's.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field

from harness.claims.decide import ConditionResult
from harness.claims.model import Departure, Verdict
from harness.errors import HarnessError
from harness.records import Metric
from harness.run_folder import write_json_atomic


class Look(BaseModel):
    seeds: int
    level: float
    verdict: Verdict
    conditions: list[ConditionResult]
    gate: str | None = Field(None, description="why this look was inconclusive whatever its intervals said "
                             "(the family's gate, `harness.claims.decide.Gate`); None: not gated")


class Summary(BaseModel):
    """One arm's metric in one setting: mean over seeds with its t interval."""

    arm: str
    setting: str
    metric: str
    value: Metric


class ClaimVerdict(BaseModel):
    claim: str
    subject: str | None = Field(None, description="what the claim was checked on, where it is checked once per "
                                "subject (a generator, a model); None: the claim's one check")
    sentence: str = Field(description="the paper's claim, in the abstract's words")
    setting: str
    criterion: str
    criterion_hash: str
    registered: str | None = Field(None, description="the date the criterion's hash first appeared in git (None: not committed)")
    verdict: Verdict
    seeds: int = Field(description="the seeds (or `unit`s) of the deciding (or last) look")
    unit: str = Field("seeds", description="what `seeds` and `seeds_to_decide` count (ADV-0: episodes per arm, contexts)")
    conditions: list[ConditionResult]
    looks: list[Look]
    departures: list[Departure]
    seeds_to_decide: int | None = None
    summaries: list[Summary] = Field(default_factory=list)
    runs: dict[str, list[str]] = Field(default_factory=dict, description="arm -> the run ids its cells came from")
    cells_s: float = Field(0.0, description="the cells' summed duration, from the records")
    wall_s: float | None = Field(None, description="the check's wall time (None: recomputed from records)")
    note: str = ""

    @property
    def family(self) -> str:
        return self.claim.split(".", 1)[0]

    @property
    def label(self) -> str:
        """The claim id, with the subject when it has one."""
        return self.claim if self.subject is None else f"{self.claim} [{self.subject}]"

    def estimate_text(self) -> str:
        """The first condition that decided the verdict (else the first), as 'estimate [lo, hi]'."""
        order = {"not reproduced": "fails", "reproduced": "holds", "inconclusive": "undecided"}[self.verdict]
        c = next((c for c in self.conditions if c.outcome == order), self.conditions[0])
        if c.estimate is None:
            return f"{c.condition}: n/a"
        ci = "" if c.ci_low is None or c.ci_high is None else f" [{c.ci_low:.4g}, {c.ci_high:.4g}]"
        return f"{c.condition}: {c.estimate:.4g}{ci}"


def verdict_path(run_dir: Path, claim: str, subject: str | None = None) -> Path:
    # A subject is a model spec or a generator name: anything outside [A-Za-z0-9._-] becomes "_",
    # so it can never name another folder.
    tail = "" if subject is None else "--" + re.sub(r"[^A-Za-z0-9._-]", "_", subject)
    return run_dir / "claims" / f"{claim}{tail}.json"


def save_verdict(run_dir: Path, verdict: ClaimVerdict) -> Path:
    path = verdict_path(run_dir, verdict.claim, verdict.subject)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, verdict)
    return path


def load_verdicts(run_dirs: list[Path]) -> list[ClaimVerdict]:
    """Every saved verdict under the run dirs (a later dir wins for the same claim and subject)."""
    found: dict[tuple[str, str | None], ClaimVerdict] = {}
    for run_dir in run_dirs:
        for path in sorted((run_dir / "claims").glob("*.json")):
            try:
                v = ClaimVerdict.model_validate_json(path.read_text())
            except ValueError as exc:
                raise HarnessError(f"{path}: not a saved claim verdict ({str(exc)[:200]}); delete it or re-run the check") from None
            found[(v.claim, v.subject)] = v
    return list(found.values())
