"""`harness bench driving`: what the ADV-0 worlds cost. Episodes/s of the toy world (its whole
scenario space at once) and of highway-env with the IDM/MOBIL defender, normal and attacked; and the
overhead of our episode (per-frame TTC, geometry log, attacker kinematics) over highway-env's own
`step()`, both measured in this one run on the same seeds, interleaved so machine load hits both:

    python -m environments.adv0.bench --episodes 10
    harness bench driving --episodes 10
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from typing import Any

import typer

from environments.adv0.scenario import TRAIN_MANOEUVRES, IdmParams, ScenarioParams, all_scenarios

OVERHEAD_TARGET = 0.10  # the budget: our episode adds at most 10% over highway-env's step()


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def bench_toy(seeds: int = 4) -> dict[str, Any]:
    """The toy world's whole scenario space for `seeds` seeds in one vectorised call."""
    if importlib.util.find_spec("environments.adv0.toy") is None:
        return {"skipped": "environments/adv0/toy.py is not there"}
    from environments.adv0 import toy

    z = all_scenarios()
    toy.evaluate(range(1), z[:10])  # warm-up: imports, first allocations
    start = _clock()
    toy.evaluate(range(seeds), z)
    wall, cpu = _since(start)
    n = seeds * len(z)
    return {"episodes": n, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "episodes_per_s": round(n / wall, 1)}


def _attack(i: int) -> ScenarioParams:
    """A fixed spread of draws: every training manoeuvre, mid-range factors, firing gap 10 m."""
    return ScenarioParams(slot=i % 3, manoeuvre=TRAIN_MANOEUVRES[i % len(TRAIN_MANOEUVRES)], trigger_s=2.0,
                          intensity=0.75, hold_s=1.0, gap_m=10.0)


def bench_highway(episodes: int = 10, family: str = "highway") -> dict[str, Any]:
    """The IDM defender in normal and attacked traffic: episodes/s and CPU-s per episode."""
    from environments.adv0.highway import run_episode

    run_episode(family, 10_000, None, planner=IdmParams())  # warm-up
    out: dict[str, Any] = {"family": family}
    for label, attack in (("normal", lambda i: None), ("attacked", _attack)):
        start, steps, crashes = _clock(), 0, 0
        for i in range(episodes):
            r = run_episode(family, i, attack(i), planner=IdmParams())
            steps, crashes = steps + r.steps, crashes + int(r.crashed)
        wall, cpu = _since(start)
        out[label] = {"episodes": episodes, "steps": steps, "crashes": crashes, "episodes_per_s": round(episodes / wall, 2),
                      "cpu_s_per_episode": round(cpu / episodes, 3), "ms_per_step": round(1000 * wall / max(steps, 1), 2)}
    return out


def bench_overhead(episodes: int = 10, family: str = "highway") -> dict[str, Any]:
    """Our episode vs a bare highway-env loop over the same trajectories (the same IDM ego, normal
    traffic, same seeds, interleaved): CPU time in `env.step()` alone vs in `HighwayEpisode.step()`,
    and whole episodes (bare: a fresh environment + reset + steps; ours: start_episode + steps +
    result + close, environments reused)."""
    from environments.adv0.highway import FAMILIES, install_planner, make_env, start_episode

    step_s = {"bare": 0.0, "ours": 0.0}
    episode_s = {"bare": 0.0, "ours": 0.0}
    steps = {"bare": 0, "ours": 0}
    params = IdmParams(time_wanted=1.5)
    idle = 1  # DiscreteMetaAction's IDLE: the planner ego ignores it
    start_episode(family, 10_000, None, planner=params).close()  # warm-up, and one environment in the pool
    for seed in range(episodes):
        t_ep = time.process_time()
        env = make_env(family)
        env.reset(seed=seed)
        install_planner(env, params)
        done = False
        while not done:
            t0 = time.process_time()
            _, _, terminated, truncated, _ = env.step(idle)
            step_s["bare"] += time.process_time() - t0
            steps["bare"] += 1
            done = terminated or truncated or env.time >= FAMILIES[family].max_duration_s
        env.close()
        episode_s["bare"] += time.process_time() - t_ep
        t_ep = time.process_time()
        ep = start_episode(family, seed, None, planner=params)
        while not ep.done:
            t0 = time.process_time()
            ep.step(None)
            step_s["ours"] += time.process_time() - t0
            steps["ours"] += 1
        ep.result()
        ep.close()
        episode_s["ours"] += time.process_time() - t_ep
    ms = {k: 1000 * step_s[k] / max(steps[k], 1) for k in step_s}
    overhead = ms["ours"] / ms["bare"] - 1 if ms["bare"] > 0 else 0.0
    return {"family": family, "episodes": episodes, "steps": [steps["bare"], steps["ours"]],
            "bare_ms_per_step": round(ms["bare"], 3), "ours_ms_per_step": round(ms["ours"], 3),
            "bare_cpu_s_per_episode": round(episode_s["bare"] / episodes, 3),
            "ours_cpu_s_per_episode": round(episode_s["ours"] / episodes, 3),
            "overhead": round(overhead, 4), "within_target": overhead <= OVERHEAD_TARGET}


