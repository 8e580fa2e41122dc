"""The fixed defender `closed_loop_eval` holds while the closed-loop attacker trains and plays: the
IDM/MOBIL planner (`IdmParams`) or a learned DQN (`DqnCheckpoint`, driving greedily), and `Runner`,
which plays closed-loop draws against it over worker processes.

Why a DQN: against the IDM planner the attacker finds almost no defender-at-fault failures -- the IDM
follower reacts at once and stops in time (docs/adv0.md, session 28). The paper's defenders are
learned driving policies, so `--defender dqn` holds one of those fixed instead.

A checkpoint is named by its path and pinned by its SHA-256: a report or training file records both,
and `--policy FILE` refuses to evaluate a policy trained against another defender. `dqn_checkpoint`
loads the file once in the calling process to check it before any episode is played: a missing file
is `dqn.load_checkpoint`'s error (it names `harness adv0 pretrain-dqn`), a file that is not a DQN, or
one whose observation or action space is not the family's, is one error naming the file and the fix.
Workers load the model once per process (torch with one thread each).

May import: numpy, pydantic, `harness.errors`, `environments.adv0` (closed_loop, scenario, highway,
loop, planner, dqn).
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from environments.adv0.sim.closed_loop import ClosedLoopDraw
from environments.adv0.sim.scenario import META_ACTIONS, EpisodeResult, IdmParams
from harness.errors import HarnessError


class DqnCheckpoint(BaseModel):
    """A DQN defender held fixed: its checkpoint file and the file's SHA-256 (what pins it)."""

    path: str
    sha256: str

    @property
    def name(self) -> str:
        return f"dqn {Path(self.path).name} (sha256 {self.sha256[:12]})"


FixedDefender = IdmParams | DqnCheckpoint
Job = tuple[str, FixedDefender, ClosedLoopDraw, int]  # pickled to a worker process as it is

_models: dict[str, Any] = {}  # a worker's loaded DQNs, by SHA-256


def defender_name(defender: FixedDefender) -> str:
    return defender.name if isinstance(defender, DqnCheckpoint) else f"idm {defender}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def dqn_checkpoint(path: str | Path | None, family: str = "highway") -> DqnCheckpoint:
    """Check the DQN at `path` (None: the default pretraining's cache entry) against `family`'s
    observation and the meta-actions, and pin it. Raises `HarnessError` naming the file and the fix."""
    from environments.adv0.sim import highway
    from environments.adv0.train import dqn

    target = Path(path) if path is not None else dqn.checkpoint_path(dqn.DEFAULT_PRETRAIN_STEPS, 0, family)
    fix = f"build one with `{dqn.PRETRAIN_COMMAND.format(steps=dqn.DEFAULT_PRETRAIN_STEPS)}`"
    try:
        model = dqn.load_checkpoint(target)  # a missing file: the error names the pretrain command
    except HarnessError:
        raise
    except Exception as exc:  # SB3 raises zipfile / pickle / key errors for a file that is not its DQN
        raise HarnessError(f"DQN checkpoint {target}: not a stable-baselines3 DQN file ({exc!r}); {fix}") from exc
    episode = highway.start_episode(family, 0, None)
    try:
        shape = np.asarray(episode.view().features, dtype=np.float32).shape
    finally:
        episode.close()
    seen, actions = tuple(model.observation_space.shape or ()), getattr(model.action_space, "n", None)
    if seen != shape or actions != len(META_ACTIONS):
        raise HarnessError(
            f"DQN checkpoint {target}: observation {seen} and {actions} actions, but family {family!r} "
            f"observes {shape} and the defender has {len(META_ACTIONS)} meta-actions; {fix} "
            f"(or name a checkpoint trained on {family!r})"
        )
    return DqnCheckpoint(path=str(target), sha256=_sha256(target))


def _dqn(spec: DqnCheckpoint) -> Any:
    if spec.sha256 not in _models:
        import torch

        from environments.adv0.train import dqn

        torch.set_num_threads(1)
        if _sha256(Path(spec.path)) != spec.sha256:
            raise HarnessError(f"DQN checkpoint {spec.path} changed since it was checked (sha256 {spec.sha256[:12]})")
        _models[spec.sha256] = dqn.load_checkpoint(spec.path)
    return _models[spec.sha256]


def _episode(job: Job) -> EpisodeResult:
    from environments.adv0.sim import highway
    from environments.adv0.train.dqn import DqnDefender
    from environments.adv0.train.loop import ClosedLoopWorld
    from environments.adv0.train.planner import planner_episode

    family, defender, draw, seed = job
    world = ClosedLoopWorld(highway)
    if isinstance(defender, DqnCheckpoint):
        return DqnDefender(_dqn(defender)).episode(world, family, seed, draw)  # type: ignore[arg-type]
    return planner_episode(world, family, defender, draw, seed)


class Runner:
    """Episodes of the fixed `defender` against closed-loop draws, in job order, over `workers`
    processes (1: in-process)."""

    def __init__(self, family: str, defender: FixedDefender, workers: int):
        self.family, self.defender, self.workers = family, defender, workers
        self._pool = ProcessPoolExecutor(workers) if workers > 1 else None

    def __call__(self, draws: list[tuple[ClosedLoopDraw, int]]) -> list[EpisodeResult]:
        jobs: list[Job] = [(self.family, self.defender, d, s) for d, s in draws]
        if self._pool is None:
            return [_episode(j) for j in jobs]
        return list(self._pool.map(_episode, jobs, chunksize=max(1, len(jobs) // (4 * self.workers))))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
