"""Iterative preference learning on the closed-loop attacker's trajectories (issue 41, item 2).

Each round (`ClosedLoopAdv0`, one option of the min-max loop: `harness adv0 train --attacker
closed_loop`): per training context, K trajectories of the current policy plus reference draws are
rolled out against the current defender on the context's one seed (`propose`); each is ranked by
the aligned utility -- the defender's own return, fault-gated, with the annealed near-miss bonus
(`attacker.utility`, the one-shot attacker's) -- and pairs are built inside each group as the
one-shot attacker builds them (`dpo.build_pairs`: an attacker-at-fault crash loses to every other
trajectory; feasible pairs get the soft target sigma(u_w - u_l)). Then DPO on whole trajectories
(`trajectory_dpo`): a trajectory's log-probability is the sum of its decisions' exact
log-probabilities, and the environment's and the defender's transition probabilities are the same
under the policy and the reference, so they cancel in the log-ratio log q(tau) - log p0(tau): the
ratio needs only the attacker's own decisions (recorded in `AttackerTrajectory`). The KL to the
reference is measured every step and bounded (a step-size backtrack, then a stop); the next round
samples from the updated policy.

- The KL bound: KL(q || p0) over trajectories is E_q[sum_t KL(q(.|s_t) || p0(.|s_t))] (the
  transition terms cancel again); it is estimated on the states the round's policy draws visited,
  with each state's KL exact. A step that takes the estimate past `kl_max` is halved up to
  `backtracks` times; if it still exceeds the bound the step is dropped and the round stops. The
  states are the pre-update policy's: the estimate ignores how the update moves the state
  distribution (the toy game's exact check measures the true trajectory KL, `toy_game.py`).
- What DPO's fixed point is here: with soft targets and beta = tau the trajectory-level target is
  q(tau) ~ p0(tau) exp(u(tau)/tau). When the attacker's actions decide the trajectory (a
  deterministic defender and world given the seed: highway-env here) that is the soft-optimal
  attacker. Where the defender's moves are random, no policy realises it in general (the attacker
  cannot choose the defender's luck), and the regularised optimum is the soft Bellman policy
  instead; `toy_game.py` computes both exactly and shows where they part.

- Recipe options (session 25; the defaults are session 22's recipe): `loss_norm` "groups" sums each
  group's mean pair loss over the groups instead of averaging over all pairs (a group that holds a
  defender-at-fault failure weighs as much as one of near-ties however many pairs each has, and the
  step no longer shrinks as K grows: a group of 17 has 136 pairs); `sample_temperature` T draws the
  policy's trajectories from pi^(1/T) (`ClosedLoopPolicy.tempered`: DPO needs pairs, not on-policy
  ones; the KL estimate then reads the tempered policy's states); `features` "gaps" gives the
  policy `closed_loop.gap_features`. `hand_draws` (session 27) adds that many draws of
  a hand policy (`hand_policies.py`) to each group, a behaviour policy that reaches the "cut in, then brake"
  band: off-policy like the reference draws (they join the pairs, not the KL estimate; their
  log-probabilities under q and p0 are exact all the same). Session 28: `hand_policy` picks which
  (`hand_policies.HAND_POLICIES`: "steer-brake", the session-27 one and the default, or "cut-in",
  which cuts in only at a safe gap and then brakes: it needs `features` "gaps"), and `hand_pairs`
  "apart" pairs the hand draws only with each other and the learner's and reference draws only
  with each other (each part a group of its own for `loss_norm` "groups"), so the hand draws'
  self-inflicted crashes do not outrank a group's own draws, and what the pairs say about the hand
  draws is which of them the utility prefers.

May import: numpy, pydantic, `environments.adv0.sim` (scenario, closed_loop, hand_policies), `environments.adv0.train` (dpo, attacker).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from environments.adv0.sim.closed_loop import (
    ACTIONS,
    HAND_TRAJECTORY,
    OFF_POLICY_TRAJECTORIES,
    REFERENCE_TRAJECTORY,
    FeatureSet,
    ClosedLoopDraw,
    ClosedLoopLimits,
    ClosedLoopPolicy,
    _batch_log_softmax,
    step_kl,
)
from environments.adv0.sim.hand_policies import HandPolicy, hand_policy
from environments.adv0.sim.scenario import AttackerTrajectory, EpisodeResult
from environments.adv0.train.attacker import utility
from environments.adv0.train.dpo import Pairs, build_pairs, concat_pairs, preference_loss


class ClosedLoopConfig(BaseModel):
    """Training knobs of the closed-loop attacker (the one-shot attacker's, where they mean the same)."""

    tau: float = Field(0.1, gt=0, description="temperature of the target q ~ p0 exp(u/tau); DPO's beta")
    k: int = Field(8, ge=1, description="policy trajectories per context and round")
    reference_draws: int = Field(1, ge=0, description="reference trajectories added to each group")
    hand_draws: int = Field(0, ge=0, description="hand-policy trajectories added to each group (off-policy)")
    hand_policy: HandPolicy = Field(
        "steer-brake", description="which hand policy the hand draws come from (hand_policies.HAND_POLICIES)"
    )
    hand_pairs: Literal["mixed", "apart"] = Field(
        "mixed",
        description="'mixed': hand draws pair with every draw of their group; 'apart': only with each other",
    )
    labels: Literal["soft", "hard"] = "soft"
    margin: float = Field(0.0, ge=0, description="feasible pairs need a utility gap of at least this")
    kl_max: float = Field(6.0, gt=0, description="bound on the trajectory KL(q || p0) estimate, nats")
    dpo_steps: int = Field(20, ge=1, description="gradient steps per round")
    lr: float = Field(1.0, gt=0, description="step size on the DPO loss")
    loss_norm: Literal["pairs", "groups"] = Field(
        "pairs", description="'pairs': the mean over all pairs; 'groups': each group's mean, summed over the groups"
    )
    sample_temperature: float = Field(1.0, gt=0, description="the policy's draws come from pi^(1/T) (T > 1 explores)")
    features: FeatureSet = Field("base", description="the policy's feature set (closed_loop.FEATURE_SETS)")
    backtracks: int = Field(4, ge=0, description="halvings of a step that crosses the KL bound before the round stops")
    shaping: float = Field(0.3, ge=0, description="near-miss bonus weight in round 0")
    shaping_decay: float = Field(0.8, ge=0, le=1, description="the bonus weight's factor per round")
    use_reference: bool = True  # False: reference-free DPO and no KL bound
    fault_gate: bool = True  # False: attacker-at-fault crashes count as successes
    freeze_after: int | None = Field(None, ge=1, description="stop learning after this many rounds")
    slot: int = Field(0, ge=0, description="the vehicle taken over: this rank by distance to the ego at t0")
    seed: int = 0

    @model_validator(mode="after")
    def _hand_policy_fits(self) -> "ClosedLoopConfig":
        if self.hand_policy == "cut-in" and self.features != "gaps":
            raise ValueError(
                f"closed-loop config: hand_policy='cut-in' reads the 'gaps' features, but features={self.features!r} "
                "(set features='gaps', or hand_policy='steer-brake')"
            )
        return self


# ---------------------------------------------------------------- a round's trajectories as steps
class StepBatch:
    """A round's trajectories flattened to their decisions, so the log-probabilities, gradients and
    KL of any policy of the same shape are a few matrix products."""

    def __init__(self, trajectories: Sequence[AttackerTrajectory]):
        rows = [
            (i, f, m, ACTIONS.index(a))
            for i, tr in enumerate(trajectories)
            for f, m, a in zip(tr.features, tr.feasible, tr.actions)
        ]
        self.n = len(trajectories)
        self.owner = np.array([r[0] for r in rows], dtype=np.int64)
        width = len(rows[0][1]) if rows else 0
        self.phi = np.array([r[1] for r in rows], dtype=float).reshape(len(rows), width)
        self.mask = np.array([r[2] for r in rows], dtype=bool).reshape(len(rows), len(ACTIONS))
        self.action = np.array([r[3] for r in rows], dtype=np.int64)

    def _log_pi(self, policy: ClosedLoopPolicy) -> np.ndarray:
        return _batch_log_softmax(self.phi @ policy.weights.T + policy.bias, self.mask)

    def log_probs(self, policy: ClosedLoopPolicy) -> np.ndarray:
        """log pi(trajectory) for every trajectory (the sum of its decisions')."""
        if not len(self.owner):
            return np.zeros(self.n)
        step = self._log_pi(policy)[np.arange(len(self.owner)), self.action]
        return np.bincount(self.owner, weights=step, minlength=self.n)

    def grad(self, policy: ClosedLoopPolicy, coef: np.ndarray) -> np.ndarray:
        """d/d theta of sum_i coef_i log pi(trajectory_i): per decision (onehot - pi) outer phi."""
        if not len(self.owner):
            return np.zeros_like(policy.theta)
        delta = -np.exp(self._log_pi(policy))
        delta[np.arange(len(self.owner)), self.action] += 1.0
        delta *= np.asarray(coef, dtype=float)[self.owner][:, None]
        return np.concatenate([(delta.T @ self.phi).ravel(), delta.sum(axis=0)])

    def kl(self, q: ClosedLoopPolicy, p: ClosedLoopPolicy, which: np.ndarray | None = None) -> float:
        """Mean over the chosen trajectories of sum_t KL(q(.|s_t) || p(.|s_t)) at their recorded states."""
        chosen = np.ones(self.n, dtype=bool) if which is None else np.asarray(which, dtype=bool)
        if not chosen.any():
            return 0.0
        if not len(self.owner):
            return 0.0
        per_step = step_kl(q, p, self.phi, self.mask)
        per_traj = np.bincount(self.owner, weights=per_step, minlength=self.n)
        return float(per_traj[chosen].mean())


# ---------------------------------------------------------------- pairs and the update
def trajectory_pairs(
    groups: Sequence[tuple[Sequence[AttackerTrajectory], np.ndarray]],
    margin: float = 0.0,
    labels: Literal["soft", "hard"] = "soft",
    hand_apart: bool = False,
) -> Pairs:
    """Pairs inside each group (trajectories on one shared seed, with their utilities; -inf where the
    fault gate voids a trajectory), by `dpo.build_pairs`. `win`/`lose` index the groups' trajectories
    concatenated. Trajectories with the same actions on the same seed are the same trajectory (the
    world and the defender are deterministic given the seed), so they make no pair. `hand_apart`:
    a group's hand draws (`HAND_TRAJECTORY`) pair only with each other and its other draws only with
    each other; each part is a group of its own in `Pairs.ctx` (which `pair_weights` reads)."""
    parts, offset, ctx = [], 0, 0
    for trajectories, u in groups:
        first: dict[tuple[str, ...], int] = {}
        ids = np.array(
            [[offset + first.setdefault(tuple(tr.actions), i)] for i, tr in enumerate(trajectories)], dtype=np.int64
        ).reshape(len(trajectories), 1)
        u = np.asarray(u, dtype=float)
        hand = np.array([tr.policy == HAND_TRAJECTORY for tr in trajectories], dtype=bool)
        for part in [~hand, hand] if hand_apart else [np.ones(len(trajectories), dtype=bool)]:
            if hand_apart and not part.any():
                continue
            parts.append(build_pairs(ids[part], u[part], ctx, margin, labels))
            ctx += 1
        offset += len(trajectories)
    return concat_pairs(parts) if any(len(p) for p in parts) else Pairs.empty(1)


def pair_weights(pairs: Pairs, loss_norm: Literal["pairs", "groups"] = "pairs") -> np.ndarray:
    """Each pair's weight in the loss: 1 / pairs ("pairs": the mean), or 1 / (its group's pairs)
    ("groups": every group's mean pair loss, summed over the groups; `Pairs.ctx` is the group)."""
    if loss_norm == "pairs":
        return np.full(len(pairs), 1 / max(len(pairs), 1))
    if loss_norm == "groups":
        counts = np.bincount(pairs.ctx)
        weights: np.ndarray = 1 / counts[pairs.ctx]
        return weights
    raise ValueError(f"closed-loop DPO: loss_norm={loss_norm!r} is not 'pairs' or 'groups'")


class TrajectoryDpoReport(BaseModel):
    steps: int
    loss_start: float
    loss_end: float
    kl: float  # the trajectory KL(q || p0) estimate after the round (nats)
    kl_stopped: bool  # the KL bound ended the round early
    backtracks: int  # step halvings the bound asked for


def trajectory_dpo(
    policy: ClosedLoopPolicy,
    reference: ClosedLoopPolicy,
    batch: StepBatch,
    pairs: Pairs,
    beta: float,
    steps: int = 20,
    lr: float = 1.0,
    kl_max: float = float("inf"),
    on_policy: np.ndarray | None = None,
    backtracks: int = 4,
    use_reference: bool = True,
    weights: np.ndarray | None = None,
) -> tuple[ClosedLoopPolicy, TrajectoryDpoReport]:
    """Full-batch gradient steps on the trajectory DPO loss (pairs weighted by `weights`, default the
    mean); returns the new policy (never changed in place) and the report. The KL estimate is taken
    on the `on_policy` trajectories (the learner's own draws; default all)."""
    kl_now = batch.kl(policy, reference, on_policy)
    if len(pairs) == 0:
        return policy, TrajectoryDpoReport(
            steps=0, loss_start=float("nan"), loss_end=float("nan"), kl=kl_now, kl_stopped=False, backtracks=0
        )
    win, lose = pairs.win[:, 0], pairs.lose[:, 0]
    ref_lp = batch.log_probs(reference) if use_reference else np.zeros(batch.n)
    loss0 = loss = float("nan")
    done, halved, stopped = 0, 0, False
    for step in range(1, steps + 1):
        h = batch.log_probs(policy) - ref_lp
        loss, g = preference_loss(h[win] - h[lose], pairs.target, beta, weights)
        if step == 1:
            loss0 = loss
        coef = np.bincount(win, weights=g, minlength=batch.n) - np.bincount(lose, weights=g, minlength=batch.n)
        direction = batch.grad(policy, coef)
        scale, accepted = lr, None
        for _ in range(backtracks + 1):
            candidate = policy.with_theta(policy.theta - scale * direction)
            kl = batch.kl(candidate, reference, on_policy)
            if not np.isfinite(kl_max) or kl <= kl_max:
                accepted, kl_now = candidate, kl
                break
            scale, halved = scale / 2, halved + 1
        if accepted is None:
            stopped = True
            break
        policy, done = accepted, step
    return policy, TrajectoryDpoReport(
        steps=done, loss_start=loss0, loss_end=loss, kl=kl_now, kl_stopped=stopped, backtracks=halved
    )


# ---------------------------------------------------------------- the attacker option
def draw_kind(trajectory_policy: str) -> str:
    """Which behaviour policy drew a trajectory, from its label: `reference`, `hand` or `policy` (the learner)."""
    return {REFERENCE_TRAJECTORY: "reference", HAND_TRAJECTORY: "hand"}.get(trajectory_policy, "policy")


class ClosedLoopRoundReport(BaseModel):
    round: int
    groups: int
    episodes: int
    pairs: int
    infeasible_share: float  # trajectories the fault gate voided (attacker-at-fault crashes)
    mean_utility: float  # over the others
    defender_failure_share: float | None = None  # rollouts the defender failed (at fault or shared); from `update`
    # the same per kind of draw (policy / reference / hand): (defender failures, episodes); from `update`
    failures_by_draw: dict[str, tuple[int, int]] = Field(default_factory=dict)
    # those failures per kind of draw by the other vehicle of the contact (`scenario.failures_by_party`);
    # a report saved before it has none, and its failures read as "unknown"
    parties_by_draw: dict[str, dict[str, int]] = Field(default_factory=dict)
    shaping: float
    dpo: TrajectoryDpoReport | None = None
    frozen: bool = False


class ClosedLoopAdv0:
    """The closed-loop attacker as a learning option of the min-max loop: `propose` a group per
    context (K policy draws + reference draws, one shared seed), `draw` at evaluation, `update` from
    the group's results (`learn` from trajectories and utilities, which the toy game calls too)."""

    name = "closed_loop"

    def __init__(
        self,
        config: ClosedLoopConfig | None = None,
        limits: ClosedLoopLimits | None = None,
        policy: ClosedLoopPolicy | None = None,
        reference: ClosedLoopPolicy | None = None,
    ):
        self.config = config or ClosedLoopConfig()
        self.limits = limits or ClosedLoopLimits()
        self.reference = reference or ClosedLoopPolicy.reference(feature_set=self.config.features)
        self.policy = policy or self.reference  # round 0 is the reference
        self.round = 0
        self.last_kl = 0.0

    @property
    def frozen(self) -> bool:
        return self.config.freeze_after is not None and self.round >= self.config.freeze_after

    def shaping_weight(self) -> float:
        return self.config.shaping * self.config.shaping_decay**self.round

    def _draw(
        self, policy: ClosedLoopPolicy, rng: np.random.Generator, reference: bool, hand: bool = False
    ) -> ClosedLoopDraw:
        seed = (int(rng.integers(2**31 - 1)), 0xC10)
        return ClosedLoopDraw(policy, self.limits, self.config.slot, seed, reference, hand)

    def hand(self) -> ClosedLoopPolicy:
        """The hand policy of `hand_draws` (`hand_policy`), in the learner's shape (its trajectories join one batch)."""
        return hand_policy(self.config.hand_policy, self.reference.k, self.reference.feature_set)

    def behaviour(self) -> ClosedLoopPolicy:
        """The policy a round's groups are drawn from: the learner, tempered by `sample_temperature`."""
        t = self.config.sample_temperature
        return self.policy if t == 1.0 else self.policy.tempered(t)

    def propose(self, context: np.ndarray, rng: np.random.Generator) -> list[ClosedLoopDraw]:
        """K draws of the (tempered) policy plus `reference_draws` of the reference plus `hand_draws`
        of the hand policy: one group, one seed (the context is unused: the policy observes the
        state at every decision)."""
        behaviour, hand = self.behaviour(), self.hand()
        return (  # in this order from `rng`: the policy's and reference's seeds do not depend on hand_draws
            [self._draw(behaviour, rng, False) for _ in range(self.config.k)]
            + [self._draw(self.reference, rng, True) for _ in range(self.config.reference_draws)]
            + [self._draw(hand, rng, False, True) for _ in range(self.config.hand_draws)]
        )

    def draw(self, context: np.ndarray, rng: np.random.Generator, n: int) -> list[ClosedLoopDraw]:
        return [self._draw(self.policy, rng, False) for _ in range(n)]

    def learn(
        self, groups: Sequence[tuple[Sequence[AttackerTrajectory], np.ndarray]], on_policy: np.ndarray | None = None
    ) -> ClosedLoopRoundReport:
        """One round from rolled-out groups (trajectories with their utilities): pairs, DPO, KL bound."""
        cfg = self.config
        u_all = np.concatenate([np.asarray(u, dtype=float) for _, u in groups]) if groups else np.zeros(0)
        report = ClosedLoopRoundReport(
            round=self.round,
            groups=len(groups),
            episodes=len(u_all),
            pairs=0,
            infeasible_share=float(np.mean(np.isinf(u_all))) if len(u_all) else 0.0,
            mean_utility=float(np.mean(u_all[np.isfinite(u_all)])) if np.isfinite(u_all).any() else float("nan"),
            shaping=self.shaping_weight(),
            frozen=self.frozen,
        )
        if self.frozen:
            return report
        pairs = trajectory_pairs(groups, cfg.margin, cfg.labels, cfg.hand_pairs == "apart")
        batch = StepBatch([tr for trajectories, _ in groups for tr in trajectories])
        report.pairs = len(pairs)
        self.policy, report.dpo = trajectory_dpo(
            self.policy,
            self.reference,
            batch,
            pairs,
            cfg.tau,
            cfg.dpo_steps,
            cfg.lr,
            cfg.kl_max if cfg.use_reference else float("inf"),
            on_policy,
            cfg.backtracks,
            cfg.use_reference,
            pair_weights(pairs, cfg.loss_norm),
        )
        self.last_kl = report.dpo.kl
        self.round += 1
        return report

    def update(
        self, results: Sequence[EpisodeResult], contexts: Mapping[int, np.ndarray] | None = None
    ) -> ClosedLoopRoundReport:
        """One round from a loop's rollouts, grouped by their shared seed (the contexts are unused:
        the policy read the state itself). Reference and hand draws (their trajectory says so) join
        the pairs but not the KL estimate, which is over the policy's own trajectories."""
        groups: dict[int, list[EpisodeResult]] = {}
        for r in results:
            if r.attacker_trajectory is not None:
                groups.setdefault(r.seed, []).append(r)
        ordered = [groups[s] for s in sorted(groups)]
        w = self.shaping_weight()
        grouped = [
            (
                [r.attacker_trajectory for r in g if r.attacker_trajectory is not None],
                np.array([utility(r, w, self.config.fault_gate) for r in g]),
            )
            for g in ordered
        ]
        on_policy = np.array(
            [
                r.attacker_trajectory is not None and r.attacker_trajectory.policy not in OFF_POLICY_TRAJECTORIES
                for g in ordered
                for r in g
            ],
            dtype=bool,
        )
        report = self.learn(grouped, on_policy if on_policy.any() else None)
        report.defender_failure_share = float(np.mean([r.defender_failure for g in ordered for r in g]))
        # Split by who drew the trajectory: the share above mixes the learner's own draws with the
        # off-policy ones, and only the learner's say what it has learned.
        for r in (r for g in ordered for r in g):
            kind = draw_kind(r.attacker_trajectory.policy if r.attacker_trajectory else "")
            failures, episodes = report.failures_by_draw.get(kind, (0, 0))
            report.failures_by_draw[kind] = (failures + int(r.defender_failure), episodes + 1)
            if (party := r.failure_party) is not None:
                parties = report.parties_by_draw.setdefault(kind, {})
                parties[party] = parties.get(party, 0) + 1
        return report

    # -- persistence: a policy file of its own (suite adv0's `attacker_state` reads it) plus the rest
    def state(self) -> dict[str, Any]:
        return {
            **self.policy.to_state(),
            "round": self.round,
            "config": self.config.model_dump(),
            "limits": self.limits.model_dump(),
            "reference": self.reference.to_state(),
            "last_kl": self.last_kl,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> ClosedLoopAdv0:
        out = cls(
            ClosedLoopConfig.model_validate(state["config"]),
            ClosedLoopLimits.model_validate(state["limits"]),
            ClosedLoopPolicy.from_state(dict(state)),
            ClosedLoopPolicy.from_state(state["reference"]),
        )
        out.round, out.last_kl = int(state["round"]), float(state.get("last_kl", 0.0))
        return out
