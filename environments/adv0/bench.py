"""`harness bench driving`: what the ADV-0 worlds cost. Episodes/s of the toy world (its whole
scenario space at once) and of highway-env with the IDM/MOBIL defender, normal and attacked; and the
overhead of our episode (per-frame TTC, geometry log, attacker kinematics) over highway-env's own
`step()`, both measured in this one run on the same seeds, interleaved so machine load hits both:

    python -m environments.adv0.bench --episodes 10
    harness bench driving --episodes 10

`--checks` (issue 41, item 3): episodes per second per core (per CPU-second) of each defender (the
IDM/MOBIL planner, the DQN) against each attacker (none, random, scripted, CAT-like, ADV-0's policy
before training, the closed-loop attacker), the planner's cost in each family, and from them the
CPU and wall time of every claim check at its registered default size, here and on 64 cores:

    harness bench driving --checks --episodes 6
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from typing import Any

import typer
from pydantic import BaseModel

from environments.adv0.sim.scenario import TRAIN_MANOEUVRES, IdmParams, ScenarioParams, all_scenarios

OVERHEAD_TARGET = 0.10  # the budget: our episode adds at most 10% over highway-env's step()


# The measurements, in the order `--json` prints their keys (a field left None is left out).
class ToyBench(BaseModel):
    episodes: int
    wall_s: float
    cpu_s: float
    episodes_per_s: float


class ToySkipped(BaseModel):
    skipped: str


class HighwayRun(BaseModel):
    episodes: int
    steps: int
    crashes: int
    episodes_per_s: float
    cpu_s_per_episode: float
    ms_per_step: float


class HighwayBench(BaseModel):
    family: str
    normal: HighwayRun
    attacked: HighwayRun


class OverheadBench(BaseModel):
    family: str
    episodes: int
    steps: list[int]  # [bare, ours]
    bare_ms_per_step: float
    ours_ms_per_step: float
    bare_cpu_s_per_episode: float
    ours_cpu_s_per_episode: float
    overhead: float
    within_target: bool


class DrivingBench(BaseModel):
    """`harness bench driving`."""

    toy: ToyBench | ToySkipped
    highway: HighwayBench
    overhead: OverheadBench
    wall_s: float


class MatrixCell(BaseModel):
    """One defender against one attacker."""

    cpu_s_per_episode: float
    episodes_per_s_per_core: float
    steps: int
    cpu_s_per_step: float
    episodes: int
    crashes: int


class MatrixBench(BaseModel):
    family: str
    episodes: int
    cells: dict[str, MatrixCell]  # by "defender/attacker"
    idm_driver: str | None = None  # which planner / DQN played (None: that defender was not measured)
    dqn_driver: str | None = None


class ChecksBench(BaseModel):
    """`harness bench driving --checks`."""

    matrix: MatrixBench
    families_cpu_s_per_episode: dict[str, float]
    context_cpu_s: float
    checks: dict[str, dict[str, float]]  # check -> cpu_s, parallel, serial
    wall_s_2_cores: dict[str, float]
    wall_s_64_cores: dict[str, float]
    bench_wall_s: float


def to_json(found: BaseModel) -> str:
    return json.dumps(found.model_dump(exclude_none=True), indent=2)


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def bench_toy(seeds: int = 4) -> ToyBench | ToySkipped:
    """The toy world's whole scenario space for `seeds` seeds in one vectorised call."""
    if importlib.util.find_spec("environments.adv0.sim.toy") is None:
        return ToySkipped(skipped="environments/adv0/sim/toy.py is not there")
    from environments.adv0.sim import toy

    z = all_scenarios()
    toy.evaluate(range(1), z[:10])  # warm-up: imports, first allocations
    start = _clock()
    toy.evaluate(range(seeds), z)
    wall, cpu = _since(start)
    n = seeds * len(z)
    return ToyBench(episodes=n, wall_s=round(wall, 3), cpu_s=round(cpu, 3), episodes_per_s=round(n / wall, 1))


