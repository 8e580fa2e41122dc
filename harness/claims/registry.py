"""Every family's claims, found by entry point (group `harness.claims`, as suites are found under
`harness.suites`): each names a function that returns its `ClaimFamily` -- the claims and the
criterion log they are registered in. `harness claims list` and the pre-registration test read all
of them from here; no family is named in the core."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

from harness.claims.decide import Gate
from harness.claims.model import Claim
from harness.claims.prereg import first_committed
from harness.errors import HarnessError

GROUP = "harness.claims"


@dataclass(frozen=True)
class ClaimFamily:
    name: str
    log: Path  # the family's criterion log (prereg.py)
    claims: tuple[Claim, ...]
    # How a claim's arms are runs: the suite that serves it (None: this family's checks do not run
    # as suite runs yet) and the suite option that picks the arm.
    suite_of: Callable[[Claim], str] | None = None
    arm_option: str = "solver"
    # A precondition outside the conditions, applied at every look when the verdict is computed
    # (during a check and from records alone): a gated look is inconclusive (decide.Gate).
    gate: Gate | None = None
    # For a family whose checks are not cell runs: the command that runs a check / recomputes a verdict.
    check_command: str = ""
    verdict_command: str = ""

    def claim(self, claim_id: str) -> Claim:
        for c in self.claims:
            if c.id == claim_id or c.id.split(".", 1)[-1] == claim_id:
                return c
        raise HarnessError(f"unknown claim {claim_id!r} in family {self.name}: choose one of "
                           + ", ".join(c.id for c in self.claims))

    def registered(self, claim: Claim) -> str | None:
        return first_committed(self.log, claim.criterion_hash())


def families() -> dict[str, ClaimFamily]:
    found: dict[str, ClaimFamily] = {}
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        loader: Callable[[], ClaimFamily] = ep.load()
        found[ep.name] = loader()
    return found


def find_claim(claim_id: str) -> tuple[ClaimFamily, Claim]:
    """A claim by its id (`papers.procti_synth_imputation`), across families."""
    all_families = families()
    family = all_families.get(claim_id.split(".", 1)[0])
    if family is None:
        raise HarnessError(f"unknown claim {claim_id!r}: its family {claim_id.split('.', 1)[0]!r} is not one of "
                           + ", ".join(all_families) + " (`harness claims list` names every claim)")
    return family, family.claim(claim_id)
