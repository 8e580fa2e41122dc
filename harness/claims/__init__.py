"""One claims framework for every family (papers, ADV-0, ProGraf, PreFT): a claim as data
(`model.py`), one decision rule and interval (`decide.py`, on `harness/stats.py`), pre-registration
you can check (`prereg.py`), checks as ordinary runs with the verdict a pure function of their
records (`runs.py`), and the verdict as saved (`verdict.py`). See `docs/claims.md`."""

from harness.claims.decide import CellTable, ConditionResult, combine, decide, evaluate, seeds_to_decide
from harness.claims.model import Claim, Condition, Departure, Op, Outcome, SeedPlan, Verdict
from harness.claims.verdict import ClaimVerdict, Look, Summary, load_verdicts, save_verdict

__all__ = ["CellTable", "Claim", "ClaimVerdict", "Condition", "ConditionResult", "Departure", "Look", "Op", "Outcome",
           "SeedPlan", "Summary", "Verdict", "combine", "decide", "evaluate", "load_verdicts", "save_verdict",
           "seeds_to_decide"]
