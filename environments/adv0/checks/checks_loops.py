"""The loop checks C6-C9 (`harness adv0 check C6..C9`; the registry is `checks.py`): each runs whole
min-max loops (`loop.train_round`) and compares the defenders or attackers they produce -- the CEM
planner's and the DQN's held-out generalisation (C6, C7), an iterated vs a frozen attacker (C8), and
the LLM driver with vs without its reflections (C9). Each check is a cell function (one arm at one
seed: `cells.Cell`) and a judge of the cells of all its arms (`checks.py` runs them in process, the
suite `adv0-check` as runs).

May import: numpy, `harness`, `agents` (through the loop), `environments.adv0`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
from pydantic import BaseModel

from environments.adv0.checks.cells import Cell, arm_cells, pooled_count, pooled_episodes
from environments.adv0.checks.checks_exposure import (
    Arm,
    arm_numbers,
    check_sizes,
    failure_rate_text,
    pooled_arm,
    with_parties,
)
from environments.adv0.checks.claims import MIN_RATE_EFFECT, NORMAL_RETURN_LOSS, size
from environments.adv0.checks.verdicts import LEVEL, Finding, Part, fmt_metric, fmt_rate, rate_higher, relative_not_below
from environments.adv0.sim.scenario import HELD_OUT_FAMILIES, EpisodeResult, ScenarioParams
from environments.adv0.train.loop import (
    Contexts,
    DefenderReport,
    LlmReport,
    LoopConfig,
    held_out_jobs,
    make_attacker,
    make_defender,
    seeds_for,
    train_round,
)
from environments.adv0.train.parallel import defender_episodes
from harness.errors import HarnessError
from harness.stats import mean_metric


class Trained(BaseModel):
    """What one trained loop of `two_loops` leaves: its final attacker and defender, the defender
    episodes the attacker spent, and the defender's report of every round."""

    model_config = {"arbitrary_types_allowed": True}
    attacker: Any
    defender: Any
    used: int
    defender_reports: list[DefenderReport]