def _attack(i: int) -> ScenarioParams:
    """A fixed spread of draws: every training manoeuvre, mid-range factors, firing gap 10 m."""
    return ScenarioParams(
        slot=i % 3,
        manoeuvre=TRAIN_MANOEUVRES[i % len(TRAIN_MANOEUVRES)],
        trigger_s=2.0,
        intensity=0.75,
        hold_s=1.0,
        gap_m=10.0,
    )


def bench_highway(episodes: int = 10, family: str = "highway") -> HighwayBench:
    """The IDM defender in normal and attacked traffic: episodes/s and CPU-s per episode."""
    from environments.adv0.sim.highway import run_episode

    run_episode(family, 10_000, None, planner=IdmParams())  # warm-up
    runs: dict[str, HighwayRun] = {}
    for label, attack in (("normal", lambda i: None), ("attacked", _attack)):
        start, steps, crashes = _clock(), 0, 0
        for i in range(episodes):
            r = run_episode(family, i, attack(i), planner=IdmParams())
            steps, crashes = steps + r.steps, crashes + int(r.crashed)
        wall, cpu = _since(start)
        runs[label] = HighwayRun(
            episodes=episodes,
            steps=steps,
            crashes=crashes,
            episodes_per_s=round(episodes / wall, 2),
            cpu_s_per_episode=round(cpu / episodes, 3),
            ms_per_step=round(1000 * wall / max(steps, 1), 2),
        )
    return HighwayBench(family=family, normal=runs["normal"], attacked=runs["attacked"])


def bench_overhead(episodes: int = 10, family: str = "highway") -> OverheadBench:
    """Our episode vs a bare highway-env loop over the same trajectories (the same IDM ego, normal
    traffic, same seeds, interleaved): CPU time in `env.step()` alone vs in `HighwayEpisode.step()`,
    and whole episodes (bare: a fresh environment + reset + steps; ours: start_episode + steps +
    result + close, environments reused)."""
    from environments.adv0.sim.highway import FAMILIES, install_planner, make_env, start_episode

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
    return OverheadBench(
        family=family,
        episodes=episodes,
        steps=[steps["bare"], steps["ours"]],
        bare_ms_per_step=round(ms["bare"], 3),
        ours_ms_per_step=round(ms["ours"], 3),
        bare_cpu_s_per_episode=round(episode_s["bare"] / episodes, 3),
        ours_cpu_s_per_episode=round(episode_s["ours"] / episodes, 3),
        overhead=round(overhead, 4),
        within_target=overhead <= OVERHEAD_TARGET,
    )


# ---------------------------------------------------------------- per defender and attacker (issue 41, item 3)
MATRIX_ATTACKERS = ("none", "random", "scripted", "cat", "adv0", "closed_loop")  # adv0: its policy before training (p0)
MATRIX_DEFENDERS = ("idm", "dqn")


def _dqn_driver() -> tuple[Any, str]:
    """The cached DQN, or -- when none is cached -- a fresh network of the same recipe (the same
    forward pass per step, so the same cost; its driving differs)."""
    import torch

    from environments.adv0.train import dqn

    torch.set_num_threads(1)  # one core per worker, as the checks run it
    path = dqn.checkpoint_path(dqn.DEFAULT_PRETRAIN_STEPS, 0)
    if path.is_file():
        return dqn.DqnDefender(dqn.load_checkpoint(path)), "cached checkpoint"
    env = dqn.DefenderEnv()
    try:
        return dqn.DqnDefender(dqn.make_model(env, seed=0)), "untrained network (no checkpoint cached)"
    finally:
        env.close()


def _draws(attacker: str, family: str, seeds: list[int]) -> list[Any]:
    """Each seed's one-shot scenario (None: normal traffic or the closed-loop attacker)."""
    if attacker in ("none", "closed_loop"):
        return [None] * len(seeds)
    import numpy as np

    from environments.adv0.policies.attacker import reference_prior
    from environments.adv0.sim.worlds import context_of, world_for
    from environments.adv0.train.options import make

    option = make(attacker, reference_prior(family))
    world = world_for(family)
    rng = np.random.default_rng(0)
    return [option.draw(context_of(world, family, s), rng, 1)[0] for s in seeds]


