"""A claim check is ordinary runs: each arm is a run of the family's suite (samples = setting x
seed cells), started through the runner, so it resumes after a kill without redoing a finished
cell, runs on any executor, and shows in `harness runs`, `harness view` and the leaderboard. The
verdict is a pure function of the runs' records (`verdict_from_runs`): recomputable at any time
without recomputing a cell.

A suite that serves claims names its cells `SETTING/seedNNN` and takes the options `seeds` (how
many) and `first_seed` (from which), besides the option that picks the arm. Each look of the seed
plan runs only the seeds the earlier looks did not. A family's gate (`decide.Gate`, e.g. "the
baseline must have learned") is applied at every look, in a check and from records alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.claims.decide import CellTable, Gate, combine, evaluate
from harness.claims.model import CELL_ID, Claim, SeedPlan
from harness.claims.verdict import ClaimVerdict, Look, Summary
from harness.errors import HarnessError
from harness.records import RunConfig, RunManifest, SampleRecord
from harness.run_folder import RunFolder
from harness.runner import Executor, latest_run_with, plan_run, run_eval
from harness.stats import mean_metric
from harness.suite import get_suite

@dataclass(frozen=True)
class ClaimSuite:
    """How one claim maps onto runs of one suite."""

    claim: Claim
    suite: str
    arm_option: str = "solver"
    options: Mapping[str, Any] = field(default_factory=dict)  # every arm's other suite options
    gate: Gate | None = None  # the family's gate (registry.ClaimFamily.gate), applied at every look

    def config(self, arm: str, first_seed: int, seeds: int, stamp: str, max_connections: int = 1) -> RunConfig:
        options = dict(self.options) | {self.arm_option: arm, "seeds": seeds, "first_seed": first_seed}
        suite = get_suite(self.suite, options)  # validated; defaults left out, as `harness eval` stores them
        return RunConfig(suite=self.suite, models={}, suite_options=suite.options.model_dump(mode="json", exclude_defaults=True),
                         claim=stamp, max_connections=max_connections)


@dataclass
class ArmRun:
    run_id: str
    manifest: RunManifest
    records: list[SampleRecord]


def load_runs(run_dir: Path, run_ids: Sequence[str]) -> list[ArmRun]:
    runs = []
    for run_id in run_ids:
        folder = RunFolder(run_dir, run_id)
        if not folder.exists():
            raise HarnessError(f"run {run_id}: not found in {run_dir} (see `harness runs --run-dir {run_dir}`)")
        runs.append(ArmRun(run_id, folder.read_manifest(), list(folder.iter_samples())))
    return runs


def arm_of(run: ArmRun, arm_option: str) -> str:
    suite = get_suite(run.manifest.config.suite, run.manifest.config.suite_options)
    return str(getattr(suite.options, arm_option))


def cell_table(claim: Claim, runs: Sequence[ArmRun], arm_option: str) -> CellTable:
    """(arm, setting, seed) -> scores, with every piece of bad input named: a run of another claim
    or criterion, a cell recorded twice, a cell that errored."""
    stamps = {r.manifest.config.claim for r in runs}
    if len(stamps) > 1:
        raise HarnessError(f"claim {claim.id}: the runs were started under different criteria ({', '.join(sorted(map(str, stamps)))}); "
                           "give the runs of one check")
    stamp = stamps.pop() if stamps else None
    if stamp is None or not stamp.startswith(claim.id + "@"):
        raise HarnessError(f"claim {claim.id}: the runs were not started for it (they record {stamp!r}); "
                           f"run `check` for {claim.id}, or give its runs")
    table: dict[tuple[str, str, int], dict[str, float | None]] = {}
    for run in runs:
        arm = arm_of(run, arm_option)
        for rec in run.records:
            m = CELL_ID.match(rec.sample_id)
            if m is None:
                raise HarnessError(f"run {run.run_id}: sample {rec.sample_id!r} is not a SETTING/seedNNN cell")
            if rec.status != "ok":
                why = "; ".join(e.message for e in rec.errors)[:300]
                raise HarnessError(f"claim {claim.id}: cell {arm} {rec.sample_id} in run {run.run_id} ended in an error "
                                   f"({why}); resume that run (`harness eval --resume {run.run_id}`) or start the check again")
            key = (arm, m["setting"], int(m["seed"]))
            if key in table:
                raise HarnessError(f"claim {claim.id}: cell {arm} {rec.sample_id} is in more than one of the runs given")
            table[key] = {k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
                          for k, v in rec.scores.items()}
    return table


def seeds_covered(claim: Claim, table: CellTable) -> int:
    """The number of seeds every needed arm has in every setting, 0..N-1; N must be a planned look."""
    seeds = sorted({s for (_, _, s) in table})
    n = len(seeds)
    for arm in claim.arms_needed():
        for setting in claim.settings:
            missing = [s for s in range(max(n, 1)) if (arm, setting, s) not in table]
            if missing:
                raise HarnessError(f"claim {claim.id}: the runs lack arm {arm!r} at setting {setting!r}, seed {missing[0]} "
                                   f"(and {len(missing) - 1} more); run the check, or add that arm's runs")
    if n not in claim.plan.looks:
        raise HarnessError(f"claim {claim.id}: the runs cover {n} seeds, but the seed plan looks only at "
                           f"{', '.join(map(str, claim.plan.looks))}: give the runs of whole looks")
    return n


def summaries(claim: Claim, table: CellTable, seeds: int, level: float) -> list[Summary]:
    metrics = sorted({m for scores in table.values() for m in scores})
    out = []
    for setting in claim.settings:
        for arm in claim.arms:
            for metric in metrics:
                cells = [table.get((arm, setting, s), {}).get(metric) for s in range(seeds)]
                values = [v for v in cells if v is not None]
                if values:
                    out.append(Summary(arm=arm, setting=setting, metric=metric, value=mean_metric(values, level)))
    return out


def verdict_from_table(claim: Claim, table: CellTable, *, gate: Gate | None = None, registered: str | None = None,
                       runs: Mapping[str, list[str]] | None = None, cells_s: float = 0.0,
                       wall_s: float | None = None) -> ClaimVerdict:
    """The verdict of a table of cells. The looks are replayed in order: the check stops at the
    first look that decides, so a later look never overrides an earlier decision. A look the gate
    stops is inconclusive, whatever its intervals say, and names why."""
    n = seeds_covered(claim, table)
    level = claim.plan.look_level
    looks = []
    for size in [s for s in claim.plan.looks if s <= n]:
        results = [evaluate(c, table, range(size), level) for c in claim.conditions]
        why = gate(claim, table, range(size)) if gate is not None else None
        verdict = "inconclusive" if why else combine(r.outcome for r in results)
        looks.append(Look(seeds=size, level=level, verdict=verdict, conditions=results, gate=why))
        if looks[-1].verdict != "inconclusive":
            break
    final = looks[-1]
    needed = [c.seeds_needed for c in final.conditions if c.outcome == "undecided" and c.seeds_needed]
    return ClaimVerdict(
        claim=claim.id, sentence=claim.sentence, setting=claim.setting, criterion=claim.criterion_text(),
        criterion_hash=claim.criterion_hash(), registered=registered, verdict=final.verdict, seeds=final.seeds,
        conditions=final.conditions, looks=looks, departures=claim.departures,
        seeds_to_decide=max(needed) if final.verdict == "inconclusive" and needed and not final.gate else None,
        summaries=summaries(claim, table, final.seeds, level), runs=dict(runs or {}), cells_s=round(cells_s, 2),
        wall_s=wall_s, note=f"inconclusive by the gate: {final.gate}" if final.gate else "")


def verdict_from_runs(claim: Claim, runs: Sequence[ArmRun], *, arm_option: str = "solver", gate: Gate | None = None,
                      registered: str | None = None, wall_s: float | None = None) -> ClaimVerdict:
    """The verdict, from the records alone (`verdict_from_table` of the runs' cells)."""
    table = cell_table(claim, runs, arm_option)
    seeds_covered(claim, table)  # a missing arm or part of a look is named before a mismatched criterion
    expected = claim.stamp()
    if runs[0].manifest.config.claim != expected:
        raise HarnessError(f"claim {claim.id}: the runs were started under criterion {runs[0].manifest.config.claim}, "
                           f"the claim's is now {expected}: run the check again under the current criterion")
    arms: dict[str, list[str]] = {}
    for run in runs:
        arms.setdefault(arm_of(run, arm_option), []).append(run.run_id)
    return verdict_from_table(claim, table, gate=gate, registered=registered, runs=arms,
                              cells_s=sum(r.duration_s for run in runs for r in run.records), wall_s=wall_s)


def claim_of_runs(claim: Claim, runs: Sequence[ArmRun]) -> tuple[Claim, bool]:
    """The claim as the runs were started under it: the registered one, or -- for an exploratory
    check (`--seeds N`) -- the same conditions with a one-look plan of the seeds the runs cover.
    Returns (claim, registered?)."""
    stamp = runs[0].manifest.config.claim if runs else None
    if stamp == claim.stamp():
        return claim, True
    seeds = {int(m["seed"]) for run in runs for r in run.records if (m := CELL_ID.match(r.sample_id))}
    exploratory = claim.model_copy(update={"plan": SeedPlan(looks=(max(len(seeds), 1),), level=claim.plan.level)})
    if stamp == exploratory.stamp():
        return exploratory, False
    return claim, True  # verdict_from_runs names the mismatch


def run_arm(config: RunConfig, run_dir: Path, executor: Callable[[], Executor], progress: bool,
            log: Callable[[str], None]) -> str:
    """The arm's run: a finished run of the same config is reused, an unfinished one resumed
    (the runner finds it by its config hash), else a new one is started."""
    plan = plan_run(config, run_dir, command=["harness", "claim-check", config.claim or "", config.suite])
    done = latest_run_with(run_dir, plan.manifest.config_hash, ("complete",))
    if done is not None:
        log(f"  {config.suite} {config.suite_options}: reusing finished run {done}")
        return done
    how = f"resuming {plan.manifest.run_id} ({len(plan.done)} cells done)" if plan.resumed else f"run {plan.manifest.run_id}"
    log(f"  {config.suite} {config.suite_options}: {how}, {len(plan.todo)} cells")
    run_eval(plan, show_progress=progress, executor=executor())
    return plan.manifest.run_id


def run_check(cs: ClaimSuite, run_dir: Path, executor: Callable[[], Executor], *, plan: SeedPlan | None = None,
              registered: str | None = None, progress: bool = False,
              log: Callable[[str], None] = print) -> ClaimVerdict:
    """Run the claim's arms look by look (only the new seeds at each look) until a look decides."""
    t0 = time.perf_counter()
    claim = cs.claim if plan is None else cs.claim.model_copy(update={"plan": plan})
    stamp = claim.stamp()
    run_ids: list[str] = []
    previous = 0
    verdict: ClaimVerdict | None = None
    for size in claim.plan.looks:
        log(f"{claim.id}: look at {size} seeds")
        for arm in claim.arms:
            config = cs.config(arm, first_seed=previous, seeds=size - previous, stamp=stamp)
            run_ids.append(run_arm(config, run_dir, executor, progress, log))
        previous = size
        verdict = verdict_from_runs(claim, load_runs(run_dir, run_ids), arm_option=cs.arm_option, gate=cs.gate,
                                    registered=registered, wall_s=round(time.perf_counter() - t0, 2))
        if verdict.verdict != "inconclusive":
            break
    assert verdict is not None  # a plan has at least one look
    return verdict