def two_loops(arms: Sequence[tuple[str, dict[str, str]]], base: LoopConfig) -> dict[str, Trained]:
    """Train one loop per arm (name, `LoopConfig` overrides: the attacker or the ablation) without
    per-round evaluation."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, update in arms:
            cfg = base.model_copy(update=update)
            attacker, defender = make_attacker(cfg), make_defender(cfg)
            ctx, used, reports = Contexts(), 0, []
            for r in range(1, cfg.rounds + 1):
                report, defender_report, _ = train_round(cfg, r, attacker, defender, Path(tmp), ctx)
                used += int(report.get("rollouts", 0))
                reports.append(defender_report)
            out[name] = Trained(attacker=attacker, defender=defender, used=used, defender_reports=reports)
    return out


def held_out_results(cfg: LoopConfig, defender: Any) -> list[EpisodeResult]:
    by_family: dict[str, list[tuple[ScenarioParams | None, int]]] = {}
    for fam, job in held_out_jobs(cfg):
        by_family.setdefault(fam, []).append(job)
    return [r for fam, jobs in by_family.items() for r in defender_episodes(defender, jobs, fam)]


def held_out_size(check: str, episodes: int | None) -> int:
    """Held-out episodes per condition and seed: the registered size, or half of `--episodes` when
    that flag moves the check off its default size (an exploratory run, as before the power plan)."""
    return size(check, "held_out") if episodes is None else max(1, episodes // 2)


# ---------------------------------------------------------------- C6, C7: held-out generalisation
TRAINED_BY = {"adv0-trained": "adv0", "normally-trained": "none"}  # arm -> the attacker its loop trains against
class LoopSizes(TypedDict, total=False):
    """The `LoopConfig` sizes of C6's and C7's loops (a plain dict: they are keywords of it)."""

    contexts: int
    k: int
    scenarios: int
    cem_generations: int
    cem_population: int
    dqn_steps: int
    dqn_checkpoint: str | None


LOOP_SIZES: dict[str, LoopSizes] = {
    "C6": {"contexts": 4, "k": 4, "scenarios": 4, "cem_generations": 2, "cem_population": 6},
    "C7": {"contexts": 6, "k": 6, "scenarios": 16},
}
C7_DQN_STEPS = size("C7", "dqn_steps")  # fine-tuning steps per round at C7's default size


def c7_ready(family: str | None = None, dqn_checkpoint: str | None = None, **_: object) -> None:
    """C7's bad input, before any training: a family without Kinematics, a missing checkpoint (its
    error names the command that builds it)."""
    if (family or "highway") != "highway":
        raise HarnessError("check C7 (DQN) runs on --family highway only (the toy world has no Kinematics observation)")
    from environments.adv0.train import dqn

    target = Path(dqn_checkpoint) if dqn_checkpoint else dqn.checkpoint_path(dqn.DEFAULT_PRETRAIN_STEPS, 0)
    if not target.is_file():
        dqn.load_checkpoint(target)


def generalisation_cell(
    check: str,
    arm: str,
    seed: int,
    episodes: int | None = None,
    family: str | None = None,
    rounds: int | None = None,
    dqn_steps: int | None = None,
    dqn_checkpoint: str | None = None,
    **_: object,
) -> Cell:
    """One defender of C6 (CEM-tuned IDM/MOBIL) or C7 (the DQN), trained at seed `seed` against
    adv0 (`adv0-trained`) or on normal traffic only (`normally-trained`, the same budget), then
    played on the held-out conditions and on normal traffic."""
    n, fam = episodes or size(check, "episodes"), family or "highway"
    loop = LOOP_SIZES[check].copy()
    if check == "C7":
        c7_ready(fam, dqn_checkpoint)
        loop["dqn_steps"], loop["dqn_checkpoint"] = dqn_steps or C7_DQN_STEPS, dqn_checkpoint
    base = LoopConfig(
        defender="idm" if check == "C6" else "dqn",
        family=fam,
        rounds=rounds or size(check, "rounds"),
        seed=seed,
        episodes=n,
        held_out_episodes=held_out_size(check, episodes),
        **loop,
    )
    t = two_loops([(arm, {"attacker": TRAINED_BY[arm]})], base)[arm]
    normal = defender_episodes(t.defender, [(None, s) for s in seeds_for(base, 0, "eval", n)])
    return Cell(
        check=check,
        arm=arm,
        seed=seed,
        episodes={"held_out": held_out_results(base, t.defender), "normal": normal},
        counts={"train_rollouts": t.used},
    )


def generalisation(
    check: str, cells: Mapping[str, Sequence[Cell]], family: str
) -> tuple[list[Part], dict[str, str], list[str]]:
    """The adv0-trained and the normally trained defender (same budget) on the held-out conditions
    and on normal traffic, pooled over their seeds."""
    by_arm = arm_cells(check, cells)
    held = {a: pooled_episodes(cs, "held_out") for a, cs in by_arm.items()}
    normal = {a: pooled_episodes(cs, "normal") for a, cs in by_arm.items()}
    k_none, n_none = sum(r.defender_failure for r in held["normally-trained"]), len(held["normally-trained"])
    k_adv, n_adv = sum(r.defender_failure for r in held["adv0-trained"]), len(held["adv0-trained"])
    parts = [
        with_parties(
            rate_higher(
                "held-out defender-failure rate: normally trained - adv0-trained",
                k_none,
                n_none,
                k_adv,
                n_adv,
                MIN_RATE_EFFECT,
                metric="held-out defender-failure rate",
                arm="normally-trained",
                versus="adv0-trained",
            ),
            [Arm(name=a, results=held[a]) for a in ("normally-trained", "adv0-trained")],
        ),
        relative_not_below(
            "normal-traffic return: adv0-trained relative to normally trained",
            [r.reward for r in normal["adv0-trained"]],
            [r.reward for r in normal["normally-trained"]],
            NORMAL_RETURN_LOSS,
            metric="normal-traffic return, relative change",
            arm="adv0-trained",
            versus="normally-trained",
        ),
    ]
    numbers = {}
    for arm, name in (("adv0-trained", "adv0"), ("normally-trained", "none")):
        hr, nr = held[arm], normal[arm]
        numbers[f"{name}-trained: held-out defender-failure rate"] = failure_rate_text(hr)
        numbers[f"{name}-trained: held-out crash rate"] = fmt_rate(sum(r.crashed for r in hr), len(hr))
        numbers[f"{name}-trained: normal-traffic crash rate"] = fmt_rate(sum(r.crashed for r in nr), len(nr))
        numbers[f"{name}-trained: normal-traffic return"] = fmt_metric(mean_metric([r.reward for r in nr], LEVEL))
        numbers[f"{name}-trained: attacker rollouts in training"] = str(pooled_count(by_arm[arm], "train_rollouts"))
        fams: dict[str, list[bool]] = {}
        for r in hr:
            fams.setdefault(r.family, []).append(r.defender_failure)
        numbers[f"{name}-trained: held-out defender failures per family"] = ", ".join(
            f"{f} {sum(v)}/{len(v)}" for f, v in sorted(fams.items())
        )
    seeds = len(by_arm["adv0-trained"])
    notes = [
        f"{seeds} training seed(s); held-out = {', '.join(HELD_OUT_FAMILIES)} under a fixed "
        "uniform evaluation adversary (all manoeuvres) and the training map under held-out manoeuvres"
        if family == "highway"
        else "held-out = the toy world's held-out manoeuvres"
    ]
    return parts, numbers, notes


def judge_c6(cells: Mapping[str, Sequence[Cell]], **flags: Any) -> Finding:
    fam, rounds = flags.get("family") or "highway", flags.get("rounds") or size("C6", "rounds")
    n = flags.get("episodes") or size("C6", "episodes")
    parts, numbers, notes = generalisation("C6", cells, fam)
    s = len(arm_cells("C6", cells)["adv0-trained"])
    return Finding.judge(
        "C6",
        "the motion planner tuned against ADV-0 generalises to held-out families without losing normal return "
        "by more than 5%",
        f"IDM/MOBIL tuned by CEM for {rounds} rounds against adv0's scenarios vs tuned the same way on normal traffic "
        f"only: held-out defender-failure rate lower (Newcombe CI of normal-trained - adv0-trained > 0; not reproduced "
        f"when its upper end < {MIN_RATE_EFFECT}) and normal-traffic return not more than 5% lower (Welch CI of "
        f"the relative change >= {NORMAL_RETURN_LOSS})",
        parts,
        numbers=numbers,
        notes=notes,
        world=fam,
        setting=f"{fam}: IDM/MOBIL tuned by CEM, {rounds} rounds, {s} training seed(s), {n} normal-traffic episodes "
        "per arm and seed and the held-out conditions",
    )


def judge_c7(cells: Mapping[str, Sequence[Cell]], **flags: Any) -> Finding:
    fam, r = flags.get("family") or "highway", flags.get("rounds") or size("C7", "rounds")
    n, steps = flags.get("episodes") or size("C7", "episodes"), flags.get("dqn_steps") or C7_DQN_STEPS
    parts, numbers, notes = generalisation("C7", cells, fam)
    s = len(arm_cells("C7", cells)["adv0-trained"])
    at = (
        "the default size"
        if (n, s, r, steps) == (size("C7", "episodes"), size("C7", "seeds"), size("C7", "rounds"), C7_DQN_STEPS)
        else f"a reduced size ({s} seed(s), {r} round(s) x {steps} steps, {n} episodes) -- not the check's default"
    )
    return Finding.judge(
        "C7",
        "the DQN fine-tuned against ADV-0 generalises to held-out families better than one fine-tuned on normal "
        "traffic, without losing normal return by more than 5%",
        f"the cached DQN fine-tuned {r} rounds x {steps} steps with half its episodes attacked by adv0's scenarios vs "
        f"the same fine-tuning on normal traffic, {s} seeds pooled: held-out defender-failure rate lower (Newcombe CI > "
        f"0; not reproduced when its upper end < {MIN_RATE_EFFECT}) and normal return not more than 5% lower (Welch CI "
        f"of the relative change >= {NORMAL_RETURN_LOSS})",
        parts,
        numbers=numbers,
        notes=notes
        + [
            f"run at {at}; the default is a long command: about 1.5 CPU-hours in one process (`harness bench driving --checks`)"
        ],
        world=fam,
        setting=f"{fam}: SB3 DQN fine-tuned {r} rounds x {steps} steps, {s} seed(s), {n} episodes",
    )


# ---------------------------------------------------------------- C8: iterated vs frozen attacker
ABLATION_OF = {"iterated": "none", "frozen": "frozen"}


def c8_cell(
    arm: str,
    seed: int,
    episodes: int | None = None,
    seeds: int | None = None,
    family: str | None = None,
    rounds: int | None = None,
    **_: object,
) -> Cell:
    """One min-max loop (ADV-0 iterated every round, or frozen after round 1) at seed `seed`; then its
    attacker draws on the evaluation seeds against its own loop's final defender."""
    n, c, fam = check_sizes(episodes, seeds, family, "C8")
    base = LoopConfig(
        defender="idm",
        attacker="adv0",
        family=fam,
        rounds=rounds or size("C8", "rounds"),
        contexts=c,
        k=4,
        scenarios=4,
        cem_generations=1,
        cem_population=6,
        seed=seed,
    )
    t = two_loops([(arm, {"ablation": ABLATION_OF[arm]})], base)[arm]
    ctx, rng = Contexts(), np.random.default_rng([base.seed, 99])
    eval_seeds = seeds_for(base, 0, "eval", n)
    jobs = [(t.attacker.draw(ctx(fam, s), rng), s) for s in eval_seeds]
    return Cell(
        check="C8",
        arm=arm,
        seed=seed,
        episodes={"eval": defender_episodes(t.defender, jobs)},
        counts={"train_rollouts": t.used},
        stats={"kl_to_prior": t.attacker.kl_to_prior([ctx(fam, s) for s in eval_seeds])},
    )


