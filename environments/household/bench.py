"""The household environment's own cost (no model): `reset()` (load the PDDL game: fast-downward's
translator, the engine's first state) and `step()` (apply the action, list the admissible
commands, diff the facts into a delta), measured by playing every generated task's gold plan.
A command, never a timed test assertion:

    harness bench household --passes 2
"""

from __future__ import annotations

import statistics
import time
from typing import TypedDict

from environments.household.env import HouseholdEnvironment
from environments.household.generator import generate_tasks
from harness.stats import nearest_rank


class HouseholdBench(TypedDict):
    """`run_household_bench`'s result; each timing row is n, mean_ms, p95_ms."""

    tasks: int
    passes: int
    won: int
    episodes: int
    total_s: float
    reset: dict[str, float]
    step: dict[str, float]
    by_class: dict[str, dict[str, float]]


def run_household_bench(passes: int = 1, seed: int = 0) -> HouseholdBench:
    tasks = generate_tasks(seed)
    resets: list[float] = []
    steps: dict[str, list[float]] = {}
    won = 0
    env = HouseholdEnvironment()
    t_start = time.perf_counter()
    try:
        for _ in range(passes):
            for task in tasks:
                t0 = time.perf_counter()
                env.reset(task.model_dump())
                resets.append(time.perf_counter() - t0)
                for command in task.gold_plan:
                    action = env.render(command)
                    t0 = time.perf_counter()
                    env.step(action)
                    steps.setdefault(env.action_class(action), []).append(time.perf_counter() - t0)
                won += env.won
    finally:
        env.close()
    every = [t for ts in steps.values() for t in ts]

    def row(values: list[float]) -> dict[str, float]:
        return {"n": len(values), "mean_ms": 1000 * statistics.fmean(values), "p95_ms": 1000 * nearest_rank(values, 0.95)}

    return {"tasks": len(tasks), "passes": passes, "won": won, "episodes": len(resets),
            "total_s": time.perf_counter() - t_start, "reset": row(resets), "step": row(every),
            "by_class": {cls: row(ts) for cls, ts in sorted(steps.items())}}


def format_table(result: HouseholdBench) -> str:
    lines = [f"{result['episodes']} episodes ({result['tasks']} tasks x {result['passes']}), gold plans won "
             f"{result['won']}, {result['total_s']:.1f} s", f"{'':12} {'n':>6} {'mean ms':>9} {'p95 ms':>9}"]
    for name, r in [("reset", result["reset"]), ("step", result["step"])] + list(result["by_class"].items()):
        lines.append(f"{name:12} {r['n']:>6} {r['mean_ms']:>9.1f} {r['p95_ms']:>9.1f}")
    return "\n".join(lines)
