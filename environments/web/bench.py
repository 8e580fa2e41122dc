"""The web environment's own overhead per step (no model): the time `step()` takes to run an
action in Chromium, wait for the page, read the ledger and build the next observation, and the
time of `reset()` (database reset + start page). A command, never a timed test assertion:

    python -m environments.web.bench --episodes 5
    harness bench web --episodes 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import TypedDict

from environments.web.browser_env import WebEnvironment
from environments.web.replay import resolve
from environments.web.tasks import load_tasks
from harness.stats import nearest_rank

# A mix of reads, form fills and state-changing posts across the three sites.
BENCH_TASK_IDS = ("shop_009", "travel_007", "mail_008", "shop_006", "travel_006", "mail_005")


class WebBench(TypedDict):
    """`run_env_bench`'s result (milliseconds: mean, p50, p95, max; per class n, mean, p95)."""

    steps: int
    episodes: int
    screenshot: bool
    step_ms: dict[str, float]
    step_ms_by_class: dict[str, dict[str, float]]
    reset_ms: dict[str, float]
    wall_s: float


def run_env_bench(episodes: int = 3, screenshot: bool = False) -> WebBench:
    tasks = {t["task_id"]: t for t in load_tasks()}
    chosen = [tasks[i] for i in BENCH_TASK_IDS if i in tasks]
    steps: dict[str, list[float]] = {}
    resets: list[float] = []
    t_start = time.perf_counter()
    with WebEnvironment(screenshot=screenshot) as env:
        env.reset(chosen[0])  # warm-up: browser and server start are not per-step costs
        for _ in range(episodes):
            for task in chosen:
                t0 = time.perf_counter()
                obs = env.reset(task)
                resets.append(time.perf_counter() - t0)
                for raw in task["cdwm"]["reference_actions"]:
                    action = resolve(raw, obs.text)  # string work outside the timed call
                    t0 = time.perf_counter()
                    result = env.step(action)
                    steps.setdefault(env.action_class(action), []).append(time.perf_counter() - t0)
                    obs = result.observation
                    if result.done:
                        break
    all_steps = [v for vs in steps.values() for v in vs]

    def ms(v: float) -> float:
        return round(v * 1000, 1)

    return {
        "steps": len(all_steps), "episodes": episodes * len(chosen), "screenshot": screenshot,
        "step_ms": {"mean": ms(statistics.mean(all_steps)), "p50": ms(statistics.median(all_steps)),
                    "p95": ms(nearest_rank(all_steps, 0.95)), "max": ms(max(all_steps))},
        "step_ms_by_class": {k: {"n": len(v), "mean": ms(statistics.mean(v)), "p95": ms(nearest_rank(v, 0.95))}
                             for k, v in sorted(steps.items())},
        "reset_ms": {"mean": ms(statistics.mean(resets)), "p95": ms(nearest_rank(resets, 0.95))},
        "wall_s": round(time.perf_counter() - t_start, 1),
    }


def format_table(result: WebBench) -> str:
    lines = [f"web env overhead: {result['steps']} steps over {result['episodes']} episodes "
             f"(screenshot={result['screenshot']}, wall {result['wall_s']} s)",
             f"  step   mean {result['step_ms']['mean']} ms  p50 {result['step_ms']['p50']} ms  "
             f"p95 {result['step_ms']['p95']} ms  max {result['step_ms']['max']} ms",
             f"  reset  mean {result['reset_ms']['mean']} ms  p95 {result['reset_ms']['p95']} ms"]
    for cls, v in result["step_ms_by_class"].items():
        lines.append(f"  {cls:<6} n={v['n']:<4} mean {v['mean']} ms  p95 {v['p95']} ms")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m environments.web.bench", description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=3, help="passes over the benchmark tasks")
    p.add_argument("--screenshot", action="store_true", help="also take a screenshot every step")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)
    result = run_env_bench(args.episodes, args.screenshot)
    print(json.dumps(result, indent=2) if args.json else format_table(result))


if __name__ == "__main__":
    main()
