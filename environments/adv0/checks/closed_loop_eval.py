"""Is the trained closed-loop attacker a better attacker than the untrained one? (issue 41: an effective
closed-loop attack)

`attack_gain` isolates the attacker's learning from the min-max loop: the defender is held FIXED (the
IDM/MOBIL planner with the given parameters, by default the untrained defender), the attacker trains
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
carried over).

May import: numpy, pydantic, `harness.stats`, `environments.adv0` (closed_loop, hand_policies, closed_loop_dpo,
highway, loop, planner, scenario).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
import numpy as np
from pydantic import BaseModel, Field

from environments.adv0.sim.closed_loop import (
    FEATURE_SETS, ClosedLoopDraw, ClosedLoopLimits, ClosedLoopPolicy, PolicyState,
)
from environments.adv0.sim.hand_policies import HAND_POLICIES
from environments.adv0.sim.scenario import EpisodeResult, IdmParams, failures_by_party, party_text
from environments.adv0.train.closed_loop_dpo import ClosedLoopAdv0, ClosedLoopConfig, ClosedLoopRoundReport
from harness.stats import newcombe_paired_difference, wilson_interval

EVAL_SEED0 = 900_000  # held-out evaluation seeds start here; training seeds are below 100 * 100_000
ATTACKER_STREAM = 0xE7A1  # the attacker's generator on an evaluation seed: the same for both arms

Job = tuple[str, IdmParams, ClosedLoopDraw, int]  # pickled to a worker process as it is


def _episode(job: Job) -> EpisodeResult:
    from environments.adv0.sim import highway
    from environments.adv0.train.loop import ClosedLoopWorld
    from environments.adv0.train.planner import planner_episode

    family, params, draw, seed = job
    return planner_episode(ClosedLoopWorld(highway), family, params, draw, seed)


class Runner:
    """Planner episodes with closed-loop draws, in job order, over `workers` processes (1: in-process)."""

    def __init__(self, family: str, params: IdmParams, workers: int):
        self.family, self.params, self.workers = family, params, workers
        self._pool = ProcessPoolExecutor(workers) if workers > 1 else None

    def __call__(self, draws: list[tuple[ClosedLoopDraw, int]]) -> list[EpisodeResult]:
        jobs: list[Job] = [(self.family, self.params, d, s) for d, s in draws]
        if self._pool is None:
            return [_episode(j) for j in jobs]
        return list(self._pool.map(_episode, jobs, chunksize=max(1, len(jobs) // (4 * self.workers))))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()


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
    defender: IdmParams
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
    defender: IdmParams
    config: ClosedLoopConfig
    rounds: int
    contexts: int
    rounds_report: list[ClosedLoopRoundReport]
    train_cpu_s: float
    wall_s: float
    policy: PolicyState


def evaluate(
    run: Runner, policies: dict[str, ClosedLoopPolicy], episodes: int, limits: ClosedLoopLimits, slot: int
) -> dict[str, list[EpisodeResult]]:
    seeds = [EVAL_SEED0 + i for i in range(episodes)]
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
    defender: IdmParams | None = None,
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
            f"{training.defender}, not {family}/{params}"
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
    defender: IdmParams | None = None,
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


def compare(
    untrained: list[EpisodeResult], trained: list[EpisodeResult]
) -> tuple[Arm, Arm, tuple[float, float, float]]:
    """Both arms and trained - untrained defender-failure rate, paired episode by episode (same seeds)."""
    if [r.seed for r in untrained] != [r.seed for r in trained]:
        raise ValueError("closed-loop attack gain: the two arms must play the same seeds in the same order")
    a = [r.defender_failure for r in trained]
    b = [r.defender_failure for r in untrained]
    both = sum(x and y for x, y in zip(a, b))
    first = sum(x and not y for x, y in zip(a, b))
    second = sum(y and not x for x, y in zip(a, b))
    diff = newcombe_paired_difference(both, first, second, len(a) - both - first - second)
    return arm("untrained", untrained), arm("trained", trained), diff


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
    return (
        f"| {rep.rounds} x {rep.contexts} x (K {rep.config.k} + {rep.config.reference_draws}{hand}), "
        f"lr {rep.config.lr}, "
        f"loss {rep.config.loss_norm}, T {rep.config.sample_temperature}, features {rep.config.features}, "
        f"slot {rep.config.slot} | {arm_text(rep.untrained)} | {arm_text(rep.trained)} | "
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
    extra = {key: getattr(args, key) for key in options if getattr(args, key) is not None}
    try:
        cfg = ClosedLoopConfig(k=args.k, slot=args.slot, seed=args.seed, **extra)
    except ValueError as exc:  # e.g. --hand-policy cut-in without --features gaps: say which, not a traceback
        ap.error(str(exc))
    if args.episodes == 0:
        training = train_only(cfg, args.rounds, args.contexts, args.workers, seed=args.seed, progress=True)
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
