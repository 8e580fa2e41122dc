"""ADV-0's claim checks (`harness adv0 check NAME`, C1..C9): each check states the claim, the
criterion it is judged by (fixed here in code before any run; the README lists them and the one
change made after a first run), the numbers with 95% CIs, and a verdict by the rules of
`verdicts.py`: reproduced, not reproduced, or inconclusive with the sample size that would decide it.

C1/C2 wrap the toy world's exact checks (`toy_checks.py`); C3-C5 pit attackers against one fixed,
under-cautious IDM/MOBIL planner on the same evaluation seeds (`exposure`); C6-C9 run whole min-max
loops (`loop.train_round`) and compare the defenders or attackers they produce.

May import: numpy, pydantic, `harness`, `agents` (through the loop) and `environments.adv0`.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from environments.adv0.loop import (
    Contexts, IdmDefender, LoopConfig, cpu_seconds, held_out_jobs, make_attacker, make_defender, round_rng, seeds_for,
    train_round,
)
from environments.adv0.metrics import failure_cluster
from environments.adv0.scenario import HELD_OUT_FAMILIES, EpisodeResult, ScenarioParams
from environments.adv0.verdicts import (
    Finding, Part, Verdict, fmt_metric, fmt_rate, mean_metric, rate_at_most, rate_higher, relative_not_below,
    render, scaled_n, stat_higher, wilson,
)
from harness.errors import HarnessError
from harness.records import Metric

__all__ = ["CHECKS", "Finding", "render", "run_check"]


# ---------------------------------------------------------------- the experiments behind the checks
class Arm(BaseModel):
    """One attacker (or defender) evaluated on the shared evaluation episodes."""

    model_config = {"arbitrary_types_allowed": True}
    name: str
    results: list[EpisodeResult]
    train_rollouts: int = 0  # defender episodes the arm used before evaluation
    kl_to_prior: float | None = None  # mean exact KL(q || p0) over the evaluation contexts (learning attackers)

    def count(self, what: str) -> tuple[int, int]:
        rs = self.results
        if what == "defender_failure":
            return sum(r.defender_failure for r in rs), len(rs)
        if what == "crash":
            return sum(r.crashed for r in rs), len(rs)
        if what == "attacker_fault_of_crashes":
            crashes = [r for r in rs if r.crashed]
            return sum(r.collision is not None and r.collision.fault == "attacker" for r in crashes), len(crashes)
        raise ValueError(what)

    def clusters(self) -> list[str | None]:
        return [failure_cluster(r) for r in self.results]


def distinct_clusters(clusters: np.ndarray) -> float:
    return float(len({c for c in clusters if c}))


def cluster_entropy(clusters: np.ndarray) -> float:
    found = [c for c in clusters if c]
    if not found:
        return 0.0
    _, counts = np.unique(np.array(found, dtype=object).astype(str), return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


def exposure(arms: Sequence[str], family: str, episodes: int, contexts: int, rounds: int, k: int,
             seed: int = 0) -> list[Arm]:
    """Each attacker against the same fixed defender (the under-cautious default IDM/MOBIL planner);
    the learning ones first train `rounds` rounds on `contexts` contexts each (ADV-0: K candidates
    per context rolled out against the defender; SAGE-like: open loop, no rollouts); then every arm
    draws one scenario per evaluation seed -- the same seeds, the same generator -- and is rolled out."""
    cfg = LoopConfig(family=family, contexts=contexts, k=k, seed=seed)  # type: ignore[arg-type]
    defender = IdmDefender(cfg)
    ctx = Contexts()
    seeds = seeds_for(cfg, 0, "eval", episodes)
    out = []
    for name in arms:
        acfg = cfg.model_copy(update={"attacker": name})
        attacker = make_attacker(acfg)
        used = 0
        rollout = lambda ss, zs: defender.run(list(zip(zs, ss)))  # noqa: E731
        for r in range(1, rounds + 1 if attacker.learns else 1):
            train_seeds = seeds_for(acfg, r, "attack", contexts)
            report = attacker.train(train_seeds, {s: ctx(family, s) for s in train_seeds}, rollout, round_rng(acfg, r, 1))
            used += int(report.get("rollouts", 0))
        rng = np.random.default_rng([seed, 99])
        jobs = [(attacker.draw(ctx(family, s), rng), s) for s in seeds]
        out.append(Arm(name=name, results=defender.run(jobs), train_rollouts=used,
                       kl_to_prior=attacker.kl_to_prior([ctx(family, s) for s in seeds])))
    return out


def arm_numbers(arms: Sequence[Arm]) -> dict[str, str]:
    nums = {}
    for a in arms:
        nums[f"{a.name}: defender-failure rate"] = fmt_rate(*a.count("defender_failure"))
        nums[f"{a.name}: crash rate"] = fmt_rate(*a.count("crash"))
        nums[f"{a.name}: attacker-at-fault share of crashes"] = fmt_rate(*a.count("attacker_fault_of_crashes"))
        cl = np.array(a.clusters(), dtype=object)
        nums[f"{a.name}: distinct failure clusters / entropy (nats)"] = \
            f"{distinct_clusters(cl):.0f} / {cluster_entropy(cl):.3f}"
        nums[f"{a.name}: near-miss rate"] = fmt_rate(sum(r.near_miss for r in a.results), len(a.results))
        nums[f"{a.name}: defender return J (what the attacker lowers)"] = fmt_metric(mean_metric([r.reward for r in a.results]))
        nums[f"{a.name}: training rollouts against the defender"] = str(a.train_rollouts)
        if a.kl_to_prior is not None:
            nums[f"{a.name}: KL(q || p0) after training (nats)"] = f"{a.kl_to_prior:.4f}"
    return nums


def _sizes(episodes: int | None, seeds: int | None, family: str | None, default_episodes: int, default_seeds: int,
           default_family: str = "highway") -> tuple[int, int, str]:
    return episodes or default_episodes, seeds or default_seeds, family or default_family


MIN_RATE_EFFECT = 0.05  # a failure-rate difference smaller than 5 points is not the effect the claims are about
ATTACKER_FAULT_LIMIT = 0.05  # C3: the attacker-at-fault share of ADV-0's crashes


def check_c3(episodes: int | None = None, seeds: int | None = None, family: str | None = None, rounds: int = 3,
             k: int = 6, **_: object) -> Finding:
    n, c, fam = _sizes(episodes, seeds, family, 30, 6)
    arms = exposure(["adv0", "random", "scripted", "cat"], fam, n, c, rounds, k)
    adv = arms[0]
    parts = [rate_higher(f"defender-failure rate: adv0 - {b.name}", *adv.count("defender_failure"),
                         *b.count("defender_failure"), MIN_RATE_EFFECT) for b in arms[1:]]
    parts.append(rate_at_most("adv0 attacker-at-fault share of its crashes", *adv.count("attacker_fault_of_crashes"),
                              ATTACKER_FAULT_LIMIT, unit="adv0 crashes"))
    return Finding.judge(
        "C3", "ADV-0 exposes more defender-at-fault failures than random, scripted and CAT-like attackers at equal "
              "rollouts, with attacker-at-fault crashes <= 5%",
        f"against the under-cautious default IDM/MOBIL planner on {fam}, each attacker evaluated on the same {n} "
        f"seeds: defender-failure rate of adv0 above each baseline's (Newcombe CI > 0; not reproduced when the CI's "
        f"upper end < {MIN_RATE_EFFECT}), and the Wilson CI of adv0's attacker-at-fault share of crashes <= "
        f"{ATTACKER_FAULT_LIMIT}; adv0 first trains {rounds} rounds x {c} contexts x (K={k} + 1 reference draw)",
        parts, numbers=arm_numbers(arms))


C4_MIN_FAILURES = 5  # added after the first run (see the README): fewer failures leave the bootstrap degenerate


def failures_needed(k: int, n: int, want: int = C4_MIN_FAILURES) -> int:
    """Episodes to expect `want` failures at the observed rate (at zero failures: at the Wilson
    upper end, so a lower bound)."""
    rate = k / n if k else wilson(0, n)[1]
    return math.ceil(want / rate)


def diversity_parts(adv: Arm, others: Sequence[Arm]) -> list[Part]:
    """C4's comparisons: distinct failure clusters of `adv` minus each other arm's. Until `adv` shows
    C4_MIN_FAILURES failures a part cannot be "not reproduced" (the bootstrap of a handful of
    failures, or none, has no width), only inconclusive, needing the episodes to expect that many."""
    clusters = np.array(adv.clusters(), dtype=object)
    parts = [stat_higher(f"distinct failure clusters: {adv.name} - {b.name}", clusters,
                         np.array(b.clusters(), dtype=object), distinct_clusters, 1.0) for b in others]
    k, n = adv.count("defender_failure")
    if k >= C4_MIN_FAILURES:
        return parts
    rule = f"; judged only once {adv.name} shows >= {C4_MIN_FAILURES} defender failures"
    return [p if p.verdict == "reproduced" else
            p.model_copy(update={"verdict": "inconclusive", "needed_n": failures_needed(k, n), "rule": p.rule + rule,
                                 "unit": f"episodes per arm at least (to expect {C4_MIN_FAILURES} {adv.name} failures)"})
            for p in parts]


def check_c4(episodes: int | None = None, seeds: int | None = None, family: str | None = None, rounds: int = 3,
             k: int = 6, **_: object) -> Finding:
    n, c, fam = _sizes(episodes, seeds, family, 30, 6)
    arms = exposure(["adv0", "random", "scripted", "cat"], fam, n, c, rounds, k)
    parts = diversity_parts(arms[0], arms[1:])
    return Finding.judge(
        "C4", "ADV-0's failures are more diverse than those of random, scripted and CAT-like attackers",
        f"on the same {n} evaluation seeds per attacker ({fam}, the default IDM/MOBIL planner), the number of distinct "
        "defender-failure clusters (manoeuvre | slot | impact rule | impact-speed bin) adv0 finds exceeds each "
        "baseline's (percentile bootstrap CI of the difference > 0; not reproduced when its upper end < 1 cluster)",
        parts, numbers=arm_numbers(arms),
        notes=["clusters count only defender-at-fault failures: an attacker that crashes into the ego finds no failure"])


def check_c5(episodes: int | None = None, seeds: int | None = None, family: str | None = None, rounds: int = 3,
             k: int = 6, **_: object) -> Finding:
    n, c, fam = _sizes(episodes, seeds, family, 30, 6)
    arms = exposure(["adv0", "sage"], fam, n, c, rounds, k)
    parts = [rate_higher("defender-failure rate: adv0 (aligned utility) - sage (open-loop surrogate)",
                         *arms[0].count("defender_failure"), *arms[1].count("defender_failure"), MIN_RATE_EFFECT)]
    return Finding.judge(
        "C5", "an attacker whose utility is the defender's own (fault-gated) return finds more defender failures than "
              "the same learner on an open-loop collision surrogate",
        f"adv0 and SAGE-like (same policy, prior and DPO; utility: the open-loop surrogate) each train {rounds} rounds "
        f"x {c} contexts, then draw on the same {n} seeds ({fam}, default IDM/MOBIL): adv0's defender-failure rate "
        f"above SAGE-like's (Newcombe CI > 0; not reproduced when the CI's upper end < {MIN_RATE_EFFECT})",
        parts, numbers=arm_numbers(arms))


class Trained(BaseModel):
    """What one trained loop of `two_loops` leaves: its final attacker and defender, the defender
    episodes the attacker spent, and the defender's report of every round."""

    model_config = {"arbitrary_types_allowed": True}
    attacker: Any
    defender: Any
    used: int
    defender_reports: list[dict[str, Any]]


