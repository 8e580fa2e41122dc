"""ADV-0's claim checks as ordinary runs, judged from their records (issue 35, item 2).

`run_check_as_runs` runs each arm of a check as one run of the suite `adv0-check` through the core's
`harness.claims.runs.run_arm` (its samples are the arm's cells, one per seed): a finished run of
the same config is reused, an unfinished one -- killed, interrupted -- resumed, redoing no finished
cell; every run is in the run dir (`harness runs`, `harness view`) and stamped with the claim's
registered criterion (`Claim.stamp()`) in force when it started. `verdict_from_runs` is the verdict
as a pure function of the runs' records: each arm's cells read back (`cells.Cell`), judged by the
check's judge (`checks.judge`), made the core's `ClaimVerdict` (`verdicts.claim_verdict`: the
paper's sentence, the criterion hash and the date it was registered, the departures, the looks) with
the runs it came from. `harness adv0 verdict RUN...` recomputes it without playing an episode.

Bad input is one error naming the piece: a run of another suite or of no ADV-0 claim, runs of two
checks or two sizes, runs started under a criterion that is no longer the registered one, a cell
that ended in an error, an arm missing or on other seeds than the rest.

May import: `harness`, `environments.adv0`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Unpack

from pydantic import JsonValue

from environments.adv0.checks import checks
from environments.adv0.checks.cells import ARMS, DEFAULT_SEEDS, Cell, CheckFlags
from environments.adv0.checks.check_suite import FLAGS, CheckOptions
from environments.adv0.checks.claims import registered_claim
from environments.adv0.checks.verdicts import Finding, claim_verdict
from environments.adv0.train import parallel
from environments.adv0.train.loop import cpu_seconds
from harness.claims import ClaimVerdict
from harness.claims.model import cell_id
from harness.claims.runs import ArmRun, load_runs, run_arm
from harness.errors import HarnessError
from harness.records import RunConfig
from harness.runner import AsyncioExecutor, Executor
from harness.suite import get_suite

SUITE = "adv0-check"
CELL_TIMEOUT_S = 6 * 3600.0  # a cell trains and plays an arm: C7's DQN cells take most of an hour on 2 cores


def suite_options(check: str, arm: str, seeds: int, flags: CheckFlags) -> dict[str, JsonValue]:
    """One arm's suite options: the flags given (the check's `--seeds` as `contexts`, except for C6 and
    C7, whose seeds are the cells), the rest left at the check's default size."""
    given = {k: v for k, v in flags.items() if isinstance(v, (int, str))}  # not None
    options: dict[str, JsonValue] = {"check": check, "arm": arm, "seeds": seeds}
    for key in FLAGS:
        value = given.get("seeds" if key == "contexts" else key)
        if key == "contexts" and check in DEFAULT_SEEDS:
            continue
        if key == "model" and check != "C9":
            continue
        if value is not None:
            options[key] = value
    return options


def arm_config(check: str, arm: str, seeds: int, flags: CheckFlags) -> RunConfig:
    suite = get_suite(SUITE, suite_options(check, arm, seeds, flags))  # validated: bad options fail here
    return RunConfig(
        suite=SUITE,
        models={},
        suite_options=suite.options.model_dump(mode="json", exclude_defaults=True),
        claim=registered_claim(check).stamp(),
        max_connections=1,
        sample_timeout_s=CELL_TIMEOUT_S,
    )


def run_check_as_runs(
    name: str,
    run_dir: Path,
    *,
    replicates: int | None = None,
    executor: Callable[[], Executor] = AsyncioExecutor,
    log: Callable[[str], None] = print,
    **flags: Unpack[CheckFlags],
) -> tuple[Finding, ClaimVerdict]:
    """Run check `name` as one run per arm (cells = seeds) and judge the records. `flags` are
    `checks.run_check`'s size flags (episodes, seeds, family, rounds, model, dqn_steps, dqn_checkpoint)."""
    key = checks.known(name)
    if key != "C9":
        flags["model"] = None
    checks.ready(key, **flags)
    n = checks.seeds_per_arm(key, flags.get("seeds"), replicates)
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    run_ids = []
    try:
        for arm in ARMS[key]:
            run_ids.append(run_arm(arm_config(key, arm, n, flags), run_dir, executor, False, log))
    finally:
        parallel.shutdown()
    finding, verdict = verdict_from_runs(load_runs(run_dir, run_ids), wall_s=round(time.perf_counter() - t0, 2))
    notes = (
        [*finding.notes, f"planner episodes: {parallel.current().label()}"] if key in checks.SPREAD else finding.notes
    )
    return finding.model_copy(update={"cpu_s": cpu_seconds() - cpu0, "notes": notes}), verdict


