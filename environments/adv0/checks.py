"""ADV-0's claim checks (`harness adv0 check NAME`, C1..C9): each check states the claim, the
criterion it is judged by (fixed in code before any run; the README lists them and the changes
made after a first run), the paper's sentence it tests and every departure from the paper
(`paper.py`), the numbers with 95% CIs, and a verdict by the core's one rule (`verdicts.py` on
`harness.claims.decide`): reproduced, not reproduced, or inconclusive with the sample size that
would decide it. `claim_verdict` turns a finding into the core's `ClaimVerdict`.

This module is the registry (`CHECKS`, `run_check`) and C1/C2, which wrap the toy world's exact
checks (`toy_checks.py`). C3-C5 pit attackers against one fixed, under-cautious IDM/MOBIL planner
on the same evaluation seeds (`checks_exposure.py`); C6-C9 run whole min-max loops and compare the
defenders or attackers they produce (`checks_loops.py`).

May import: `harness`, `environments.adv0`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from environments.adv0 import parallel
from environments.adv0.claims import SIZES
from environments.adv0.checks_exposure import check_c3, check_c4, check_c5
from environments.adv0.checks_loops import check_c6, check_c7, check_c8, check_c9
from environments.adv0.loop import cpu_seconds
from environments.adv0.verdicts import Finding, claim_verdict, fmt_metric, render
from harness.claims.model import Scalar
from harness.errors import HarnessError
from harness.records import Metric

__all__ = ["CHECKS", "Finding", "claim_verdict", "render", "run_check"]


# ---------------------------------------------------------------- the toy checks (toy_checks.py), as findings
def _toy_numbers(numbers: dict[str, Any]) -> dict[str, str]:
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


def check_c1(episodes: int | None = None, seeds: int | None = None, **_: object) -> Finding:
    from environments.adv0 import toy_checks

    n = seeds or len(toy_checks.C1_SEEDS)
    tc = toy_checks.check_c1(seeds=range(n))
    return Finding.judge(
        "C1",
        tc.claim,
        tc.criterion,
        tc.parts,
        numbers=_toy_numbers(tc.numbers),
        notes=[tc.note],
        wall_s=tc.wall_s,
        world="toy",
        setting=f"the toy world (two lanes, IDM followers, one attacker), {n} contexts enumerated "
        f"exactly against a fixed default IDM defender, {toy_checks.C1_ROUNDS} rounds",
    )


def check_c2(episodes: int | None = None, seeds: int | None = None, **_: object) -> Finding:
    from environments.adv0 import toy_checks

    train = range(seeds or len(toy_checks.C2_TRAIN_SEEDS))
    test = range(100, 100 + (episodes or len(toy_checks.C2_TEST_SEEDS)))
    tc = toy_checks.check_c2(train_seeds=train, test_seeds=test)
    return Finding.judge(
        "C2",
        tc.claim,
        tc.criterion,
        tc.parts,
        numbers=_toy_numbers(tc.numbers),
        notes=[tc.note, "toy world only: V_tau needs J over the whole space, which highway-env cannot enumerate"],
        wall_s=tc.wall_s,
        world="toy",
        setting=f"the toy world, {len(train)} training and {len(test)} held-out contexts, "
        f"{toy_checks.C2_ROUNDS} attacker/defender rounds (IDM defender tuned by CEM)",
    )


CHECKS: dict[str, tuple[Callable[..., Finding], str]] = {
    "C1": (check_c1, "toy world, exact q* (< 1 min)"),
    "C2": (check_c2, "toy world, V_tau <= E[J] and its rise under min-max (~6 min)"),
    "C3": (
        check_c3,
        "failure exposure vs random/scripted/CAT, attacker-at-fault <= 5% (highway, ~7 min on 2 idle cores)",
    ),
    "C4": (check_c4, "failure diversity (distinct clusters) vs random/scripted/CAT (highway, ~7 min on 2 idle cores)"),
    "C5": (check_c5, "aligned utility vs the open-loop surrogate (SAGE-like) (highway, ~4 min on 2 idle cores)"),
    "C6": (
        check_c6,
        "the CEM-tuned planner on held-out families, normal return within 5% (highway, ~23 min on 2 idle cores)",
    ),
    "C7": (
        check_c7,
        "long: the DQN's held-out generalisation, 3 seeds (about 1.5 CPU-hours in one process at the powered size; needs the checkpoint)",
    ),
    "C8": (check_c8, "iterated vs frozen attacker against an adapting planner (highway, ~15 min on 2 idle cores)"),
    "C9": (check_c9, "long: the LLM driver with vs without reflections from ADV-0's failures (model calls)"),
}


SPREAD = ("C3", "C4", "C5", "C6", "C8")  # the checks whose planner episodes `parallel.py` spreads


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
) -> Finding:
    """Run check `name` (C1..C9) and time it (wall and CPU-seconds of this process and its children).
    `rounds` (C3-C9), `dqn_steps` and `dqn_checkpoint` (C7) and `model` (C9) override a check's size."""
    key = name.upper()
    if key not in CHECKS:
        raise HarnessError(f"check {name!r} is unknown; use one of {', '.join(CHECKS)}")
    if family is not None and key in ("C1", "C2") and family != "toy":
        raise HarnessError(f"check {key} runs on the toy world only (it enumerates J); drop --family")
    sizes: dict[str, Any] = {
        k: v
        for k, v in (("rounds", rounds), ("dqn_steps", dqn_steps), ("dqn_checkpoint", dqn_checkpoint))
        if v is not None
    }
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    try:
        finding = CHECKS[key][0](episodes=episodes, seeds=seeds, family=family, model=model, **sizes)
    finally:
        parallel.shutdown()  # the workers are waited for, so their CPU-seconds count below
    if key in SPREAD and finding.world != "toy":
        finding = finding.model_copy(
            update={"notes": [*finding.notes, f"planner episodes: {parallel.current().label()}"]}
        )
    given = {"episodes": episodes, "seeds": seeds, "family": family, "model": model if key == "C9" else None, **sizes}
    return finding.model_copy(
        update={
            "wall_s": time.perf_counter() - wall0,
            "cpu_s": cpu_seconds() - cpu0,
            "overrides": overrides(key, given, finding.world),
        }
    )


# What `--seeds` and `--episodes` count in each check (the names of its default sizes).
SEEDS_COUNT = {"C1": "contexts", "C2": "train_contexts", "C6": "seeds", "C7": "seeds"}
EPISODES_COUNT = {"C1": "episodes", "C2": "test_contexts"}


def overrides(check: str, given: dict[str, Any], world: str) -> dict[str, Scalar]:
    """The flags that moved the check off its default size (a flag equal to the default does not)."""
    default = SIZES[check] | {"family": world if check in ("C1", "C2") else "highway"}
    named = {"seeds": SEEDS_COUNT.get(check, "contexts"), "episodes": EPISODES_COUNT.get(check, "episodes")}
    return {k: v for k, v in given.items() if v is not None and default.get(named.get(k, k)) != v}
