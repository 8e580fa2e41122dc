"""Claim checks on the toy world, exact by enumeration of the attacker's whole space (the lead
wires them to `harness adv0 check`). Each returns a `ToyCheck`: the claim, the criterion (fixed
before the first run, in the constants below), the numbers with Student-t CIs over contexts
(initial states), the judged parts (`verdicts.Part`: each verdict the core's `decide` on the
interval printed beside it), the verdict (the core's `combine`) and its wall time.

C1 -- preference learning approaches the optimal adversary. The ADV-0 attacker (default
`AttackerConfig`: soft Bradley-Terry targets, beta = tau) is iterated against a fixed default IDM
defender on `C1_SEEDS` contexts; then KL(q || q*) is computed exactly over every z of every
context, q* = p0 exp(-J_gated / tau) / Z. Reproduced when the mean KL(q || q*) is at most
`C1_RATIO_MAX` (one half) of the reference's KL(p0 || q*) -- the 95% CI's upper end of that ratio
of means at or below it; not reproduced when the CI's lower end is above it; inconclusive
otherwise. The CI is Fieller's over the paired contexts (`harness.stats.paired_ratio_interval`: a
t test of KL(q||q*) - r KL(p0||q*) inverted). Beside it: KL_floor, the best any factorised policy
can reach (`exact.factorised_projection`): q* is not factorised, so KL(q || q*) cannot go to 0.

Until session 19 the refutation point was 1 ("no closer than the prior"), not the threshold: the
band between 0.5 and 1 was inconclusive whatever the interval, so the printed 0.946 [0.759, 0.976]
(a percentile bootstrap over 8 contexts) lay wholly above its threshold with the verdict
"inconclusive" -- the rule disagreed with its own interval. The verdict is now the one rule's
(`harness.claims.decide`) on the interval printed, and that interval is Fieller's, not a percentile
bootstrap over 8 units (whose coverage there is unknown).

History (kept so the verdict can be audited): the first run (Adam, 100 steps a round, ties
dropped) gave ratio 1.83 [1.14, 4.13]: not reproduced; the policy random-walked. Diagnosis on
separate dev seeds (20-27): dropping tied pairs removes the restoring force along every direction
the utility ignores, and Adam turns near-0.5 soft targets into full-size noisy steps; with ties
kept and small SGD steps, on-policy DPO lands on the mean-field (factorised) projection of q*
reachable from p0 -- KL(q || q*) within 0.03-0.09 nats of it per context -- while q*'s mass, on
contexts with a defender-at-fault crash, sits on z the prior gives < 1% mass, a mode no local
learner started at p0 reaches (the global factorised floor there is ~0). Hence C1b, stated after
the dev-seed diagnosis and before the run on C1_SEEDS: mean KL(q || q*) - KL(p0-started
projection || q*) <= C1B_EXCESS_MAX nats (95% CI upper end) -- the learner reaches what its class
and its start allow. C1's verdict is C1a's; C1b is reported beside it (its verdict, too, by
`decide` on its t interval).

C2 -- the soft value is a lower bound that min-max training raises. (a) V_tau = -tau log
E_p0[exp(-J/tau)] <= E_p0[J] on every context and defender (exact; Jensen, a check of the
reconstruction's arithmetic). (b) Alternating rounds -- the attacker iterated against the current
defender, then the defender's IdmParams tuned by CEM (`planner.tune_cem` with the toy world's vectorised `population_scores`) against draws of the
attacker's q mixed with normal traffic -- raise V_tau on held-out contexts: reproduced when the 95%
Student-t CI of the mean rise V_tau(theta_final) - V_tau(theta_0) (paired by context) is above 0,
not reproduced when below 0, inconclusive when it straddles 0.

May import: numpy, pydantic, `harness`, `environments.adv0` (scenario, toy, toy_sim, attacker, verdicts).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, computed_field

from environments.adv0.checks.claims import C1_RATIO_MAX, C2_BOUND_TOL, size
from environments.adv0.checks.exact import factorised_projection, gated_return, kl_divergence, optimal_log_q, soft_value
from environments.adv0.checks.verdicts import LEVEL, VERDICT_OF, Part, judged, mean_above, ratio_at_most
from environments.adv0.policies.attacker import AttackerConfig, ReferencePrior, factor_sizes, fit_reference
from environments.adv0.sim import toy, toy_sim
from environments.adv0.sim.scenario import EpisodeResult, IdmParams, ScenarioParams, all_scenarios
from environments.adv0.train.attacker import Adv0Attacker, Rollout, iterate
from environments.adv0.train.planner import tune_cem
from harness.claims import Verdict, combine, decide
from harness.records import Metric
from harness.stats import mean_metric

C1_SEEDS = tuple(range(size("C1", "contexts")))
C1_ROUNDS = size("C1", "rounds")
C1B_EXCESS_MAX = 0.1  # nats over the factorised projection of q* reachable from p0
C2_TRAIN_SEEDS = tuple(range(size("C2", "train_contexts")))
C2_TEST_SEEDS = tuple(range(100, 100 + size("C2", "test_contexts")))
C2_ROUNDS = size("C2", "rounds")  # attacker then defender, twice
C2_ATTACKER_ROUNDS = size("C2", "attacker_rounds")
C2_DRAWS = 64  # attacker draws per training context the defender is tuned against
C2_CEM_GENERATIONS, C2_CEM_POPULATION = 4, 12  # the defender's CEM per round (`planner.tune_cem`, 3 elites)


class ToyCheck(BaseModel):
    name: str
    claim: str
    criterion: str
    numbers: dict[str, float | str | Metric | list[float]]
    parts: list[Part] = Field(min_length=1)
    wall_s: float
    note: str = ""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> Verdict:
        return combine(p.outcome for p in self.parts)


def toy_reference(samples: int = 20_000, seed: int = 0) -> ReferencePrior:
    """p0 fitted to the toy world's background behaviour (`toy.background_behaviour`)."""
    return fit_reference(toy.background_behaviour(np.random.default_rng(seed), samples))