def judge_c8(cells: Mapping[str, Sequence[Cell]], **flags: Any) -> Finding:
    _, c, fam = check_sizes(flags.get("episodes"), flags.get("seeds"), flags.get("family"), "C8")
    rounds = flags.get("rounds") or size("C8", "rounds")
    arms: list[Arm] = [pooled_arm(a, cs) for a, cs in arm_cells("C8", cells).items()]
    n = len(arms[0].results)
    parts = [
        with_parties(
            rate_higher(
                "defender-failure rate against its own final defender: iterated - frozen",
                *arms[0].count("defender_failure"),
                *arms[1].count("defender_failure"),
                MIN_RATE_EFFECT,
                metric="defender-failure rate against its own final defender",
                arm="iterated",
                versus="frozen",
            ),
            arms,
        )
    ]
    return Finding.judge(
        "C8",
        "an attacker iterated every round keeps finding failures of the adapting defender that an attacker frozen "
        "after round 1 no longer finds",
        f"two min-max loops ({fam}, IDM/MOBIL tuned by CEM each round, {rounds} rounds), ADV-0 iterated vs frozen after "
        f"round 1; after the last round each attacker draws on the same {n} seeds against its own loop's defender: "
        f"iterated defender-failure rate above frozen's (Newcombe CI > 0; not reproduced when its upper end < "
        f"{MIN_RATE_EFFECT})",
        parts,
        numbers=arm_numbers(arms),
        world=fam,
        setting=f"{fam}: two min-max loops (CEM-tuned IDM/MOBIL), {rounds} rounds, {c} contexts, {n} evaluation "
        "episodes per arm",
    )


