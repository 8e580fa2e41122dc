"""ADV-0's claim checks (`harness adv0 check NAME`, C1..C9): each check states the claim, the
criterion it is judged by (fixed in code before any run; the README lists them and the changes
made after a first run), the paper's sentence it tests and every departure from the paper
(`paper.py`), the numbers with 95% CIs, and a verdict by the core's one rule (`verdicts.py` on
`harness.claims.decide`): reproduced, not reproduced, or inconclusive with the sample size that
would decide it. `claim_verdict` turns a finding into the core's `ClaimVerdict`.

A check is cells and a judge (`CHECKS`): a cell is one arm at one seed (`cells.Cell`: its own
training and evaluation seeds), the judge pools each arm's cells and judges them. `harness adv0
check` runs the cells as ordinary runs of the suite `adv0-check` (`check_runs.py`: records, resume
after a kill, `harness runs` / `harness view`), and the verdict is the judge of their records;
`run_check` runs the same cells in this process (the bench, tests). This module is the registry and
C1/C2, which wrap the toy world's exact checks (`toy_checks.py`). C3-C5 pit attackers against one
fixed, under-cautious IDM/MOBIL planner on the same evaluation seeds (`checks_exposure.py`); C6-C9
run whole min-max loops and compare the defenders or attackers they produce (`checks_loops.py`).

May import: `harness`, `environments.adv0`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Unpack

import numpy as np

from environments.adv0.checks.cells import ARMS, DEFAULT_SEEDS, MAX_SEED, Cell, CheckFlags, SizedFlags, arm_cells
from environments.adv0.checks.checks_exposure import exposure_cell, judge_c3, judge_c4, judge_c5
from environments.adv0.checks.checks_loops import (
    c7_ready,
    c8_cell,
    c9_cell,
    generalisation_cell,
    judge_c6,
    judge_c7,
    judge_c8,
    judge_c9,
)
from environments.adv0.checks.claims import SIZES
from environments.adv0.checks.verdicts import Finding, claim_verdict, fmt_metric, render
from environments.adv0.train import parallel
from environments.adv0.train.loop import cpu_seconds
from harness.claims.model import Scalar
from harness.errors import HarnessError
from harness.records import Metric

__all__ = ["CHECKS", "Finding", "cell", "claim_verdict", "judge", "render", "run_check"]


# ---------------------------------------------------------------- the toy checks (toy_checks.py), as cells
def _toy_numbers(numbers: dict[str, float | str | Metric | list[float]]) -> dict[str, str]:
    out = {}
    for k, v in numbers.items():
        if isinstance(v, Metric):
            out[k] = fmt_metric(v)
        elif isinstance(v, float):
            out[k] = f"{v:.4g}"
        elif isinstance(v, list):
            out[k] = "[" + ", ".join(f"{x:.4g}" if isinstance(x, float) else str(x) for x in v) + "]"
        else:
            out[k] = str(v)
    return out


def c1_cell(arm: str, seed: int, seeds: int | None = None, **_: object) -> Cell:
    """C1 at one seed: `seeds` contexts of its own (seed 0: contexts 0..n-1) and its own rng."""
    from environments.adv0.checks import toy_checks

    n = seeds or len(toy_checks.C1_SEEDS)
    values = toy_checks.c1_values(seeds=range(seed * n, seed * n + n), seed=seed)
    return Cell(check="C1", arm=arm, seed=seed, values=values)


def judge_c1(cells: Mapping[str, Sequence[Cell]], **_: object) -> Finding:
    from environments.adv0.checks import toy_checks

    [found] = arm_cells("C1", cells).values()
    values = {k: np.concatenate([np.asarray(c.values[k], dtype=float) for c in found]) for k in toy_checks.C1_VALUES}
    tc = toy_checks.judge_c1(values)
    n = int(values["kl_q"].size)
    return Finding.judge(
        "C1",
        tc.claim,
        tc.criterion,
        tc.parts,
        numbers=_toy_numbers(tc.numbers),
        notes=[tc.note],
        world="toy",
        setting=f"the toy world (two lanes, IDM followers, one attacker), {n} contexts enumerated "
        f"exactly against a fixed default IDM defender, {toy_checks.C1_ROUNDS} rounds",
    )


C2_SPAN = 1000  # seed s trains on contexts 1000 s + [0, n) and holds out 1000 s + 100 + [0, m)


def c2_cell(arm: str, seed: int, episodes: int | None = None, seeds: int | None = None, **_: object) -> Cell:
    """C2 at one seed: `seeds` training and `episodes` held-out contexts of its own (seed 0: training
    0..n-1, held out 100..100+m-1, as the check always ran)."""
    from environments.adv0.checks import toy_checks

    n, m = seeds or len(toy_checks.C2_TRAIN_SEEDS), episodes or len(toy_checks.C2_TEST_SEEDS)
    if n > 100 or m > C2_SPAN - 100:
        raise HarnessError(
            f"check C2: at most 100 training and {C2_SPAN - 100} held-out contexts a seed "
            f"(got --seeds {n}, --episodes {m}); use more seeds (--replicates) instead"
        )
    base = C2_SPAN * seed
    run = toy_checks.C2Run(train_seeds=range(base, base + n), test_seeds=range(base + 100, base + 100 + m), seed=seed)
    values = toy_checks.c2_values(run)
    return Cell(check="C2", arm=arm, seed=seed, values=values)


def judge_c2(cells: Mapping[str, Sequence[Cell]], **_: object) -> Finding:
    from environments.adv0.checks import toy_checks

    [found] = arm_cells("C2", cells).values()
    tc = toy_checks.judge_c2([c.values for c in found])
    m = sum(len(c.values["v_tau@0"]) for c in found)
    return Finding.judge(
        "C2",
        tc.claim,
        tc.criterion,
        tc.parts,
        numbers=_toy_numbers(tc.numbers),
        notes=[tc.note, "toy world only: V_tau needs J over the whole space, which highway-env cannot enumerate"],
        world="toy",
        setting=f"the toy world, {len(found)} seed(s), {m} held-out contexts in all, "
        f"{toy_checks.C2_ROUNDS} attacker/defender rounds (IDM defender tuned by CEM)",
    )


# ---------------------------------------------------------------- the registry
CellFn = Callable[..., Cell]  # (arm, seed, **flags) -> the cell
JudgeFn = Callable[..., Finding]  # (cells by arm, **flags) -> the finding
CHECKS: dict[str, tuple[CellFn, JudgeFn, str]] = {
    "C1": (c1_cell, judge_c1, "toy world, exact q* (< 1 min)"),
    "C2": (c2_cell, judge_c2, "toy world, V_tau <= E[J] and its rise under min-max (~6 min)"),
    "C3": (
        partial(exposure_cell, "C3"),
        judge_c3,
        "defender-at-fault failures vs random/scripted/CAT at equal rollouts (highway, ~7 min on 2 idle cores)",
    ),
    "C4": (
        partial(exposure_cell, "C4"),
        judge_c4,
        "failure diversity (distinct clusters) vs random/scripted/CAT (highway, ~7 min on 2 idle cores)",
    ),
    "C5": (
        partial(exposure_cell, "C5"),
        judge_c5,
        "aligned utility vs the open-loop surrogate (SAGE-like) (highway, ~4 min on 2 idle cores)",
    ),
    "C6": (
        partial(generalisation_cell, "C6"),
        judge_c6,
        "the CEM-tuned planner on held-out families, normal return within 5% (highway, ~23 min on 2 idle cores)",
    ),
    "C7": (
        partial(generalisation_cell, "C7"),
        judge_c7,
        "long: the DQN's held-out generalisation, 3 seeds (about 1.5 CPU-hours in one process at the powered size; "
        "needs the checkpoint)",
    ),
    "C8": (
        c8_cell,
        judge_c8,
        "iterated vs frozen attacker against an adapting planner (highway, ~15 min on 2 idle cores)",
    ),
    "C9": (c9_cell, judge_c9, "long: the LLM driver with vs without reflections from ADV-0's failures (model calls)"),
}
SPREAD = ("C3", "C4", "C5", "C6", "C8")  # the checks whose planner episodes `parallel.py` spreads


def known(name: str) -> str:
    key = name.upper()
    if key not in CHECKS:
        raise HarnessError(f"check {name!r} is unknown; use one of {', '.join(CHECKS)}")
    return key


def seeds_per_arm(check: str, seeds: int | None = None, replicates: int | None = None) -> int:
    """Cells per arm: `--replicates`, or for C6/C7 `--seeds` (their training seeds), else the default."""
    if check in DEFAULT_SEEDS and seeds is not None and replicates is not None and seeds != replicates:
        raise HarnessError(
            f"check {check}: --seeds {seeds} and --replicates {replicates} both count its training seeds; give one"
        )
    n = replicates or (seeds if check in DEFAULT_SEEDS else None) or DEFAULT_SEEDS.get(check, 1)
    if n > MAX_SEED + 1:
        raise HarnessError(f"check {check}: at most {MAX_SEED + 1} seeds per arm (got {n})")
    return n


def ready(check: str, family: str | None = None, **flags: Any) -> None:
    """A check's bad input, before any cell runs: one error naming the flag and the fix."""
    if family is not None and check in ("C1", "C2") and family != "toy":
        raise HarnessError(f"check {check} runs on the toy world only (it enumerates J); drop --family")
    if check == "C7":
        c7_ready(family, flags.get("dqn_checkpoint"))