def options_of(run: ArmRun) -> CheckOptions:
    config = run.manifest.config
    if config.suite != SUITE:
        raise HarnessError(
            f"run {run.run_id}: a {config.suite} run, not {SUITE}; give the runs of `harness adv0 check`"
        )
    options = get_suite(SUITE, config.suite_options).options
    assert isinstance(options, CheckOptions)
    return options


def verdict_from_runs(runs: Sequence[ArmRun], *, wall_s: float | None = None) -> tuple[Finding, ClaimVerdict]:
    """The finding and the verdict of a check from its runs' records alone (no cell is played)."""
    if not runs:
        raise HarnessError("no runs given: give the runs of one `harness adv0 check` (see `harness runs`)")
    options = [options_of(r) for r in runs]
    first, check = options[0], options[0].check
    for run, o in zip(runs, options):
        if o.check != check:
            raise HarnessError(
                f"run {run.run_id} is of check {o.check}, run {runs[0].run_id} of {check}: give one check's runs"
            )
        if o.model_dump(exclude={"arm"}) != first.model_dump(exclude={"arm"}):
            raise HarnessError(
                f"run {run.run_id} and run {runs[0].run_id} differ in size ({o.model_dump(exclude={'arm'})} vs "
                f"{first.model_dump(exclude={'arm'})}): give the runs of one check"
            )
    claim = registered_claim(check)
    for run in runs:
        stamp = run.manifest.config.claim
        if stamp is None or not stamp.startswith(claim.id + "@"):
            raise HarnessError(
                f"run {run.run_id}: not started for claim {claim.id} (it records {stamp!r}); give its runs"
            )
        if stamp != claim.stamp():
            raise HarnessError(
                f"claim {claim.id}: run {run.run_id} was started under criterion {stamp}, the registered one "
                f"is now {claim.stamp()}: run `harness adv0 check {check}` again"
            )
    cells: dict[str, list[Cell]] = {}
    arms: dict[str, list[str]] = {}
    for run, o in zip(runs, options):
        have = {rec.sample_id for rec in run.records}
        missing = [
            cell_id(o.world, s) for s in range(o.first_seed, o.first_seed + o.seeds) if cell_id(o.world, s) not in have
        ]
        if missing:
            raise HarnessError(
                f"run {run.run_id} (arm {o.arm}) lacks cell {missing[0]} and {len(missing) - 1} more: it did "
                f"not finish; resume it with `harness adv0 check {check}` and the same flags"
            )
        for rec in run.records:
            if rec.status != "ok":
                why = "; ".join(e.message for e in rec.errors)[:300]
                raise HarnessError(
                    f"claim {claim.id}: cell {o.arm} {rec.sample_id} in run {run.run_id} ended in an error "
                    f"({why}); start the check again in a new run dir, or fix the cause"
                )
            cells.setdefault(o.arm, []).append(Cell.model_validate(rec.output))
        arms.setdefault(o.arm, []).append(run.run_id)
    flags = first.flags()
    finding = checks.judge(check, cells, **flags)
    seeds = len(next(iter(cells.values()), []))
    finding = finding.model_copy(
        update={
            "wall_s": wall_s or 0.0,
            "overrides": checks.overrides(check, {**flags, "replicates": seeds}, finding.world),
        }
    )
    cells_s = sum(r.duration_s for run in runs for r in run.records)
    verdict = claim_verdict(finding).model_copy(update={"runs": arms, "cells_s": round(cells_s, 2), "wall_s": wall_s})
    return finding, verdict