def _episode(defender: str, driver: Any, family: str, seed: int, attack: Any, closed: bool) -> Any:
    from environments.adv0.policies.draw import closed_loop_attacker
    from environments.adv0.sim import highway

    adversary = closed_loop_attacker(seed) if closed else None
    if defender == "idm":
        ep = highway.start_episode(family, seed, attack, planner=IdmParams(), closed_loop=adversary)
    else:
        ep = highway.start_episode(family, seed, attack, closed_loop=adversary)
    try:
        while not ep.done:
            ep.step(None if defender == "idm" else driver.act(ep.view()))
        return ep.result()
    finally:
        ep.close()


def bench_matrix(
    episodes: int = 6,
    family: str = "highway",
    defenders: tuple[str, ...] = MATRIX_DEFENDERS,
    attackers: tuple[str, ...] = MATRIX_ATTACKERS,
) -> MatrixBench:
    """CPU-seconds per episode, and episodes per second per core (= per CPU-second), for each
    defender against each attacker; the draws are made before the clock starts."""
    cells: dict[str, MatrixCell] = {}
    drivers: dict[str, str] = {}
    seeds = list(range(20_000, 20_000 + episodes))
    draws = {a: _draws(a, family, seeds) for a in attackers}
    for d in defenders:
        driver, note = _dqn_driver() if d == "dqn" else (None, "IDM/MOBIL, default parameters")
        drivers[d] = note
        _episode(d, driver, family, 10_000, None, False)  # warm-up
        for a in attackers:
            cpu0, steps, crashes = time.process_time(), 0, 0
            for s, z in zip(seeds, draws[a]):
                r = _episode(d, driver, family, s, z, a == "closed_loop")
                steps, crashes = steps + r.steps, crashes + int(r.crashed)
            cpu = time.process_time() - cpu0
            cells[f"{d}/{a}"] = MatrixCell(
                cpu_s_per_episode=round(cpu / episodes, 3),
                episodes_per_s_per_core=round(episodes / cpu, 2),
                steps=steps,
                cpu_s_per_step=round(cpu / max(steps, 1), 4),
                episodes=episodes,
                crashes=crashes,
            )
    return MatrixBench(family=family, episodes=episodes, cells=cells, idm_driver=drivers.get("idm"),
                       dqn_driver=drivers.get("dqn"))


def bench_families(episodes: int = 4) -> dict[str, float]:
    """CPU-seconds per IDM/MOBIL episode in each family under a uniform one-shot attack (what the
    held-out conditions of C6/C7 play)."""
    from environments.adv0.sim.highway import WORLD_FAMILIES

    out = {}
    for fam in WORLD_FAMILIES:
        draws = _draws("random", fam, list(range(30_000, 30_000 + episodes)))
        _episode("idm", None, fam, 10_000, None, False)
        cpu0 = time.process_time()
        for i, z in enumerate(draws):
            _episode("idm", None, fam, 30_000 + i, z, False)
        out[fam] = round((time.process_time() - cpu0) / episodes, 3)
    return out


def bench_context(episodes: int = 6, family: str = "highway") -> float:
    """CPU-seconds of one attacker context (the initial view of a seed's episode)."""
    from environments.adv0.sim.worlds import context_of, world_for

    world = world_for(family)
    cpu0 = time.process_time()
    for s in range(40_000, 40_000 + episodes):
        context_of(world, family, s)
    return round((time.process_time() - cpu0) / episodes, 4)


# Costs not measured here (each would take minutes): a DQN fine-tuning step (ADV0_DESIGN.md: ~46
# CPU-s per 1k steps), an LLM driver step with local/smollm2-135m on these CPUs (session 9: 84 steps
# in 230 s), steps per LLM episode (a 20 s episode at one decision a second), and the toy checks at
# the earlier sizes (C1: 5.3 s for 8 contexts; C2: ~20 s of training plus 0.21 s per context and
# defender evaluated, 3 defenders).
DQN_CPU_S_PER_1K = 46.0
LLM_S_PER_STEP, LLM_STEPS_PER_EPISODE = 2.7, 20
C1_S_PER_CONTEXT, C2_TRAIN_S, C2_S_PER_CONTEXT = 5.3 / 8, 20.0, 3 * 0.21