def cell_flags(check: str, flags: CheckFlags) -> dict[str, int | str]:
    """The flags a cell and the judge read, as keywords (C6/C7's `seeds` are the cells themselves)."""
    out = {k: v for k, v in flags.items() if isinstance(v, (int, str))}  # the flags given (not None)
    if check in DEFAULT_SEEDS:
        out.pop("seeds", None)
    return out


def cell(check: str, arm: str, seed: int, **flags: Unpack[CheckFlags]) -> Cell:
    """One cell of a check: `arm` at `seed` (flags: the check's size flags, as `run_check` takes them)."""
    if arm not in ARMS[check]:
        raise HarnessError(f"check {check}: arm {arm!r} is unknown; use one of {', '.join(ARMS[check])}")
    return CHECKS[check][0](arm, seed, **cell_flags(check, flags))


def judge(check: str, cells: Mapping[str, Sequence[Cell]], **flags: Unpack[CheckFlags]) -> Finding:
    """The check's finding from its cells (every arm, the same seeds): a pure function of them."""
    return CHECKS[check][1](cells, **cell_flags(check, flags))


def world_of(check: str, family: str | None) -> str:
    return "toy" if check in ("C1", "C2") else family or "highway"


def run_check(
    name: str,
    *,
    episodes: int | None = None,
    seeds: int | None = None,
    family: str | None = None,
    model: str = "local/smollm2-135m",
    rounds: int | None = None,
    dqn_steps: int | None = None,
    dqn_checkpoint: str | None = None,
    replicates: int | None = None,
) -> Finding:
    """Run check `name` (C1..C9) in this process, every cell of every arm, and time it (wall and
    CPU-seconds of this process and its children). `rounds` (C3-C9), `dqn_steps` and
    `dqn_checkpoint` (C7), `model` (C9) and `replicates` (cells per arm) override a check's size."""
    key = known(name)
    flags: CheckFlags = {
        "episodes": episodes,
        "seeds": seeds,
        "family": family,
        "model": model if key == "C9" else None,
        "rounds": rounds,
        "dqn_steps": dqn_steps,
        "dqn_checkpoint": dqn_checkpoint,
    }
    ready(key, **flags)
    n = seeds_per_arm(key, seeds, replicates)
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    try:
        cells = {arm: [cell(key, arm, s, **flags) for s in range(n)] for arm in ARMS[key]}
    finally:
        parallel.shutdown()  # the workers are waited for, so their CPU-seconds count below
    finding = judge(key, cells, **flags)
    return finished(key, finding, {**flags, "replicates": n}, time.perf_counter() - wall0, cpu_seconds() - cpu0)


