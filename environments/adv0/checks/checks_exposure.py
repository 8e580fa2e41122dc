"""The exposure checks C3-C5 (`harness adv0 check C3|C4|C5`; the registry is `checks.py`): attackers
pitted against one fixed, under-cautious IDM/MOBIL planner on the same evaluation seeds (`exposure`),
each arm's failures counted and clustered (`Arm`, `arm_numbers`). C8 (`checks_loops.py`) reuses the arms.
A check is cells and a judge (`checks.py`): `exposure_cell` plays one arm at one seed (the arms share
nothing but the fixed defender and the evaluation seeds, so an arm alone plays what it plays beside
the others), `judge_c3`.. pool each arm's cells (`pooled_arm`) and judge them.

Episodes run in parallel (`parallel.py`: processes here, a Ray cluster beyond), with the serial
loop's results.

May import: numpy, pydantic, `harness`, `environments.adv0` (cells, claims, loop, metrics, parallel, scenario,
verdicts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from environments.adv0.checks.cells import Cell, arm_cells, mean_stat, pooled_count, pooled_episodes
from environments.adv0.checks.claims import ATTACKER_FAULT_LIMIT, C4_MIN_FAILURES, MIN_RATE_EFFECT, size
from environments.adv0.checks.verdicts import (
    LEVEL,
    Finding,
    Part,
    fmt_metric,
    fmt_rate,
    rate_at_most,
    rate_higher,
    stat_higher,
)
from environments.adv0.metrics import entropy, failure_cluster
from environments.adv0.sim.scenario import EpisodeResult, failures_by_party, party_text
from environments.adv0.train.loop import Contexts, IdmDefender, LoopConfig, make_attacker, round_rng, seeds_for
from environments.adv0.train.parallel import defender_episodes, rollout_for
from harness.stats import mean_metric, wilson_interval


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


def failure_rate_text(results: Sequence[EpisodeResult]) -> str:
    """The defender-failure rate with its failures by the other vehicle of the contact beside it."""
    k = sum(r.defender_failure for r in results)
    return f"{fmt_rate(k, len(results))}; {party_text(failures_by_party(results))}"


def with_parties(part: Part, arms: Sequence[Arm]) -> Part:
    """`part` with each arm's defender failures by the other vehicle beside its verdict (not judged)."""
    text = "; ".join(f"{a.name}: {party_text(failures_by_party(a.results))}" for a in arms)
    return part.model_copy(update={"by_party": text})


def distinct_clusters(clusters: np.ndarray) -> float:
    return float(len({c for c in clusters if c}))


def cluster_entropy(clusters: np.ndarray) -> float:
    found = [c for c in clusters if c]
    if not found:
        return 0.0
    _, counts = np.unique(np.array(found, dtype=object).astype(str), return_counts=True)
    return entropy(counts) or 0.0


def exposure(
    arms: Sequence[str], family: str, episodes: int, contexts: int, rounds: int, k: int, seed: int = 0
) -> list[Arm]:
    """Each attacker against the same fixed defender (the under-cautious default IDM/MOBIL planner);
    the learning ones first train `rounds` rounds on `contexts` contexts each (ADV-0: K candidates
    per context rolled out against the defender; SAGE-like: open loop, no rollouts); then every arm
    draws one scenario per evaluation seed -- the same seeds, the same generator -- and is rolled out."""
    cfg = LoopConfig(family=family, contexts=contexts, k=k, seed=seed)
    defender = IdmDefender(cfg)
    ctx = Contexts()
    seeds = seeds_for(cfg, 0, "eval", episodes)
    out = []
    for name in arms:
        acfg = cfg.model_copy(update={"attacker": name})
        attacker = make_attacker(acfg)
        used = 0
        rollout = rollout_for(defender)
        for r in range(1, rounds + 1 if attacker.learns else 1):
            train_seeds = seeds_for(acfg, r, "attack", contexts)
            report = attacker.train(
                train_seeds, {s: ctx(family, s) for s in train_seeds}, rollout, round_rng(acfg, r, 1)
            )
            used += int(report.get("rollouts", 0))
        rng = np.random.default_rng([seed, 99])
        jobs = [(attacker.draw(ctx(family, s), rng), s) for s in seeds]
        out.append(
            Arm(
                name=name,
                results=defender_episodes(defender, jobs),
                train_rollouts=used,
                kl_to_prior=attacker.kl_to_prior([ctx(family, s) for s in seeds]),
            )
        )
    return out