def table_rollout(table: toy.ToyOutcome, seeds: Sequence[int]) -> Rollout:
    """A `Rollout` answering from an enumerated table (seeds x SPACE_SIZE) instead of simulating."""
    flat = toy.ToyOutcome(**{f.name: np.asarray(getattr(table, f.name)).reshape(-1) for f in fields(table)})
    row = {int(s): i for i, s in enumerate(seeds)}
    sizes = factor_sizes()
    space = int(np.prod(sizes))

    def rollout(episode_seeds: list[int], zs: list[ScenarioParams]) -> list[EpisodeResult]:
        out = []
        for s, z in zip(episode_seeds, zs):
            if int(s) not in row:
                raise ValueError(f"table rollout: seed {s} is not in the enumerated table ({sorted(row)})")
            k = row[int(s)] * space + int(np.ravel_multi_index(z.index(), sizes))
            out.append(toy._summary(flat, k, int(s), z))
        return out

    return rollout


def _exact(table: toy.ToyOutcome, reference: ReferencePrior, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """(J_gated, log q*) per context over the whole space."""
    J = gated_return(table.J, table.feasible, table.attacker_fault)
    return J, optimal_log_q(J, reference.joint_log_probs(), tau)


C1_VALUES = ("kl_q", "kl_p0", "kl_floor", "kl_local", "kl_q_p0")  # per context, what C1 is judged from


def c1_values(
    seeds: Sequence[int] = C1_SEEDS, rounds: int = C1_ROUNDS, config: AttackerConfig | None = None, seed: int = 0
) -> dict[str, list[float]]:
    """C1's per-context numbers: the attacker iterated `rounds` rounds on the contexts `seeds` (rng
    `seed`), then, per context, KL(q || q*), KL(p0 || q*), the factorised floor and the projection
    reachable from p0 (each against q*), and KL(q || p0)."""
    config = config or AttackerConfig()
    reference = toy_reference()
    seeds = list(seeds)
    table = toy.evaluate(seeds, all_scenarios())
    contexts = {s: toy_sim.context(s) for s in seeds}
    attacker = Adv0Attacker(reference, config)
    rng = np.random.default_rng(seed)
    rollout = table_rollout(table, seeds)
    for _ in range(rounds):
        iterate(attacker, seeds, contexts, rollout, rng)
    _, log_qstar = _exact(table, reference, config.tau)
    log_p0 = np.broadcast_to(reference.joint_log_probs(), log_qstar.shape)
    log_q = np.array([attacker.policy.joint_log_probs(contexts[s]) for s in seeds])
    return {
        "kl_q": kl_divergence(log_q, log_qstar).tolist(),
        "kl_p0": kl_divergence(log_p0, log_qstar).tolist(),
        "kl_floor": kl_divergence(np.array([factorised_projection(x) for x in log_qstar]), log_qstar).tolist(),
        "kl_local": kl_divergence(
            np.array([factorised_projection(x, start=reference.log_p) for x in log_qstar]), log_qstar
        ).tolist(),
        "kl_q_p0": attacker.policy.kl_to(reference, np.array(list(contexts.values()))).tolist(),
    }


def judge_c1(
    values: dict[str, np.ndarray], rounds: int = C1_ROUNDS, config: AttackerConfig | None = None, wall_s: float = 0.0
) -> ToyCheck:
    """C1's verdict from its per-context numbers (`c1_values`, of one or more seeds pooled)."""
    config = config or AttackerConfig()
    kl_q, kl_p0, kl_floor, kl_local = (np.asarray(values[k], dtype=float) for k in C1_VALUES[:4])
    n = int(kl_q.size)
    excess = mean_metric(kl_q - kl_local, LEVEL)
    c1b = (
        VERDICT_OF[decide(excess.ci_low, excess.ci_high, "<=", C1B_EXCESS_MAX)]
        if excess.ci_low is not None and excess.ci_high is not None
        else "inconclusive"
    )
    part = ratio_at_most(
        "mean KL(q||q*) / mean KL(p0||q*) over contexts",
        kl_q,
        kl_p0,
        C1_RATIO_MAX,
        metric="KL(q||q*) / KL(p0||q*), ratio of means over contexts",
        arm="adv0",
        unit="contexts",
    )
    ratio = Metric(value=part.value, ci_low=part.ci_low, ci_high=part.ci_high, n=n)
    return ToyCheck(
        name="C1",
        claim="preference learning (DPO on group-wise pairs against p0) approaches q* ~ p0 exp(-J/tau)",
        criterion=(
            f"95% Fieller CI of mean KL(q||q*) / mean KL(p0||q*) over {n} paired contexts at or below "
            f"{C1_RATIO_MAX} (not reproduced when wholly above it)"
        ),
        numbers={
            "kl_q_qstar": mean_metric(kl_q, LEVEL),
            "kl_p0_qstar": mean_metric(kl_p0, LEVEL),
            "kl_floor_factorised": mean_metric(kl_floor, LEVEL),
            "ratio": ratio,
            "kl_local_projection": mean_metric(kl_local, LEVEL),
            "c1b_excess": excess,
            "c1b_verdict": f"{c1b} (t CI of the excess <= {C1B_EXCESS_MAX} nats)",
            "kl_q_p0": float(np.mean(values["kl_q_p0"])),
            "rollouts": float(rounds * n * (config.k + config.reference_draws)),
            "per_context_kl_q": kl_q.round(4).tolist(),
            "per_context_kl_p0": kl_p0.round(4).tolist(),
        },
        parts=[part],
        wall_s=wall_s,
        note=f"tau={config.tau}, K={config.k}+{config.reference_draws}, {rounds} rounds, labels={config.labels}",
    )


def check_c1(
    seeds: Sequence[int] = C1_SEEDS, rounds: int = C1_ROUNDS, config: AttackerConfig | None = None, seed: int = 0
) -> ToyCheck:
    t0 = time.perf_counter()
    values = c1_values(seeds, rounds, config, seed)
    return judge_c1({k: np.asarray(v) for k, v in values.items()}, rounds, config, wall_s=time.perf_counter() - t0)


@dataclass(frozen=True)
class C2Run:
    """One C2 min-max run (the defaults are the check's): its training and held-out contexts, the
    min-max rounds, the attacker's rounds per min-max round, the attacker's config, the seed, and
    the attacker (`"exact"`: draws from the exact q* of the current defender, an oracle best
    response -- what min-max does when the attacker finds q*)."""

    train_seeds: Sequence[int] = C2_TRAIN_SEEDS
    test_seeds: Sequence[int] = C2_TEST_SEEDS
    rounds: int = C2_ROUNDS
    attacker_rounds: int = C2_ATTACKER_ROUNDS
    config: AttackerConfig | None = None
    seed: int = 0
    attacker_kind: Literal["adv0", "exact"] = "adv0"


def c2_values(run: C2Run | None = None) -> dict[str, list[float]]:
    """C2's numbers of one min-max run: per round r, V_tau of each held-out context (`v_tau@r`);
    per round, max(V_tau - E_p0[J]) over the held-out contexts (`gap`), the mean V_tau of the
    training contexts (`v_tau_train`) and normal traffic's mean J (`normal_J`); the final defender
    (`theta_final`)."""
    run = run or C2Run()
    rounds, attacker_rounds, seed, attacker_kind = run.rounds, run.attacker_rounds, run.seed, run.attacker_kind
    config = run.config or AttackerConfig()
    reference = toy_reference()
    log_p0 = reference.joint_log_probs()
    train, test = list(run.train_seeds), list(run.test_seeds)
    contexts = {s: toy_sim.context(s) for s in train}
    attacker = Adv0Attacker(reference, config)
    rng = np.random.default_rng(seed)
    space = all_scenarios()
    theta = IdmParams()
    out: dict[str, list[float]] = {"gap": [], "v_tau_train": []}
    thetas = [theta]
    for r in range(rounds + 1):
        J_test, _ = _exact(toy.evaluate(test, space, theta), reference, config.tau)
        v_test = soft_value(J_test, log_p0, config.tau)
        out[f"v_tau@{r}"] = [float(v) for v in v_test]
        out["gap"].append(float(np.max(v_test - np.exp(log_p0) @ J_test.T)))
        table = toy.evaluate(train, space, theta)
        J_train, _ = _exact(table, reference, config.tau)
        out["v_tau_train"].append(float(soft_value(J_train, log_p0, config.tau).mean()))
        if r == rounds:
            break
        if attacker_kind == "exact":
            _, log_qstar = _exact(table, reference, config.tau)
            draws = np.stack(
                [space[rng.choice(len(space), size=C2_DRAWS, p=np.exp(lq) / np.exp(lq).sum())] for lq in log_qstar]
            )
        else:
            rollout = table_rollout(table, train)
            for _ in range(attacker_rounds):
                iterate(attacker, train, contexts, rollout, rng)
            draws = np.stack([attacker.policy.sample(contexts[s], rng, C2_DRAWS) for s in train])
        jobs = [(ScenarioParams.from_index(tuple(int(x) for x in z)), s) for s, zs in zip(train, draws) for z in zs]
        theta, _ = tune_cem(
            toy.population_scores,
            jobs,
            theta,
            C2_CEM_GENERATIONS,
            C2_CEM_POPULATION,
            0.25,
            seed=seed + r,
            init_sigma=0.2,
            batched=True,
        )
        thetas.append(theta)
    out["normal_J"] = [float(toy.evaluate(test, None, th).J.mean()) for th in thetas]
    out["theta_final"] = [float(x) for x in thetas[-1].vector()]
    return out


def judge_c2(
    runs: Sequence[dict[str, list[float]]],
    rounds: int = C2_ROUNDS,
    attacker_kind: str = "adv0",
    config: AttackerConfig | None = None,
    wall_s: float = 0.0,
) -> ToyCheck:
    """C2's verdict from the numbers of one or more min-max runs (`c2_values`; several: their held-out
    contexts pooled, the per-round figures averaged over the runs)."""
    config = config or AttackerConfig()
    first = np.concatenate([np.asarray(v["v_tau@0"], dtype=float) for v in runs])
    last = np.concatenate([np.asarray(v[f"v_tau@{rounds}"], dtype=float) for v in runs])
    rise = last - first
    gap_max = max(max(v["gap"]) for v in runs)

    def per_round(name: str) -> list[float]:
        means: list[float] = np.mean([v[name] for v in runs], axis=0).tolist()
        return means

    n = int(first.size)
    bound = judged(
        "max over contexts and defenders of V_tau - E_p0[J] (exact)",
        gap_max,
        gap_max,
        gap_max,
        op="<=",
        threshold=C2_BOUND_TOL,
        method="exact value (by enumeration)",
        n="every context, every round",
        size=n,
        metric="max V_tau - E_p0[J] over contexts and rounds",
        arm="adv0",
        unit="contexts",
        note="the interval is the exact value (no sampling); the threshold is 0 up to float rounding",
    )
    rise_part = mean_above(
        "mean rise of V_tau on held-out contexts after min-max training",
        rise,
        0.0,
        metric="V_tau(final) - V_tau(start), held-out contexts",
        arm="adv0",
        unit="held-out contexts",
    )
    v_rounds = [float(np.mean(np.concatenate([v[f"v_tau@{r}"] for v in runs]))) for r in range(rounds + 1)]
    return ToyCheck(
        name="C2",
        claim="V_tau <= E_p0[J] and min-max training (attacker DPO, defender CEM) raises V_tau",
        criterion=(
            f"max(V_tau - E_p0[J]) <= 0 on every context and defender, and the 95% Student-t CI of the mean rise of V_tau "
            f"over {n} held-out contexts after {rounds} rounds entirely above 0"
        ),
        numbers={
            "v_tau_per_round": v_rounds,
            "v_tau_train_per_round": per_round("v_tau_train"),
            "v_minus_ep0j_max": gap_max,
            "rise": mean_metric(rise, LEVEL),
            "normal_traffic_J_per_round": per_round("normal_J"),
            "theta_final": runs[0]["theta_final"],
        },
        parts=[bound, rise_part],
        wall_s=wall_s,
        note=f"attacker={attacker_kind}, tau={config.tau}; IdmParams fields {list(IdmParams.model_fields)}",
    )


def check_c2(run: C2Run | None = None) -> ToyCheck:
    run = run or C2Run()
    t0 = time.perf_counter()
    values = c2_values(run)
    return judge_c2([values], run.rounds, run.attacker_kind, run.config, wall_s=time.perf_counter() - t0)