def check_costs(cells: dict[str, MatrixCell], families: dict[str, float], context_s: float) -> dict[str, dict[str, float]]:
    """CPU-seconds of each check at its registered default size (`claims.SIZES`), split into what
    `parallel.py` spreads over workers (planner episodes of the evaluation and of the exposure
    checks' attacker training) and what runs in one process (CEM and the loops' attacker rollouts
    inside `loop.train_round`, the DQN, the LLM driver, the toy world)."""
    from environments.adv0.checks.claims import SIZES, held_out_episodes
    from environments.adv0.sim.scenario import HELD_OUT_FAMILIES

    def c(key: str) -> float:
        planner = "idm/" + key.split("/", 1)[1]
        if key.startswith("dqn/") and key in cells:
            # per step, times the planner's steps per episode: an untrained (or crash-prone) DQN's short
            # episodes would understate what a trained one's full episodes cost
            steps = cells[planner].steps / cells[planner].episodes
            return float(cells[key].cpu_s_per_step) * float(steps)
        if key not in cells:  # the DQN not measured (--no-dqn): as the planner's
            key = planner
        return float(cells[key].cpu_s_per_episode)

    def sz(check: str, name: str) -> int:
        return int(SIZES[check][name])

    held_mix = (c("idm/random") + sum(families[f] for f in HELD_OUT_FAMILIES)) / (1 + len(HELD_OUT_FAMILIES))
    dqn_factor = c("dqn/random") / c("idm/random")  # a DQN episode relative to a planner episode, same traffic
    out: dict[str, dict[str, float]] = {}

    def exposure(check: str, arms: list[str]) -> None:
        n, train = sz(check, "episodes"), sz(check, "rounds") * sz(check, "contexts") * (sz(check, "k") + 1)
        spread = n * sum(c(f"idm/{'adv0' if a == 'sage' else a}") for a in arms) + train * c("idm/adv0")
        out[check] = {"parallel": spread, "serial": (n + sz(check, "rounds") * sz(check, "contexts")) * context_s}

    exposure("C3", ["adv0", "random", "scripted", "cat"])
    exposure("C4", ["adv0", "random", "scripted", "cat"])
    exposure("C5", ["adv0", "sage"])
    # C6: two loops (adv0 / normal), 2 rounds: adv0's 4 x (4 + 1) rollouts, CEM 2 generations x 6 x (4 + 4) episodes
    r6 = sz("C6", "rounds")
    out["C6"] = {
        "parallel": 2 * (held_out_episodes(sz("C6", "held_out"), 1) * held_mix + sz("C6", "episodes") * c("idm/none")),
        "serial": r6 * (20 * c("idm/adv0") + 2 * 96 * (c("idm/adv0") + c("idm/none")) / 2),
    }
    # C7: 3 seeds x 2 loops x 3 rounds of DQN fine-tuning, adv0's 6 x 7 rollouts a round, evaluation -- all in-process
    s7, r7 = sz("C7", "seeds"), sz("C7", "rounds")
    out["C7"] = {
        "parallel": 0.0,
        "serial": s7 * 2 * r7 * sz("C7", "dqn_steps") / 1000 * DQN_CPU_S_PER_1K
        + s7 * r7 * 42 * c("dqn/adv0")
        + 2 * s7 * (6 * sz("C7", "held_out") * held_mix * dqn_factor + sz("C7", "episodes") * c("dqn/none")),
    }
    # C8: two loops, 3 rounds: iterated 4 x (4 + 1) rollouts a round (frozen: round 1), CEM 1 x 6 x 8 a round each
    r8 = sz("C8", "rounds")
    out["C8"] = {
        "parallel": 2 * sz("C8", "episodes") * c("idm/adv0"),
        "serial": (r8 + 1) * 20 * c("idm/adv0") + 2 * r8 * 48 * (c("idm/adv0") + c("idm/none")) / 2,
    }
    c9 = sz("C9", "rounds") * (sz("C9", "contexts") * 3 + 2 * sz("C9", "contexts")) + 2 * sz("C9", "episodes")
    out["C9"] = {"parallel": 0.0, "serial": c9 * LLM_STEPS_PER_EPISODE * LLM_S_PER_STEP}
    out["C1"] = {"parallel": 0.0, "serial": sz("C1", "contexts") * C1_S_PER_CONTEXT}
    out["C2"] = {"parallel": 0.0, "serial": C2_TRAIN_S + sz("C2", "test_contexts") * C2_S_PER_CONTEXT}
    return {
        k: {"cpu_s": round(v["parallel"] + v["serial"], 1), **{x: round(y, 1) for x, y in v.items()}}
        for k, v in sorted(out.items())
    }