def arm_numbers(arms: Sequence[Arm]) -> dict[str, str]:
    nums = {}
    for a in arms:
        nums[f"{a.name}: defender-failure rate"] = failure_rate_text(a.results)
        nums[f"{a.name}: crash rate"] = fmt_rate(*a.count("crash"))
        nums[f"{a.name}: attacker-at-fault share of crashes"] = fmt_rate(*a.count("attacker_fault_of_crashes"))
        cl = np.array(a.clusters(), dtype=object)
        nums[f"{a.name}: distinct failure clusters / entropy (nats)"] = (
            f"{distinct_clusters(cl):.0f} / {cluster_entropy(cl):.3f}"
        )
        nums[f"{a.name}: near-miss rate"] = fmt_rate(sum(r.near_miss for r in a.results), len(a.results))
        nums[f"{a.name}: defender return J (what the attacker lowers)"] = fmt_metric(
            mean_metric([r.reward for r in a.results], LEVEL)
        )
        nums[f"{a.name}: training rollouts against the defender"] = str(a.train_rollouts)
        if a.kl_to_prior is not None:
            nums[f"{a.name}: KL(q || p0) after training (nats)"] = f"{a.kl_to_prior:.4f}"
    return nums


def check_sizes(
    episodes: int | None, seeds: int | None, family: str | None, check: str, seeds_key: str = "contexts"
) -> tuple[int, int, str]:
    """A check's (episodes, seeds or contexts, family): the flags given, else the check's default
    size (`claims.SIZES`, the size its registered criterion is judged at)."""
    return episodes or size(check, "episodes"), seeds or size(check, seeds_key), family or "highway"


def exposure_cell(
    check: str,
    arm: str,
    seed: int,
    episodes: int | None = None,
    seeds: int | None = None,
    family: str | None = None,
    rounds: int | None = None,
    k: int | None = None,
    **_: object,
) -> Cell:
    """One arm of C3/C4/C5 at one seed: `exposure` of that arm alone (the arms share nothing but
    the fixed defender and the evaluation seeds, so it plays what the arm plays beside the others)."""
    n, c, fam = check_sizes(episodes, seeds, family, check)
    rounds, k = rounds or size(check, "rounds"), k or size(check, "k")
    [a] = exposure([arm], fam, n, c, rounds, k, seed=seed)
    return Cell(
        check=check,
        arm=arm,
        seed=seed,
        episodes={"eval": a.results},
        counts={"train_rollouts": a.train_rollouts},
        stats={"kl_to_prior": a.kl_to_prior},
    )


def pooled_arm(name: str, cells: Sequence[Cell]) -> Arm:
    """An arm's cells as one `Arm`: the episodes of every seed, in seed order."""
    return Arm(
        name=name,
        results=pooled_episodes(cells, "eval"),
        train_rollouts=pooled_count(cells, "train_rollouts"),
        kl_to_prior=mean_stat(cells, "kl_to_prior"),
    )


def exposure_sizes(
    check: str, cells: Mapping[str, Sequence[Cell]], **flags: Any
) -> tuple[list[Arm], int, int, str, int, int]:
    """(the pooled arms in ARMS order, episodes per arm, contexts, family, rounds, k) of a check's cells."""
    _, c, fam = check_sizes(flags.get("episodes"), flags.get("seeds"), flags.get("family"), check)
    rounds, k = flags.get("rounds") or size(check, "rounds"), flags.get("k") or size(check, "k")
    arms = [pooled_arm(a, cs) for a, cs in arm_cells(check, cells).items()]
    return arms, len(arms[0].results), c, fam, rounds, k


def judge_c3(cells: Mapping[str, Sequence[Cell]], **flags: Any) -> Finding:
    arms, n, c, fam, rounds, k = exposure_sizes("C3", cells, **flags)
    adv = arms[0]
    parts = [
        with_parties(
            rate_higher(
                f"defender-failure rate: adv0 - {b.name}",
                *adv.count("defender_failure"),
                *b.count("defender_failure"),
                MIN_RATE_EFFECT,
                metric="defender-failure rate",
                arm="adv0",
                versus=b.name,
            ),
            [adv, b],
        )
        for b in arms[1:]
    ]
    parts.append(
        rate_at_most(
            "adv0 attacker-at-fault share of its crashes",
            *adv.count("attacker_fault_of_crashes"),
            ATTACKER_FAULT_LIMIT,
            metric="attacker-at-fault share of crashes",
            arm="adv0",
            unit="adv0 crashes",
        )
    )
    return Finding.judge(
        "C3",
        "ADV-0 exposes more defender-at-fault failures than random, scripted and CAT-like attackers at equal "
        "rollouts, with attacker-at-fault crashes <= 5%",
        f"against the under-cautious default IDM/MOBIL planner on {fam}, each attacker evaluated on the same {n} "
        f"seeds: defender-failure rate of adv0 above each baseline's (Newcombe CI > 0; not reproduced when the CI's "
        f"upper end < {MIN_RATE_EFFECT}), and the Wilson CI of adv0's attacker-at-fault share of crashes <= "
        f"{ATTACKER_FAULT_LIMIT}; adv0 first trains {rounds} rounds x {c} contexts x (K={k} + 1 reference draw)",
        parts,
        numbers=arm_numbers(arms),
        world=fam,
        setting=exposure_setting(fam, n, c, rounds, k),
    )


