"""Is the trained closed-loop attacker a better attacker than the untrained one? (issue 41: an effective
closed-loop attack)

`attack_gain` isolates the attacker's learning from the min-max loop: the defender is held FIXED (the
IDM/MOBIL planner with the given parameters, by default the untrained defender, or with `--defender
dqn` a learned DQN checkpoint: `closed_loop_defender.py`), the attacker trains
by `closed_loop_dpo.ClosedLoopAdv0` for `rounds` x `contexts` groups of K policy + reference
trajectories against it, and then the reference policy (the untrained attacker) and the trained
policy play the same held-out seeds with the same attacker generator seeds. The outcome is the
defender-failure rate (`EpisodeResult.defender_failure`: crashes the defender is at fault for, or
shares) of each, Wilson intervals, and the paired difference by Newcombe's method for paired
proportions (the same seeds: `harness.stats.newcombe_paired_difference`).

Size: 200 episodes per arm by default. Against the untrained defender the reference policy fails it
rarely (0-1 in 15 in the probes; ~2% for the one-shot attackers in C3); a two-sided test at alpha
0.05 has power ~0.8 to see a rise from 3% to 10% with ~190 per arm (the unpaired normal
approximation; pairing on seeds only narrows it), so 200 separates a 7-point gain and says nothing
about a gain of 1-2 points.

`python -m environments.adv0.checks.closed_loop_eval --rounds 4 --contexts 8 --k 16 --episodes 200 --workers 2`
prints the table row and writes the report (and the trained policy) as JSON with `--out`. The
recipe's options (`--lr`, `--tau`, `--kl-max`, `--dpo-steps`, `--loss-norm`, `--sample-temperature`,
`--hand-draws`, `--hand-policy`, `--hand-pairs`, `--features`) are `ClosedLoopConfig`'s, with its defaults. `--episodes 0` trains
only (every round's rollout defender-failure share is printed as it ends: the quick screen) and
writes the trained policy to `--out`; `--policy FILE` then evaluates that file's policy against its
own reference on the held-out seeds without training again (the training's rounds and CPU time are
carried over). `--hand-eval cut-in steer-brake` trains nothing: it plays the reference and the named
hand policies on `--episodes` seeds from `--first-seed` (default the held-out 900000; development
looks use 700000-) against the fixed defender, and prints each one's row and its paired difference
from the reference (`hand_eval`).

May import: numpy, pydantic, `harness.stats`, `harness.errors`, `environments.adv0` (closed_loop_defender,
closed_loop, hand_policies, closed_loop_dpo, scenario).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import BaseModel, Field

from environments.adv0.checks.closed_loop_defender import (
    DqnCheckpoint, FixedDefender, Runner, defender_name, dqn_checkpoint,
)
from environments.adv0.sim.closed_loop import (
    FEATURE_SETS, ClosedLoopDraw, ClosedLoopLimits, ClosedLoopPolicy, PolicyState,
)
from environments.adv0.sim.hand_policies import HAND_POLICIES, hand_policy
from environments.adv0.sim.scenario import EpisodeResult, IdmParams, failures_by_party, party_text
from environments.adv0.train.closed_loop_dpo import ClosedLoopAdv0, ClosedLoopConfig, ClosedLoopRoundReport
from harness.errors import HarnessError
from harness.stats import newcombe_paired_difference, wilson_interval

EVAL_SEED0 = 900_000  # held-out evaluation seeds start here; training seeds are below 100 * 100_000
ATTACKER_STREAM = 0xE7A1  # the attacker's generator on an evaluation seed: the same for both arms
# a report's defender: a DQN checkpoint, else the planner (a file saved before the DQN holds IdmParams)
Defended = Annotated[DqnCheckpoint | IdmParams, Field(union_mode="left_to_right")]

def train(
    run: Runner,
    cfg: ClosedLoopConfig,
    rounds: int,
    contexts: int,
    seed: int = 0,
    limits: ClosedLoopLimits | None = None,
    progress: bool = False,
) -> tuple[ClosedLoopAdv0, list[ClosedLoopRoundReport]]:
    """`rounds` of preference learning against the fixed defender `run` plays: each round `contexts`
    fresh training seeds, a group of K policy + reference draws on each."""
    attacker = ClosedLoopAdv0(cfg, limits)
    reports = []
    for r in range(rounds):
        rng = np.random.default_rng([seed, r, 0xA7])
        seeds = [seed * 100_000 + r * 1_000 + c for c in range(contexts)]
        jobs = [(d, s) for s in seeds for d in attacker.propose(np.zeros(0), rng)]
        reports.append(attacker.update(run(jobs)))
        if progress:
            print(round_line(reports[-1]), flush=True)
    return attacker, reports


def round_line(r: ClosedLoopRoundReport) -> str:
    by_draw = "".join(
        f" {kind} {f}/{n} ({party_text(r.parties_by_draw.get(kind, {}), f)})"
        for kind, (f, n) in sorted(r.failures_by_draw.items())
    )
    return (
        f"round {r.round}: pairs {r.pairs}, defender-failure share {r.defender_failure_share or 0.0:.3f}"
        + (f" (by draw:{by_draw})" if by_draw else "")
        + f", attacker-at-fault share {r.infeasible_share:.3f}, mean u {r.mean_utility:+.3f}, "
        f"KL {r.dpo.kl if r.dpo else float('nan'):.2f}, steps {r.dpo.steps if r.dpo else 0}"
    )


class Arm(BaseModel):
    name: str
    episodes: int
    defender_failures: int
    # those by the other vehicle of the contact; a row saved before it has none: all "unknown"
    by_party: dict[str, int] = Field(default_factory=dict)
    rate: float
    low: float
    high: float
    crashes: int
    attacker_fault: int
    near_misses: int
    mean_J: float


def arm(name: str, results: list[EpisodeResult]) -> Arm:
    k, n = sum(r.defender_failure for r in results), len(results)
    lo, hi = wilson_interval(k, n)
    return Arm(
        name=name,
        episodes=n,
        defender_failures=k,
        by_party=failures_by_party(results),
        rate=k / n,
        low=lo,
        high=hi,
        crashes=sum(r.crashed for r in results),
        attacker_fault=sum(r.crashed and r.collision is not None and r.collision.fault == "attacker" for r in results),
        near_misses=sum(r.near_miss for r in results),
        mean_J=float(np.mean([r.reward for r in results])),
    )


class GainReport(BaseModel):
    family: str
    defender: Defended
    config: ClosedLoopConfig
    rounds: int
    contexts: int
    untrained: Arm
    trained: Arm
    difference: float  # trained - untrained defender-failure rate, paired on seeds
    low: float
    high: float
    rounds_report: list[ClosedLoopRoundReport]
    train_cpu_s: float
    eval_cpu_s: float
    wall_s: float
    policy: PolicyState
    trained_in: str | None = None  # the training run's file when the policy came from `--policy`


class Training(BaseModel):
    """A training run on its own (`--episodes 0`): what `--policy FILE` evaluates later."""

    family: str
    defender: Defended
    config: ClosedLoopConfig
    rounds: int
    contexts: int
    rounds_report: list[ClosedLoopRoundReport]
    train_cpu_s: float
    wall_s: float
    policy: PolicyState


def evaluate(
    run: Runner,
    policies: dict[str, ClosedLoopPolicy],
    episodes: int,
    limits: ClosedLoopLimits,
    slot: int,
    first_seed: int = EVAL_SEED0,
) -> dict[str, list[EpisodeResult]]:
    seeds = [first_seed + i for i in range(episodes)]
    return {
        name: run([(ClosedLoopDraw(p, limits, slot, (s, ATTACKER_STREAM)), s) for s in seeds])
        for name, p in policies.items()
    }


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def attack_gain(
    cfg: ClosedLoopConfig,
    rounds: int,
    contexts: int,
    episodes: int,
    workers: int = 2,
    family: str = "highway",
    defender: FixedDefender | None = None,
    seed: int = 0,
    progress: bool = False,
    training: Training | None = None,
    trained_in: str | None = None,
) -> GainReport:
    """Train against the fixed defender (or take `training`'s policy, trained earlier against the same
    defender), then the untrained and trained attackers on the same seeds. CPU-seconds count the
    worker processes once they have exited (`os.times`' children): the pool is shut down before the
    evaluation's total is read."""
    params = defender or IdmParams()
    limits = ClosedLoopLimits()
    t0, c0 = time.perf_counter(), _cpu()
    if training is None:
        training = train_only(cfg, rounds, contexts, workers, family, params, seed, progress)
    elif training.defender != params or training.family != family:
        raise ValueError(
            f"closed-loop attack gain: {trained_in} was trained against {training.family}/"
            f"{defender_name(training.defender)}, not {family}/{defender_name(params)}: give the same "
            f"--defender (and --dqn-checkpoint) it was trained with"
        )
    c1 = _cpu()
    policy = ClosedLoopPolicy.from_state(training.policy)
    reference = ClosedLoopPolicy.reference(policy.k, feature_set=policy.feature_set)  # the learner's p0
    run = Runner(family, params, workers)
    res = evaluate(run, {"untrained": reference, "trained": policy}, episodes, limits, training.config.slot)
    run.close()
    c2 = _cpu()
    untrained, trained, (d, lo, hi) = compare(res["untrained"], res["trained"])
    return GainReport(
        family=family,
        defender=params,
        config=training.config,
        rounds=training.rounds,
        contexts=training.contexts,
        untrained=untrained,
        trained=trained,
        difference=d,
        low=lo,
        high=hi,
        rounds_report=training.rounds_report,
        train_cpu_s=training.train_cpu_s if trained_in else round(c1 - c0, 1),
        eval_cpu_s=round(c2 - c1, 1),
        wall_s=round(time.perf_counter() - t0, 1),
        policy=training.policy,
        trained_in=trained_in,
    )


def train_only(
    cfg: ClosedLoopConfig,
    rounds: int,
    contexts: int,
    workers: int = 2,
    family: str = "highway",
    defender: FixedDefender | None = None,
    seed: int = 0,
    progress: bool = False,
) -> Training:
    params = defender or IdmParams()
    t0, c0 = time.perf_counter(), _cpu()
    run = Runner(family, params, workers)
    attacker, reports = train(run, cfg, rounds, contexts, seed, ClosedLoopLimits(), progress)
    run.close()
    return Training(
        family=family,
        defender=params,
        config=cfg,
        rounds=rounds,
        contexts=contexts,
        rounds_report=reports,
        train_cpu_s=round(_cpu() - c0, 1),
        wall_s=round(time.perf_counter() - t0, 1),
        policy=attacker.policy.to_state(),
    )


def load_training(path: Path) -> Training:
    """A `--episodes 0` run's file, or a full report's (both hold the policy and how it was trained)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--policy {path}: not a readable JSON file ({exc})") from exc
    try:
        return Training.model_validate({key: data.get(key) for key in Training.model_fields})
    except ValueError as exc:
        raise ValueError(f"--policy {path}: not the --out file of a closed_loop_eval run ({exc})") from exc


def paired_difference(base: list[EpisodeResult], other: list[EpisodeResult]) -> tuple[float, float, float]:
    """other - base defender-failure rate and its 95% interval, paired episode by episode (same seeds)."""
    if [r.seed for r in base] != [r.seed for r in other]:
        raise ValueError("closed-loop attack gain: the two arms must play the same seeds in the same order")
    a = [r.defender_failure for r in other]
    b = [r.defender_failure for r in base]
    both = sum(x and y for x, y in zip(a, b))
    first = sum(x and not y for x, y in zip(a, b))
    second = sum(y and not x for x, y in zip(a, b))
    return newcombe_paired_difference(both, first, second, len(a) - both - first - second)


def compare(
    untrained: list[EpisodeResult], trained: list[EpisodeResult]
) -> tuple[Arm, Arm, tuple[float, float, float]]:
    """Both arms and trained - untrained defender-failure rate, paired episode by episode (same seeds)."""
    diff = paired_difference(untrained, trained)
    return arm("untrained", untrained), arm("trained", trained), diff


class Crash(BaseModel):
    """One crash of a hand-policy comparison, enough to pick episodes to replay."""

    policy: str
    seed: int
    t: float
    other: str
    fault: str
    rule: str
    min_ttc: float


class HandEval(BaseModel):
    """`hand_eval`'s report: each policy's arm and its paired difference from the reference."""

    family: str
    defender: Defended
    slot: int
    first_seed: int
    arms: list[Arm]
    differences: dict[str, tuple[float, float, float]]  # policy - reference, paired on seeds
    crashes: list[Crash]
    cpu_s: float
    wall_s: float


def hand_eval(
    names: list[str],
    episodes: int,
    slot: int,
    defender: FixedDefender | None = None,
    workers: int = 2,
    family: str = "highway",
    first_seed: int = EVAL_SEED0,
) -> HandEval:
    """The reference and the named hand policies (none trained) against the fixed defender on the same
    seeds with the same attacker generator seeds, on the "gaps" features (the cut-in policy reads
    them; the reference and steer-brake draw the same actions on either feature set)."""
    params = defender or IdmParams()
    t0, c0 = time.perf_counter(), _cpu()
    policies = {"reference": ClosedLoopPolicy.reference(feature_set="gaps")}
    policies |= {name: hand_policy(name, feature_set="gaps") for name in names}
    run = Runner(family, params, workers)
    res = evaluate(run, policies, episodes, ClosedLoopLimits(), slot, first_seed)
    run.close()
    crashes = [
        Crash(policy=name, seed=r.seed, t=r.collision.t, other=r.collision.other, fault=r.collision.fault,
              rule=r.collision.rule, min_ttc=r.min_ttc)
        for name, results in res.items() for r in results if r.crashed and r.collision is not None
    ]
    return HandEval(
        family=family,
        defender=params,
        slot=slot,
        first_seed=first_seed,
        arms=[arm(name, results) for name, results in res.items()],
        differences={name: paired_difference(res["reference"], res[name]) for name in names},
        crashes=crashes,
        cpu_s=round(_cpu() - c0, 1),
        wall_s=round(time.perf_counter() - t0, 1),
    )


def hand_rows(rep: HandEval) -> str:
    """The comparison as table rows: slot, policy, its arm, its paired difference from the reference."""
    lines = []
    for x in rep.arms:
        d, lo, hi = rep.differences.get(x.name, (0.0, 0.0, 0.0))
        diff = "" if x.name == "reference" else f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        lines.append(f"| {rep.slot} | {x.name} | {arm_text(x)} | {diff} |")
    seeds = f"seeds {rep.first_seed}-{rep.first_seed + rep.arms[0].episodes - 1}"
    return "\n".join(lines) + (
        f"\n{defender_name(rep.defender)}, {rep.family}, {seeds}: wall {rep.wall_s:.0f} s, {rep.cpu_s:.0f} CPU-s"
    )


def arm_text(x: Arm) -> str:
    """An arm's cell of the gain table: its defender-failure rate, the failures by the other vehicle."""
    return (
        f"{x.defender_failures}/{x.episodes} = {x.rate:.3f} [{x.low:.3f}, {x.high:.3f}] "
        f"({party_text(x.by_party, x.defender_failures)}; crashes {x.crashes}, attacker-at-fault {x.attacker_fault}, "
        f"near misses {x.near_misses}, J {x.mean_J:.3f})"
    )


def row(rep: GainReport) -> str:
    cfg = rep.config  # rows before the hand draws had none; before session 28 every hand policy was steer-brake
    hand = f" + hand {cfg.hand_draws} {cfg.hand_policy}, pairs {cfg.hand_pairs}" if cfg.hand_draws else ""
    dqn = f", defender {defender_name(rep.defender)}" if isinstance(rep.defender, DqnCheckpoint) else ""
    return (
        f"| {rep.rounds} x {rep.contexts} x (K {rep.config.k} + {rep.config.reference_draws}{hand}), "
        f"lr {rep.config.lr}, "
        f"loss {rep.config.loss_norm}, T {rep.config.sample_temperature}, features {rep.config.features}, "
        f"slot {rep.config.slot}{dqn} | {arm_text(rep.untrained)} | {arm_text(rep.trained)} | "
        f"{rep.difference:+.3f} [{rep.low:+.3f}, {rep.high:+.3f}] | {rep.wall_s:.0f} s "
        f"({rep.train_cpu_s:.0f} + {rep.eval_cpu_s:.0f} CPU-s) |"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--contexts", type=int, default=8)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--lr", type=float, default=None, help="default: ClosedLoopConfig's")
    ap.add_argument("--dpo-steps", type=int, default=None)
    ap.add_argument("--tau", type=float, default=None, help="DPO's beta; default: ClosedLoopConfig's")
    ap.add_argument("--kl-max", type=float, default=None, help="default: ClosedLoopConfig's")
    ap.add_argument("--loss-norm", choices=["pairs", "groups"], default=None, help="default: ClosedLoopConfig's")
    ap.add_argument("--sample-temperature", type=float, default=None, help="default: ClosedLoopConfig's (1)")
    ap.add_argument("--hand-draws", type=int, default=None, help="default: ClosedLoopConfig's (0)")
    ap.add_argument("--hand-policy", choices=list(HAND_POLICIES), default=None, help="default: ClosedLoopConfig's")
    ap.add_argument("--hand-pairs", choices=["mixed", "apart"], default=None, help="default: ClosedLoopConfig's")
    ap.add_argument("--features", choices=list(FEATURE_SETS), default=None, help="default: ClosedLoopConfig's")
    ap.add_argument("--slot", type=int, default=0)
    ap.add_argument("--episodes", type=int, default=200, help="evaluation episodes per arm (0: train only)")
    ap.add_argument(
        "--policy",
        type=Path,
        default=None,
        help="evaluate the policy of an earlier run's --out file instead of training",
    )
    ap.add_argument("--defender", choices=["idm", "dqn"], default="idm", help="the fixed defender (idm: default IdmParams)")
    ap.add_argument(
        "--dqn-checkpoint",
        type=Path,
        default=None,
        help="with --defender dqn: the DQN's file (default: `harness adv0 pretrain-dqn`'s cached 20k-step one)",
    )
    ap.add_argument(
        "--hand-eval",
        nargs="+",
        choices=list(HAND_POLICIES),
        default=None,
        help="no training: the reference and these hand policies on the evaluation seeds",
    )
    ap.add_argument("--first-seed", type=int, default=EVAL_SEED0, help="--hand-eval's first seed (held out: 900000)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if min(args.rounds, args.contexts, args.k, args.workers) < 1 or args.episodes < 0:
        ap.error("--rounds, --contexts, --k and --workers must be at least 1, --episodes at least 0")
    if args.episodes == 0 and args.policy is not None:
        ap.error("--episodes 0 trains only; --policy evaluates only: give one of them")
    options = (
        "lr", "dpo_steps", "tau", "kl_max", "loss_norm", "sample_temperature", "hand_draws", "hand_policy",
        "hand_pairs", "features",
    )
    if args.dqn_checkpoint is not None and args.defender != "dqn":
        ap.error("--dqn-checkpoint names the DQN defender: give --defender dqn with it")
    defender: FixedDefender = IdmParams()
    if args.defender == "dqn":
        try:
            defender = dqn_checkpoint(args.dqn_checkpoint)
        except HarnessError as exc:
            ap.error(str(exc))
    if args.hand_eval is not None:
        if args.episodes < 1:
            ap.error("--hand-eval plays --episodes per policy: give at least 1")
        hands = hand_eval(args.hand_eval, args.episodes, args.slot, defender, args.workers, first_seed=args.first_seed)
        print(hand_rows(hands))
        if args.out is not None:
            args.out.write_text(json.dumps(hands.model_dump(), indent=1), encoding="utf-8")
        return
    extra = {key: getattr(args, key) for key in options if getattr(args, key) is not None}
    try:
        cfg = ClosedLoopConfig(k=args.k, slot=args.slot, seed=args.seed, **extra)
    except ValueError as exc:  # e.g. --hand-policy cut-in without --features gaps: say which, not a traceback
        ap.error(str(exc))
    if args.episodes == 0:
        training = train_only(cfg, args.rounds, args.contexts, args.workers, defender=defender, seed=args.seed,
                              progress=True)
        print(f"trained: wall {training.wall_s:.0f} s, {training.train_cpu_s:.0f} CPU-s")
        if args.out is not None:
            args.out.write_text(json.dumps(training.model_dump(), indent=1), encoding="utf-8")
        return
    try:
        earlier = load_training(args.policy) if args.policy is not None else None
    except ValueError as exc:
        ap.error(str(exc))
    rep = attack_gain(
        cfg,
        args.rounds,
        args.contexts,
        args.episodes,
        args.workers,
        defender=defender,
        seed=args.seed,
        progress=True,
        training=earlier,
        trained_in=args.policy.name if args.policy is not None else None,
    )
    print(row(rep))
    if args.out is not None:
        args.out.write_text(json.dumps(rep.model_dump(), indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