def wall_estimate(costs: dict[str, dict[str, float]], cores: int, efficiency: float = 1.0) -> dict[str, float]:
    """Wall seconds of each check on `cores` (one process per core for the spread part; the
    serial part on one core): serial + parallel / (cores x efficiency)."""
    return {k: round(v["serial"] + v["parallel"] / (cores * efficiency), 1) for k, v in costs.items()}


def run_driving_bench(episodes: int = 10, family: str = "highway", toy_seeds: int = 4) -> DrivingBench:
    start = time.perf_counter()
    toy, highway, overhead = bench_toy(toy_seeds), bench_highway(episodes, family), bench_overhead(episodes, family)
    return DrivingBench(toy=toy, highway=highway, overhead=overhead, wall_s=round(time.perf_counter() - start, 1))


def format_table(r: DrivingBench) -> str:
    lines = [f"driving worlds (wall {r.wall_s} s)"]
    toy = r.toy
    if isinstance(toy, ToySkipped):
        lines.append(f"  toy        skipped: {toy.skipped}")
    else:
        lines.append(
            f"  toy        {toy.episodes_per_s:>10} episodes/s  ({toy.episodes} episodes, {toy.cpu_s} CPU-s)"
        )
    hw = r.highway
    for label, h in (("normal", hw.normal), ("attacked", hw.attacked)):
        lines.append(
            f"  {hw.family} IDM {label:<8} {h.episodes_per_s:>6} episodes/s  {h.cpu_s_per_episode} CPU-s/episode  "
            f"{h.ms_per_step} ms/step  ({h.episodes} episodes, {h.crashes} crashed)"
        )
    o = r.overhead
    verdict = "within" if o.within_target else "OVER"
    lines.append(
        f"  overhead   highway-env step() {o.bare_ms_per_step} ms, ours {o.ours_ms_per_step} ms: "
        f"{100 * o.overhead:+.1f}% ({verdict} the {100 * OVERHEAD_TARGET:.0f}% target; CPU time, {o.steps[0]} steps)"
    )
    lines.append(
        f"             whole episodes: bare {o.bare_cpu_s_per_episode} CPU-s, ours {o.ours_cpu_s_per_episode} CPU-s"
    )
    return "\n".join(lines)


def run_checks_bench(episodes: int = 6, family_episodes: int = 4, dqn: bool = True) -> ChecksBench:
    """Episodes per second per core of every defender x attacker, the planner's cost per family, and
    from them the CPU and wall time of every check at its default size here (2 cores) and on a
    64-core Ray cluster. `dqn=False` leaves the DQN out (it loads torch): C7's estimate then takes
    a DQN episode to cost a planner episode."""
    start = time.perf_counter()
    matrix = bench_matrix(episodes, defenders=MATRIX_DEFENDERS if dqn else ("idm",))
    families = bench_families(family_episodes)
    context_s = bench_context(episodes)
    costs = check_costs(matrix.cells, families, context_s)
    return ChecksBench(
        matrix=matrix,
        families_cpu_s_per_episode=families,
        context_cpu_s=context_s,
        checks=costs,
        wall_s_2_cores=wall_estimate(costs, 2),
        wall_s_64_cores=wall_estimate(costs, 64),
        bench_wall_s=round(time.perf_counter() - start, 1),
    )