# ---------------------------------------------------------------- C9: the LLM driver's reflections
C9_K = 2  # ADV-0's candidates per context in C9: each is a whole driver episode, every step a model call


def c9_driver_episodes(episodes: int, contexts: int, rounds: int) -> int:
    """The driver episodes C9 plays: per round K + 1 attacker rollouts per context and 2 x contexts
    scenarios it reflects on, then the evaluation episodes twice (with and without the memory)."""
    return rounds * (contexts * (C9_K + 1) + 2 * contexts) + 2 * episodes


def c9_cell(
    arm: str,
    seed: int,
    episodes: int | None = None,
    seeds: int | None = None,
    family: str | None = None,
    rounds: int | None = None,
    model: str = "local/smollm2-135m",
    **_: object,
) -> Cell:
    """The driver trained by one min-max loop at seed `seed`, then adv0's draws on the evaluation
    seeds driven with its memory (`with`) and with an empty one (`without`)."""
    n, c, fam = check_sizes(episodes, seeds, family, "C9")
    cfg = LoopConfig(
        defender="llm",
        attacker="adv0",
        family=fam,
        rounds=rounds or size("C9", "rounds"),
        contexts=c,
        k=C9_K,
        scenarios=2 * c,
        model=model,
        held_out_episodes=0,
        episodes=n,
        seed=seed,
    )
    trained = two_loops([("adv0", {})], cfg)["adv0"]
    driver, ctx = trained.defender, Contexts()
    rng = np.random.default_rng([cfg.seed, 99])
    jobs = [(trained.attacker.draw(ctx(fam, s), rng), s) for s in seeds_for(cfg, 0, "eval", n)]
    try:
        with_memory = driver.run(jobs)
        lessons = [les.lesson for les in driver.memory.lessons]
        driver.memory = type(driver.memory)()
        without = driver.run(jobs)
    finally:
        driver.close()
    reports = [x for x in trained.defender_reports if isinstance(x, LlmReport)]  # C9's defender: the LLM driver
    return Cell(
        check="C9",
        arm=arm,
        seed=seed,
        episodes={"with": with_memory, "without": without},
        counts={"train_rollouts": trained.used, "reflection_episodes": sum(x.episodes for x in reports)},
        texts={
            "lessons": lessons,
            "crashes/lessons per round": [f"{x.crashes}/{x.lessons_added}" for x in reports],
        },
    )