def run_driving_bench(episodes: int = 10, family: str = "highway", toy_seeds: int = 4) -> dict[str, Any]:
    start = time.perf_counter()
    result = {"toy": bench_toy(toy_seeds), "highway": bench_highway(episodes, family),
              "overhead": bench_overhead(episodes, family)}
    result["wall_s"] = round(time.perf_counter() - start, 1)
    return result


def format_table(r: dict[str, Any]) -> str:
    lines = [f"driving worlds (wall {r['wall_s']} s)"]
    toy = r["toy"]
    if "skipped" in toy:
        lines.append(f"  toy        skipped: {toy['skipped']}")
    else:
        lines.append(f"  toy        {toy['episodes_per_s']:>10} episodes/s  ({toy['episodes']} episodes, "
                     f"{toy['cpu_s']} CPU-s)")
    hw = r["highway"]
    for label in ("normal", "attacked"):
        h = hw[label]
        lines.append(f"  {hw['family']} IDM {label:<8} {h['episodes_per_s']:>6} episodes/s  {h['cpu_s_per_episode']} CPU-s/episode  "
                     f"{h['ms_per_step']} ms/step  ({h['episodes']} episodes, {h['crashes']} crashed)")
    o = r["overhead"]
    verdict = "within" if o["within_target"] else "OVER"
    lines.append(f"  overhead   highway-env step() {o['bare_ms_per_step']} ms, ours {o['ours_ms_per_step']} ms: "
                 f"{100 * o['overhead']:+.1f}% ({verdict} the {100 * OVERHEAD_TARGET:.0f}% target; CPU time, {o['steps'][0]} steps)")
    lines.append(f"             whole episodes: bare {o['bare_cpu_s_per_episode']} CPU-s, ours {o['ours_cpu_s_per_episode']} CPU-s")
    return "\n".join(lines)


def bench_driving_cmd(
    episodes: int = typer.Option(10, "--episodes", min=1, help="highway-env episodes per measurement."),
    family: str = typer.Option("highway", "--family", help="highway-env family (see environments/adv0/highway.py)."),
    toy_seeds: int = typer.Option(4, "--toy-seeds", min=1, help="Toy-world seeds (each runs the whole scenario space)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Episodes/s of the toy world and of highway-env with the IDM defender, and our episode's
    overhead over highway-env's own step() (target <= 10%)."""
    from environments.adv0.highway import WORLD_FAMILIES

    # typer's own output and errors: only `*.commands` modules may use harness.cli.kit (import contract)
    if family not in WORLD_FAMILIES:
        raise typer.BadParameter(f"{family!r} is unknown; allowed: {', '.join(WORLD_FAMILIES)}", param_hint="--family")
    result = run_driving_bench(episodes, family, toy_seeds)
    typer.echo(json.dumps(result, indent=2) if as_json else format_table(result))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m environments.adv0.bench", description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--family", default="highway")
    p.add_argument("--toy-seeds", type=int, default=4)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    result = run_driving_bench(args.episodes, args.family, args.toy_seeds)
    print(json.dumps(result, indent=2) if args.json else format_table(result))


if __name__ == "__main__":
    main()