def finished(key: str, finding: Finding, flags: SizedFlags, wall_s: float, cpu_s: float) -> Finding:
    """The finding with its timing, where its episodes ran, and the flags that moved it off its default size."""
    if key in SPREAD and finding.world != "toy":
        finding = finding.model_copy(
            update={"notes": [*finding.notes, f"planner episodes: {parallel.current().label()}"]}
        )
    return finding.model_copy(
        update={"wall_s": wall_s, "cpu_s": cpu_s, "overrides": overrides(key, flags, finding.world)}
    )


# What `--seeds` and `--episodes` count in each check (the names of its default sizes).
SEEDS_COUNT = {"C1": "contexts", "C2": "train_contexts", "C6": "seeds", "C7": "seeds"}
EPISODES_COUNT = {"C1": "episodes", "C2": "test_contexts"}


def overrides(check: str, given: SizedFlags, world: str) -> dict[str, Scalar]:
    """The flags that moved the check off its default size (a flag equal to the default does not).
    `replicates` is the cells per arm: C6's and C7's `seeds`, one elsewhere."""
    given = given.copy()
    if check in DEFAULT_SEEDS:
        given["seeds"] = given.pop("replicates", None) or given.get("seeds")
    default = SIZES[check] | {"family": world if check in ("C1", "C2") else "highway", "replicates": 1}
    named = {"seeds": SEEDS_COUNT.get(check, "contexts"), "episodes": EPISODES_COUNT.get(check, "episodes")}
    return {k: v for k, v in given.items() if isinstance(v, (int, str)) and default.get(named.get(k, k)) != v}