def two_loops(arms: Sequence[tuple[str, dict[str, Any]]], base: LoopConfig) -> dict[str, Trained]:
    """Train one loop per arm (name, config overrides) without per-round evaluation."""
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
    return [r for fam, jobs in by_family.items() for r in defender.run(jobs, fam)]


NORMAL_RETURN_LOSS = -0.05  # C6/C7: the adversarially trained defender may lose at most 5% of normal return


def generalisation(defender: str, episodes: int, seeds: int, family: str, rounds: int, **sizes: Any) -> tuple[
        list[Part], dict[str, str], list[str]]:
    """The adv0-trained and the normally trained defender of `defender` (same budget), evaluated on
    the held-out conditions and on normal traffic; pooled over `seeds` training seeds."""
    held: dict[str, list[EpisodeResult]] = {"adv0": [], "none": []}
    normal: dict[str, list[EpisodeResult]] = {"adv0": [], "none": []}
    spent: dict[str, int] = {"adv0": 0, "none": 0}
    for seed in range(seeds):
        base = LoopConfig(defender=defender, family=family, rounds=rounds, seed=seed,  # type: ignore[arg-type]
                          episodes=episodes, held_out_episodes=max(1, episodes // 2), **sizes)
        trained = two_loops([("adv0", {"attacker": "adv0"}), ("none", {"attacker": "none"})], base)
        for name, t in trained.items():
            held[name] += held_out_results(base, t.defender)
            normal[name] += t.defender.run([(None, s) for s in seeds_for(base, 0, "eval", episodes)])
            spent[name] += t.used
    k_none, n_none = sum(r.defender_failure for r in held["none"]), len(held["none"])
    k_adv, n_adv = sum(r.defender_failure for r in held["adv0"]), len(held["adv0"])
    parts = [
        rate_higher("held-out defender-failure rate: normally trained - adv0-trained", k_none, n_none, k_adv, n_adv,
                    MIN_RATE_EFFECT),
        relative_not_below("normal-traffic return: adv0-trained relative to normally trained",
                           [r.reward for r in normal["adv0"]], [r.reward for r in normal["none"]], NORMAL_RETURN_LOSS),
    ]
    numbers = {}
    for name in ("adv0", "none"):
        hr, nr = held[name], normal[name]
        numbers[f"{name}-trained: held-out defender-failure rate"] = fmt_rate(sum(r.defender_failure for r in hr), len(hr))
        numbers[f"{name}-trained: held-out crash rate"] = fmt_rate(sum(r.crashed for r in hr), len(hr))
        numbers[f"{name}-trained: normal-traffic crash rate"] = fmt_rate(sum(r.crashed for r in nr), len(nr))
        numbers[f"{name}-trained: normal-traffic return"] = fmt_metric(mean_metric([r.reward for r in nr]))
        numbers[f"{name}-trained: attacker rollouts in training"] = str(spent[name])
        fams: dict[str, list[bool]] = {}
        for r in hr:
            fams.setdefault(r.family, []).append(r.defender_failure)
        numbers[f"{name}-trained: held-out defender failures per family"] = ", ".join(
            f"{f} {sum(v)}/{len(v)}" for f, v in sorted(fams.items()))
    notes = [f"{seeds} training seed(s) x {rounds} rounds; held-out = {', '.join(HELD_OUT_FAMILIES)} under a fixed "
             "uniform evaluation adversary (all manoeuvres) and the training map under held-out manoeuvres"
             if family == "highway" else "held-out = the toy world's held-out manoeuvres"]
    return parts, numbers, notes


def check_c6(episodes: int | None = None, seeds: int | None = None, family: str | None = None, rounds: int = 2,
             **_: object) -> Finding:
    n, s, fam = _sizes(episodes, seeds, family, 16, 1)
    parts, numbers, notes = generalisation("idm", n, s, fam, rounds, contexts=4, k=4, scenarios=4,
                                           cem_generations=2, cem_population=6)
    return Finding.judge(
        "C6", "the motion planner tuned against ADV-0 generalises to held-out families without losing normal return "
              "by more than 5%",
        f"IDM/MOBIL tuned by CEM for {rounds} rounds against adv0's scenarios vs tuned the same way on normal traffic "
        f"only: held-out defender-failure rate lower (Newcombe CI of normal-trained - adv0-trained > 0; not reproduced "
        f"when its upper end < {MIN_RATE_EFFECT}) and normal-traffic return not more than 5% lower (bootstrap CI of "
        f"the relative change >= {NORMAL_RETURN_LOSS})",
        parts, numbers=numbers, notes=notes)


C7_DQN_STEPS = 3000  # fine-tuning steps per round at C7's default size


def check_c7(episodes: int | None = None, seeds: int | None = None, family: str | None = None,
             rounds: int | None = None, dqn_steps: int | None = None, dqn_checkpoint: str | None = None,
             **_: object) -> Finding:
    n, s, fam = _sizes(episodes, seeds, family, 30, 3)
    r, steps = rounds or 3, dqn_steps or C7_DQN_STEPS
    if fam != "highway":
        raise HarnessError("check C7 (DQN) runs on --family highway only (the toy world has no Kinematics observation)")
    from environments.adv0 import dqn

    target = Path(dqn_checkpoint) if dqn_checkpoint else dqn.checkpoint_path(dqn.DEFAULT_PRETRAIN_STEPS, 0)
    if not target.is_file():  # fail before any training, naming the command that builds it
        dqn.load_checkpoint(target)
    parts, numbers, notes = generalisation("dqn", n, s, fam, r, contexts=6, k=6, scenarios=16, dqn_steps=steps,
                                           dqn_checkpoint=dqn_checkpoint)
    size = "the default size" if (n, s, r, steps) == (30, 3, 3, C7_DQN_STEPS) else \
        f"a reduced size ({s} seed(s), {r} round(s) x {steps} steps, {n} episodes) -- not the check's default"
    return Finding.judge(
        "C7", "the DQN fine-tuned against ADV-0 generalises to held-out families better than one fine-tuned on normal "
              "traffic, without losing normal return by more than 5%",
        f"the cached DQN fine-tuned {r} rounds x {steps} steps with half its episodes attacked by adv0's scenarios vs "
        f"the same fine-tuning on normal traffic, {s} seeds pooled: held-out defender-failure rate lower (Newcombe CI > "
        f"0; not reproduced when its upper end < {MIN_RATE_EFFECT}) and normal return not more than 5% lower",
        parts, numbers=numbers, notes=notes + [f"run at {size}; the default is a long command: about 1.5 CPU-hours"])


def check_c8(episodes: int | None = None, seeds: int | None = None, family: str | None = None, rounds: int = 3,
             **_: object) -> Finding:
    n, c, fam = _sizes(episodes, seeds, family, 30, 4)
    base = LoopConfig(defender="idm", attacker="adv0", family=fam, rounds=rounds, contexts=c, k=4,  # type: ignore[arg-type]
                      scenarios=4, cem_generations=1, cem_population=6)
    trained = two_loops([("iterated", {"ablation": "none"}), ("frozen", {"ablation": "frozen"})], base)
    ctx, arms = Contexts(), []
    for name, t in trained.items():
        rng = np.random.default_rng([base.seed, 99])
        eval_seeds = seeds_for(base, 0, "eval", n)
        jobs = [(t.attacker.draw(ctx(fam, s), rng), s) for s in eval_seeds]
        arms.append(Arm(name=name, results=t.defender.run(jobs), train_rollouts=t.used,
                        kl_to_prior=t.attacker.kl_to_prior([ctx(fam, s) for s in eval_seeds])))
    parts = [rate_higher("defender-failure rate against its own final defender: iterated - frozen",
                         *arms[0].count("defender_failure"), *arms[1].count("defender_failure"), MIN_RATE_EFFECT)]
    return Finding.judge(
        "C8", "an attacker iterated every round keeps finding failures of the adapting defender that an attacker frozen "
              "after round 1 no longer finds",
        f"two min-max loops ({fam}, IDM/MOBIL tuned by CEM each round, {rounds} rounds), ADV-0 iterated vs frozen after "
        f"round 1; after the last round each attacker draws on the same {n} seeds against its own loop's defender: "
        f"iterated defender-failure rate above frozen's (Newcombe CI > 0; not reproduced when its upper end < "
        f"{MIN_RATE_EFFECT})",
        parts, numbers=arm_numbers(arms))


C9_K = 2  # ADV-0's candidates per context in C9: each is a whole driver episode, every step a model call


def c9_driver_episodes(episodes: int, contexts: int, rounds: int) -> int:
    """The driver episodes C9 plays: per round K + 1 attacker rollouts per context and 2 x contexts
    scenarios it reflects on, then the evaluation episodes twice (with and without the memory)."""
    return rounds * (contexts * (C9_K + 1) + 2 * contexts) + 2 * episodes


def check_c9(episodes: int | None = None, seeds: int | None = None, family: str | None = None,
             rounds: int | None = None, model: str = "local/smollm2-135m", **_: object) -> Finding:
    n, c, fam = _sizes(episodes, seeds, family, 20, 4)
    r = rounds or 2
    cfg = LoopConfig(defender="llm", attacker="adv0", family=fam, rounds=r, contexts=c, k=C9_K,  # type: ignore[arg-type]
                     scenarios=2 * c, model=model, held_out_episodes=0, episodes=n)
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
    k_wo, k_w = sum(r.crashed for r in without), sum(r.crashed for r in with_memory)
    parts = [rate_higher("crash rate: without reflections - with ADV-0's reflections", k_wo, n, k_w, n,
                         MIN_RATE_EFFECT)]
    reports = trained.defender_reports
    steps = sum(x.steps for x in with_memory + without)
    numbers = {
        "with reflections: crash rate": fmt_rate(k_w, n), "without: crash rate": fmt_rate(k_wo, n),
        "with reflections: defender-failure rate": fmt_rate(sum(x.defender_failure for x in with_memory), n),
        "without: defender-failure rate": fmt_rate(sum(x.defender_failure for x in without), n),
        "evaluation episodes whose crash outcome differs between the arms": str(
            sum(a.crashed != b.crashed for a, b in zip(with_memory, without))),
        "invalid actions (with / without)": f"{sum(x.invalid_actions for x in with_memory)} / "
                                            f"{sum(x.invalid_actions for x in without)}",
        "training: driver episodes (attacker rollouts + reflection scenarios)": f"{trained.used} + "
                                                                                f"{sum(x['episodes'] for x in reports)}",
        "training: crashes / lessons written per round": ", ".join(
            f"{x['crashes']}/{x['lessons_added']}" for x in reports),
        "lessons in memory": str(len(lessons)),
        "evaluation driving steps (model calls, both arms)": str(steps),
    }
    notes = ["a long command: every driving step is a model call; this size plays "
             f"{c9_driver_episodes(n, c, r)} driver episodes (rounds x (contexts x {C9_K + 1} + 2 x contexts) + "
             "2 x episodes)",
             "both arms drive the same episodes (same draws, same seeds, temperature 0): with an empty memory the "
             "arms differ only by the lessons in the prompt"]
    if not lessons:
        notes.append("the driver wrote no lesson in training (no crash it could have caused): the arms drive "
                     "identical prompts, so this run cannot show an effect of reflection")
    notes += [f"lesson: {les[:160]}" for les in lessons[:3]]
    return Finding.judge(
        "C9", "the LLM driver crashes less with the reflections it learned from ADV-0's failures than without",
        f"the driver ({model}) drives {r} round(s) of the min-max loop on {fam} (ADV-0 trains on {c} contexts x "
        f"(K={C9_K} + 1) rollouts against it; the driver then drives {2 * c} of its draws, reflecting after each "
        f"crash not the attacker's fault); then adv0's draws on the same {n} evaluation seeds with that memory vs an "
        f"empty one: crash rate lower with it (Newcombe CI > 0; not reproduced when its upper end < "
        f"{MIN_RATE_EFFECT})",
        parts, numbers=numbers, notes=notes)


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
    ratio: Metric = tc.numbers["ratio"]  # type: ignore[assignment]
    r = ratio.value if ratio.value is not None else float("nan")
    notes = [tc.note]
    needed = None
    if tc.verdict == "inconclusive":
        if r < toy_checks.C1_RATIO_MAX:
            needed = scaled_n(n, ratio, toy_checks.C1_RATIO_MAX - r)
        elif r >= 1.0:
            needed = scaled_n(n, ratio, r - 1.0)
        else:  # between the thresholds: more contexts narrow the CI but never decide
            notes.append(f"the ratio {r:.3f} lies between {toy_checks.C1_RATIO_MAX} and 1: the criterion leaves that "
                         "band inconclusive whatever the number of contexts")
    part = Part(what="mean KL(q||q*) / mean KL(p0||q*) over contexts", value=ratio.value, ci_low=ratio.ci_low,
                ci_high=ratio.ci_high, n=f"{n} contexts", verdict=tc.verdict, needed_n=needed, unit="contexts",
                rule=f"CI upper end < {toy_checks.C1_RATIO_MAX}: reproduced; CI lower end >= 1: not reproduced")
    return Finding.judge("C1", tc.claim, tc.criterion, [part], numbers=_toy_numbers(tc.numbers), notes=notes,
                         wall_s=tc.wall_s)


def check_c2(episodes: int | None = None, seeds: int | None = None, **_: object) -> Finding:
    from environments.adv0 import toy_checks

    train = range(seeds or len(toy_checks.C2_TRAIN_SEEDS))
    test = range(100, 100 + (episodes or len(toy_checks.C2_TEST_SEEDS)))
    tc = toy_checks.check_c2(train_seeds=train, test_seeds=test)
    rise: Metric = tc.numbers["rise"]  # type: ignore[assignment]
    gap_max = float(tc.numbers["v_minus_ep0j_max"])  # type: ignore[arg-type]
    bound = Part(what="max over contexts and defenders of V_tau - E_p0[J] (exact)", value=gap_max, ci_low=gap_max,
                 ci_high=gap_max, n="every context, every round", verdict="reproduced" if gap_max <= 1e-9 else "not reproduced",
                 rule="<= 0 (exact, by enumeration): reproduced")
    rise_verdict: Verdict = ("reproduced" if (rise.ci_low or 0) > 0 else "not reproduced" if (rise.ci_high or 0) < 0
                             else "inconclusive")
    raise_part = Part(what="mean rise of V_tau on held-out contexts after min-max training", value=rise.value,
                      ci_low=rise.ci_low, ci_high=rise.ci_high, n=f"{len(test)} contexts", verdict=rise_verdict,
                      needed_n=scaled_n(len(test), rise, max(abs(rise.value or 0), 1e-3)) if rise_verdict == "inconclusive" else None,
                      unit="held-out contexts", rule="CI > 0: reproduced; CI < 0: not reproduced")
    return Finding.judge("C2", tc.claim, tc.criterion, [bound, raise_part], numbers=_toy_numbers(tc.numbers),
                         notes=[tc.note, "toy world only: V_tau needs J over the whole space, which highway-env cannot enumerate"],
                         wall_s=tc.wall_s)


CHECKS: dict[str, tuple[Callable[..., Finding], str]] = {
    "C1": (check_c1, "quick: toy world, exact q* (< 1 min)"),
    "C2": (check_c2, "quick: toy world, V_tau <= E[J] and its rise under min-max"),
    "C3": (check_c3, "quick: failure exposure vs random/scripted/CAT, attacker-at-fault <= 5% (highway, minutes)"),
    "C4": (check_c4, "quick: failure diversity (distinct clusters) vs random/scripted/CAT (highway, minutes)"),
    "C5": (check_c5, "quick: aligned utility vs the open-loop surrogate (SAGE-like) (highway, minutes)"),
    "C6": (check_c6, "quick: the CEM-tuned planner on held-out families, normal return within 5% (highway, minutes)"),
    "C7": (check_c7, "long: the DQN's held-out generalisation, 3 seeds (about 1.5 CPU-hours; needs the checkpoint)"),
    "C8": (check_c8, "quick: iterated vs frozen attacker against an adapting planner (highway, minutes)"),
    "C9": (check_c9, "long: the LLM driver with vs without reflections from ADV-0's failures (model calls)"),
}


def run_check(name: str, *, episodes: int | None = None, seeds: int | None = None, family: str | None = None,
              model: str = "local/smollm2-135m", rounds: int | None = None, dqn_steps: int | None = None,
              dqn_checkpoint: str | None = None) -> Finding:
    """Run check `name` (C1..C9) and time it (wall and CPU-seconds of this process and its children).
    `rounds` (C3-C9), `dqn_steps` and `dqn_checkpoint` (C7) and `model` (C9) override a check's size."""
    key = name.upper()
    if key not in CHECKS:
        raise HarnessError(f"check {name!r} is unknown; use one of {', '.join(CHECKS)}")
    if family is not None and key in ("C1", "C2") and family != "toy":
        raise HarnessError(f"check {key} runs on the toy world only (it enumerates J); drop --family")
    sizes: dict[str, Any] = {k: v for k, v in (("rounds", rounds), ("dqn_steps", dqn_steps),
                                               ("dqn_checkpoint", dqn_checkpoint)) if v is not None}
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    finding = CHECKS[key][0](episodes=episodes, seeds=seeds, family=family, model=model, **sizes)
    return finding.model_copy(update={"wall_s": time.perf_counter() - wall0, "cpu_s": cpu_seconds() - cpu0})