def judge_c9(cells: Mapping[str, Sequence[Cell]], **flags: Any) -> Finding:
    _, c, fam = check_sizes(flags.get("episodes"), flags.get("seeds"), flags.get("family"), "C9")
    r, model = flags.get("rounds") or size("C9", "rounds"), flags.get("model") or "local/smollm2-135m"
    [found] = arm_cells("C9", cells).values()
    with_memory, without = pooled_episodes(found, "with"), pooled_episodes(found, "without")
    lessons = [les for cell in found for les in cell.texts.get("lessons", [])]
    n = len(with_memory)
    k_wo, k_w = sum(x.crashed for x in without), sum(x.crashed for x in with_memory)
    parts = [
        rate_higher(
            "crash rate: without reflections - with ADV-0's reflections",
            k_wo,
            n,
            k_w,
            n,
            MIN_RATE_EFFECT,
            metric="crash rate",
            arm="without-reflections",
            versus="with-reflections",
        )
    ]
    steps = sum(x.steps for x in with_memory + without)
    numbers = {
        "with reflections: crash rate": fmt_rate(k_w, n),
        "without: crash rate": fmt_rate(k_wo, n),
        "with reflections: defender-failure rate": failure_rate_text(with_memory),
        "without: defender-failure rate": failure_rate_text(without),
        "evaluation episodes whose crash outcome differs between the arms": str(
            sum(a.crashed != b.crashed for a, b in zip(with_memory, without))
        ),
        "invalid actions (with / without)": f"{sum(x.invalid_actions for x in with_memory)} / "
        f"{sum(x.invalid_actions for x in without)}",
        "training: driver episodes (attacker rollouts + reflection scenarios)": f"{pooled_count(found, 'train_rollouts')} + "
        f"{pooled_count(found, 'reflection_episodes')}",
        "training: crashes / lessons written per round": ", ".join(
            x for cell in found for x in cell.texts.get("crashes/lessons per round", [])
        ),
        "lessons in memory": str(len(lessons)),
        "evaluation driving steps (model calls, both arms)": str(steps),
    }
    per_seed = n // max(len(found), 1)
    notes = [
        "a long command: every driving step is a model call; this size plays "
        f"{len(found) * c9_driver_episodes(per_seed, c, r)} driver episodes (seeds x (rounds x (contexts x "
        f"{C9_K + 1} + 2 x contexts) + 2 x episodes))",
        "both arms drive the same episodes (same draws, same seeds, temperature 0): with an empty memory the "
        "arms differ only by the lessons in the prompt",
    ]
    if not lessons:
        notes.append(
            "the driver wrote no lesson in training (no crash it could have caused): the arms drive "
            "identical prompts, so this run cannot show an effect of reflection"
        )
    notes += [f"lesson: {les[:160]}" for les in lessons[:3]]
    return Finding.judge(
        "C9",
        "the LLM driver crashes less with the reflections it learned from ADV-0's failures than without",
        f"the driver ({model}) drives {r} round(s) of the min-max loop on {fam} (ADV-0 trains on {c} contexts x "
        f"(K={C9_K} + 1) rollouts against it; the driver then drives {2 * c} of its draws, reflecting after each "
        f"crash not the attacker's fault); then adv0's draws on the same {n} evaluation seeds with that memory vs an "
        f"empty one: crash rate lower with it (Newcombe CI > 0; not reproduced when its upper end < "
        f"{MIN_RATE_EFFECT})",
        parts,
        numbers=numbers,
        notes=notes,
        world=fam,
        setting=f"{fam}: the LLM driver ({model}), {r} round(s), {c} contexts, {n} evaluation episodes per arm",
    )