def format_checks_table(r: ChecksBench) -> str:
    m = r.matrix
    lines = [
        f"episodes per second per core ({m.family}, {m.episodes} episodes a cell; bench wall {r.bench_wall_s} s)"
    ]
    for d in MATRIX_DEFENDERS:
        driver = {"idm": m.idm_driver, "dqn": m.dqn_driver}[d]
        if driver is not None:
            lines.append(f"  {d} ({driver}):")
        for a in MATRIX_ATTACKERS:
            cell = m.cells.get(f"{d}/{a}")
            if cell:
                lines.append(
                    f"    {a:<12} {cell.episodes_per_s_per_core:>6} episodes/s/core  {cell.cpu_s_per_episode} CPU-s/episode  "
                    f"{1000 * cell.cpu_s_per_step:.0f} ms/step  ({cell.steps} steps, {cell.crashes} crashed)"
                )
    lines.append(
        "  IDM/MOBIL per family (uniform one-shot attack), CPU-s/episode: "
        + ", ".join(f"{k} {v}" for k, v in r.families_cpu_s_per_episode.items())
    )
    lines.append(f"  attacker context: {r.context_cpu_s} CPU-s")
    lines.append(
        "checks at their default sizes: CPU-s (spread over workers + in one process), wall here (2 cores), "
        "wall on 64 cores"
    )
    total2 = total64 = 0.0
    for k, v in r.checks.items():
        w2, w64 = r.wall_s_2_cores[k], r.wall_s_64_cores[k]
        total2, total64 = total2 + w2, total64 + w64
        lines.append(
            f"  {k}: {v['cpu_s']:>9.0f} CPU-s ({v['parallel']:.0f} + {v['serial']:.0f})  {w2 / 60:7.1f} min  {w64 / 60:7.1f} min"
        )
    lines.append(f"  all: {total2 / 60:.0f} min here, {total64 / 60:.0f} min on 64 cores (checks one after another)")
    rest = [k for k in r.checks if k not in ("C7", "C9")]
    lines.append(
        f"  all but C7 (the DQN, in one process) and C9 (the LLM driver): "
        f"{sum(r.wall_s_2_cores[k] for k in rest) / 60:.0f} min here, "
        f"{sum(r.wall_s_64_cores[k] for k in rest) / 60:.0f} min on 64 cores"
    )
    return "\n".join(lines)


def bench_driving_cmd(
    episodes: int = typer.Option(10, "--episodes", min=1, help="highway-env episodes per measurement."),
    family: str = typer.Option("highway", "--family", help="highway-env family (see environments/adv0/sim/highway.py)."),
    toy_seeds: int = typer.Option(
        4, "--toy-seeds", min=1, help="Toy-world seeds (each runs the whole scenario space)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    checks: bool = typer.Option(
        False,
        "--checks",
        help="Instead: episodes/s per core for every defender x attacker, "
        "and the claim checks' CPU and wall time at their default sizes (2 cores, 64 cores).",
    ),
    dqn: bool = typer.Option(True, "--dqn/--no-dqn", help="--checks: measure the DQN defender too (loads torch)."),
) -> None:
    """Episodes/s of the toy world and of highway-env with the IDM defender, and our episode's
    overhead over highway-env's own step() (target <= 10%)."""
    from environments.adv0.sim.highway import WORLD_FAMILIES

    # typer's own output and errors: only `*.commands` modules may use harness.cli.kit (import contract)
    if family not in WORLD_FAMILIES:
        raise typer.BadParameter(f"{family!r} is unknown; allowed: {', '.join(WORLD_FAMILIES)}", param_hint="--family")
    if checks:
        found = run_checks_bench(episodes, dqn=dqn)
        typer.echo(to_json(found) if as_json else format_checks_table(found))
        return
    result = run_driving_bench(episodes, family, toy_seeds)
    typer.echo(to_json(result) if as_json else format_table(result))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m environments.adv0.bench", description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--family", default="highway")
    p.add_argument("--toy-seeds", type=int, default=4)
    p.add_argument("--json", action="store_true")
    p.add_argument("--checks", action="store_true")
    args = p.parse_args(argv)
    if args.checks:
        found = run_checks_bench(args.episodes)
        print(to_json(found) if args.json else format_checks_table(found))
        return
    result = run_driving_bench(args.episodes, args.family, args.toy_seeds)
    print(to_json(result) if args.json else format_table(result))


if __name__ == "__main__":
    main()
