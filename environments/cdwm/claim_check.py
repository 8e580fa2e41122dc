"""A CDWM claim's check as ordinary runs of suite `cdwm-planner` (planner_suite.py), and its
verdict as a pure function of their records (claims.verdict_from_table).

Each arm of the claim is one run, the arm in the suite option `world_model`; the looks of the seed
plan run only the episodes the earlier looks did not (`first_seed`), so a killed check resumes and a
finished arm is reused (`harness.claims.runs.run_arm`). The core's own `run_check` is not used: it
decides with the t interval, and CDWM's binary conditions are registered under Newcombe's paired
interval (claims.py).

Before any run, every adapter arm's reader is loaded for every world of the check (`check_adapters`):
an adapter trained for another world's action classes, or a world the generative baseline cannot read
(one without an observation reader), is named then, not after the other arms' runs.

May import: `harness`, `agents`, `environments.cdwm`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agents.trained_world_model import TrainedWorldModel
from environments.cdwm.claims import verdict_from_table
from environments.cdwm.generative_model import GenerativeModel
from environments.cdwm.planner_suite import CdwmPlannerSuite, PlannerOptions
from environments.cdwm.value_model import ValueModel
from harness.claims import Claim, ClaimVerdict
from harness.claims.runs import cell_table, claim_of_runs, load_runs, run_arm
from harness.errors import HarnessError, invalid
from harness.records import RunConfig
from harness.runner import Executor

SUITE = CdwmPlannerSuite.name
ARM_OPTION = "world_model"
ADAPTER_READERS: dict[str, Callable[[str, str], object]] = {
    "trained": TrainedWorldModel.load, "value": ValueModel.load, "generative": GenerativeModel.load}


def check_adapters(options: Mapping[str, Any], arms: Sequence[str]) -> None:
    """Each adapter arm's reader for each world of `options` (raises the reader's error naming the
    adapter file or the world); an arm without its adapter is left to the suite's own check."""
    worlds = [w.strip() for w in str(options.get("worlds", "minigrid")).split(",") if w.strip()]
    for arm in arms:
        directory = str(options.get(f"{arm}_adapter") or "")
        if arm in ADAPTER_READERS and directory:
            for world in worlds:
                ADAPTER_READERS[arm](directory, world)


def settings_read(claim: Claim) -> tuple[str, ...]:
    """The settings a claim's conditions read (a check runs no other)."""
    return tuple(dict.fromkeys(c.setting for c in claim.conditions))


def arm_config(claim: Claim, arm: str, first_seed: int, seeds: int, options: Mapping[str, Any]) -> RunConfig:
    """One arm's run of one look: the check's options, the arm, the look's episodes, the stamp."""
    merged = dict(options) | {ARM_OPTION: arm, "settings": ",".join(settings_read(claim)),
                              "seeds": seeds, "first_seed": first_seed}
    try:  # a bad option, or an arm the suite does not serve yet, is named before anything runs
        validated = PlannerOptions.model_validate(merged)
    except ValidationError as exc:
        raise HarnessError(invalid(exc, f"claim {claim.id}, arm {arm!r}: suite {SUITE}'s options {merged}",
                                   f"give options {SUITE} takes (`harness describe {SUITE}`)")) from None
    return RunConfig(suite=SUITE, suite_options=validated.model_dump(mode="json", exclude_defaults=True),
                     claim=claim.stamp(), max_connections=1)


def verdict_from_runs(claim: Claim, run_dir: Path, run_ids: Sequence[str],
                      registered: Callable[[Claim], str | None] | None = None,
                      wall_s: float | None = None) -> ClaimVerdict:
    """The verdict from the runs' records alone (`harness cdwm verdict`), under the criterion the
    runs were started with: the registered one, or an exploratory check's one-look plan.
    `registered`: the registration date of a criterion (None for an exploratory one)."""
    runs = load_runs(run_dir, run_ids)
    table = cell_table(claim, runs, ARM_OPTION)  # names runs of another claim, a cell twice, an errored cell
    claim, is_registered = claim_of_runs(claim, runs)
    if runs[0].manifest.config.claim != claim.stamp():
        raise HarnessError(f"claim {claim.id}: the runs were started under criterion {runs[0].manifest.config.claim}, "
                           f"the claim's is now {claim.stamp()}: run the check again under the current criterion")
    date = registered(claim) if registered is not None and is_registered else None
    verdict = verdict_from_table(claim, table, date)
    arms: dict[str, list[str]] = {}
    for run in runs:
        arms.setdefault(str(run.manifest.config.suite_options.get(ARM_OPTION, "none")), []).append(run.run_id)
    return verdict.model_copy(update={"runs": arms, "wall_s": wall_s,
                                      "cells_s": round(sum(r.duration_s for run in runs for r in run.records), 2)})


def run_claim(claim: Claim, run_dir: Path, options: Mapping[str, Any], executor: Callable[[], Executor], *,
              arms: Sequence[str] | None = None, registered: str | None = None, progress: bool = False,
              log: Callable[[str], None] = print) -> ClaimVerdict:
    """Every arm, look by look, until a look decides (or the last look is run)."""
    check_adapters(options, arms or claim.arms)
    t0 = time.perf_counter()
    run_ids: list[str] = []
    previous = 0
    verdict: ClaimVerdict | None = None
    for size in claim.plan.looks:
        log(f"{claim.id}: look at {size} episodes per arm and setting")
        for arm in arms or claim.arms:
            config = arm_config(claim, arm, previous, size - previous, options)
            run_ids.append(run_arm(config, run_dir, executor, progress, log))
        previous = size
        verdict = verdict_from_runs(claim, run_dir, run_ids, wall_s=round(time.perf_counter() - t0, 2))
        if verdict.verdict != "inconclusive":
            break
    assert verdict is not None  # a seed plan has at least one look
    return verdict.model_copy(update={"registered": registered})