def exposure_setting(family: str, episodes: int, contexts: int, rounds: int, k: int) -> str:
    return (
        f"{family}: attackers against one fixed, under-cautious default IDM/MOBIL planner, {episodes} evaluation "
        f"episodes per attacker on the same seeds; adv0 trains {rounds} rounds x {contexts} contexts x K={k}"
    )


def failures_needed(k: int, n: int, want: int = C4_MIN_FAILURES) -> int:
    """Episodes to expect `want` failures at the observed rate (at zero failures: at the Wilson
    upper end, so a lower bound)."""
    rate = k / n if k else wilson_interval(0, n, LEVEL)[1]
    return math.ceil(want / rate)


def diversity_parts(adv: Arm, others: Sequence[Arm]) -> list[Part]:
    """C4's comparisons: distinct failure clusters of `adv` minus each other arm's (percentile
    bootstrap over episodes, at >= 30 episodes per arm). Until `adv` shows C4_MIN_FAILURES failures
    no interval is judged (the bootstrap of a handful of failures, or none, has no width): the part
    is inconclusive, needing the episodes to expect that many."""
    clusters = np.array(adv.clusters(), dtype=object)
    parts = [
        stat_higher(
            f"distinct failure clusters: {adv.name} - {b.name}",
            clusters,
            np.array(b.clusters(), dtype=object),
            distinct_clusters,
            1.0,
            metric=f"distinct defender-failure clusters (judged at >= {C4_MIN_FAILURES} failures)",
            arm=adv.name,
            versus=b.name,
        )
        for b in others
    ]
    k, n = adv.count("defender_failure")
    if k >= C4_MIN_FAILURES:
        return parts
    gate = f"judged only once {adv.name} shows >= {C4_MIN_FAILURES} defender failures ({k} so far: no interval)"
    return [
        p.model_copy(
            update={
                "ci_low": None,
                "ci_high": None,
                "needed_n": failures_needed(k, n),
                "note": f"{p.note}; {gate}",
                "unit": f"episodes per arm at least (to expect {C4_MIN_FAILURES} {adv.name} failures)",
            }
        )
        for p in parts
    ]


def judge_c4(cells: Mapping[str, Sequence[Cell]], **flags: Any) -> Finding:
    arms, n, c, fam, rounds, k = exposure_sizes("C4", cells, **flags)
    parts = diversity_parts(arms[0], arms[1:])
    return Finding.judge(
        "C4",
        "ADV-0's failures are more diverse than those of random, scripted and CAT-like attackers",
        f"on the same {n} evaluation seeds per attacker ({fam}, the default IDM/MOBIL planner), the number of distinct "
        "defender-failure clusters (manoeuvre | slot | impact rule | impact-speed bin) adv0 finds exceeds each "
        "baseline's (percentile bootstrap CI of the difference > 0; not reproduced when its upper end < 1 cluster; "
        f"judged only at >= 30 episodes per arm and once adv0 shows >= {C4_MIN_FAILURES} defender failures)",
        parts,
        numbers=arm_numbers(arms),
        world=fam,
        setting=exposure_setting(fam, n, c, rounds, k),
        notes=[
            "clusters count only defender-at-fault failures: an attacker that crashes into the ego finds no failure"
        ],
    )


def judge_c5(cells: Mapping[str, Sequence[Cell]], **flags: Any) -> Finding:
    arms, n, c, fam, rounds, k = exposure_sizes("C5", cells, **flags)
    parts = [
        with_parties(
            rate_higher(
                "defender-failure rate: adv0 (aligned utility) - sage (open-loop surrogate)",
                *arms[0].count("defender_failure"),
                *arms[1].count("defender_failure"),
                MIN_RATE_EFFECT,
                metric="defender-failure rate",
                arm="adv0",
                versus="sage",
            ),
            arms,
        )
    ]
    return Finding.judge(
        "C5",
        "an attacker whose utility is the defender's own (fault-gated) return finds more defender failures than "
        "the same learner on an open-loop collision surrogate",
        f"adv0 and SAGE-like (same policy, prior and DPO; utility: the open-loop surrogate) each train {rounds} rounds "
        f"x {c} contexts, then draw on the same {n} seeds ({fam}, default IDM/MOBIL): adv0's defender-failure rate "
        f"above SAGE-like's (Newcombe CI > 0; not reproduced when the CI's upper end < {MIN_RATE_EFFECT})",
        parts,
        numbers=arm_numbers(arms),
        world=fam,
        setting=exposure_setting(fam, n, c, rounds, k),
    )
