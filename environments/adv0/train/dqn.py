"""The learned defender: a stable-baselines3 DQN over the driver's meta-actions.

`DefenderEnv` is a gymnasium `Env` over any world's `Episode` protocol: the observation is the
driver view's `features` (highway-env's Kinematics rows), the action an index into
`META_ACTIONS`, and the reward the defender's return J split over the steps. Each step pays its
progress term (`defender_return`'s speed term at this step's speed) divided by the episode's
horizon in policy steps; the last step pays what is left to J, so the rewards of an episode sum
to exactly `EpisodeResult.reward` (a defender-at-fault crash leaves -1 in total, an
attacker-at-fault crash is not charged). Every episode draws its attacker from `sampler` with
probability `adversarial_ratio`, else it is normal traffic; its world seed comes from the env's
own generator, so `reset(seed=s)` fixes the sequence of episodes.

The model is SB3's `DQN` with the hyper-parameters of highway-env's highway-fast DQN recipe
(gamma 0.8, lr 5e-4, batch 32, train every step, target update every 50 steps), scaled down for a
CPU: a 128x128 network instead of 256x256 and a 10k replay buffer instead of 15k. A pretrained
checkpoint is built once by `build_checkpoint` (the CLI's `harness adv0 pretrain-dqn --steps N`)
and cached under the user's cache dir (`<cache>/adv0/`, never committed); each round fine-tunes it
(`finetune`) against the current attacker; `DqnDefender` drives greedily.

Torch is imported lazily (inside the functions that need it), so the rest of the suite stays
importable and fast without it.

May import: numpy, gymnasium, stable-baselines3 (lazily), `harness`, `environments.adv0.sim.scenario`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypedDict

import gymnasium as gym
import numpy as np

from environments.adv0.sim.scenario import META_ACTIONS, DriverView, EpisodeResult, ScenarioParams
from harness.errors import HarnessError
from harness.providers.embedded import cache_root

Sampler = Callable[[np.random.Generator], ScenarioParams]
PRETRAIN_COMMAND = "harness adv0 pretrain-dqn --steps {steps}"
DEFAULT_PRETRAIN_STEPS = 20_000

# highway-env's highway-fast DQN recipe (scripts/sb3_highway_dqn.py), net and buffer scaled down.
class Recipe(TypedDict):
    """stable-baselines3 DQN's keywords (a plain dict: they are passed as keywords, and written as is
    into a checkpoint's JSON beside it)."""

    policy_kwargs: dict[str, list[int]]
    learning_rate: float
    buffer_size: int
    learning_starts: int
    batch_size: int
    gamma: float
    train_freq: int
    gradient_steps: int
    target_update_interval: int


RECIPE: Recipe = {
    "policy_kwargs": {"net_arch": [128, 128]},  # recipe: [256, 256]
    "learning_rate": 5e-4,
    "buffer_size": 10_000,  # recipe: 15_000
    "learning_starts": 200,
    "batch_size": 32,
    "gamma": 0.8,
    "train_freq": 1,
    "gradient_steps": 1,
    "target_update_interval": 50,
}


def default_world() -> Any:
    """The highway-env world (imported here: it is heavy and not every caller needs it)."""
    from environments.adv0.sim import highway

    return highway


def progress(speed: float, speed_range: tuple[float, float] = (20.0, 30.0)) -> float:
    """`defender_return`'s progress term at one speed."""
    lo, hi = speed_range
    return float(np.clip((speed - lo) / (hi - lo), 0.0, 1.0))


def legal_action(index: int, view: DriverView) -> str:
    """The meta-action of `index`, or IDLE where it is not available now (a lane change off the road)."""
    name = META_ACTIONS[int(index)]
    return name if name in view.available else "IDLE"


class DefenderEnv(gym.Env):
    """A gymnasium view of the world's episodes for a learned defender (see the module docstring).
    `horizon_steps`: policy steps of a full episode (the progress term's divisor)."""

    metadata = {"render_modes": []}

    def __init__(self, world: Any = None, family: str = "highway", sampler: Sampler | None = None,
                 adversarial_ratio: float = 0.0, horizon_steps: int = 20):
        if not 0.0 <= adversarial_ratio <= 1.0:
            raise ValueError(f"adversarial_ratio={adversarial_ratio}: use a share in [0, 1]")
        if adversarial_ratio > 0 and sampler is None:
            raise ValueError("adversarial_ratio > 0 needs a sampler of attacker scenarios")
        if horizon_steps < 1:
            raise ValueError(f"horizon_steps={horizon_steps}: need at least 1")
        self.world = world if world is not None else default_world()
        self.family, self.sampler, self.ratio, self.horizon = family, sampler, adversarial_ratio, horizon_steps
        self.episode: Any = None
        self.paid = 0.0  # reward paid so far in this episode
        self.illegal = 0  # actions replaced by IDLE (counted over the env's life)
        shape = self._probe_shape()
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=shape, dtype=np.float32)
        self.action_space = gym.spaces.Discrete(len(META_ACTIONS))

    def _probe_shape(self) -> tuple[int, ...]:
        episode = self.world.start_episode(self.family, 0, None)
        try:
            features = np.asarray(episode.view().features, dtype=np.float32)
        finally:
            episode.close()
        if features.size == 0:
            raise ValueError(f"world {getattr(self.world, '__name__', self.world)!r} gives no DriverView.features: "
                             "a learned defender needs the Kinematics observation")
        return tuple(features.shape)

    def _obs(self, view: DriverView) -> np.ndarray:
        obs = np.asarray(view.features, dtype=np.float32)
        if obs.shape != self.observation_space.shape:
            raise ValueError(f"DriverView.features has shape {obs.shape}, expected {self.observation_space.shape}")
        return obs

    def draw(self) -> tuple[ScenarioParams | None, int]:
        """This episode's attacker (or None) and world seed, from the env's generator."""
        rng = self.np_random
        attack = self.sampler(rng) if self.sampler is not None and rng.random() < self.ratio else None
        return attack, int(rng.integers(2**31 - 1))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.close()
        attack, world_seed = self.draw()
        self.episode = self.world.start_episode(self.family, world_seed, attack)
        self.paid = 0.0
        self.view = self.episode.view()
        return self._obs(self.view), {"attack": attack, "seed": world_seed}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        name = legal_action(action, self.view)
        self.illegal += name != META_ACTIONS[int(action)]
        self.episode.step(name)
        self.view = self.episode.view()
        if not self.episode.done:
            reward = progress(self.view.ego_speed) / self.horizon
            self.paid += reward
            return self._obs(self.view), reward, False, False, {}
        result: EpisodeResult = self.episode.result()
        reward = result.reward - self.paid  # the rest of J: the episode's rewards sum to J
        self.paid = result.reward
        return self._obs(self.view), reward, result.crashed, not result.crashed, {"result": result}

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()
            self.episode = None


# ---------------------------------------------------------------- the model and its checkpoint
@dataclass
class TrainStats:
    steps: int
    cpu_s: float  # CPU-seconds of this process (every torch thread)
    wall_s: float

    @property
    def cpu_s_per_1k(self) -> float:
        return 1000.0 * self.cpu_s / max(1, self.steps)


def make_model(env: gym.Env, seed: int, learning_starts: int | None = None) -> Any:
    """A fresh DQN on `env` with the recipe's hyper-parameters."""
    from stable_baselines3 import DQN

    params = RECIPE.copy()
    if learning_starts is not None:
        params["learning_starts"] = learning_starts
    return DQN("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **params)


def learn(model: Any, steps: int, reset: bool) -> TrainStats:
    if steps < 1:
        raise ValueError(f"steps={steps}: need at least 1 training step")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    model.learn(total_timesteps=steps, reset_num_timesteps=reset, progress_bar=False)
    return TrainStats(steps, time.process_time() - cpu0, time.perf_counter() - wall0)


def checkpoint_dir() -> Path:
    """`<user cache dir of harness>/adv0` (`$HARNESS_CACHE_DIR/adv0` when that is set)."""
    return cache_root() / "adv0"


def checkpoint_path(steps: int, seed: int, family: str = "highway") -> Path:
    return checkpoint_dir() / f"dqn-{family}-{steps}steps-seed{seed}.zip"


def build_checkpoint(steps: int = DEFAULT_PRETRAIN_STEPS, seed: int = 0, *, family: str = "highway",
                     world: Any = None, force: bool = False) -> Path:
    """Pretrain a DQN on normal traffic of `family` for `steps` steps and cache it; an existing
    checkpoint is returned as it is unless `force`. Writes `<name>.json` beside it (the recipe,
    steps, seed, CPU-seconds). The file is written under a temporary name and renamed, so a killed
    build never leaves a half checkpoint."""
    path = checkpoint_path(steps, seed, family)
    if path.exists() and not force:
        return path
    env = DefenderEnv(world, family)
    model = make_model(env, seed)
    stats = learn(model, steps, reset=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.zip")
    model.save(tmp)
    os.replace(tmp, path)
    meta = {"steps": steps, "seed": seed, "family": family, "recipe": RECIPE, **asdict(stats),
            "cpu_s_per_1k": stats.cpu_s_per_1k}
    path.with_suffix(".json").write_text(json.dumps(meta, indent=2))
    env.close()
    return path


def load_checkpoint(path: str | Path | None = None, env: gym.Env | None = None) -> Any:
    """The DQN saved at `path` (default: the default pretraining's cache entry). A missing file is
    one `HarnessError` naming the command that builds it."""
    path = Path(path) if path is not None else checkpoint_path(DEFAULT_PRETRAIN_STEPS, 0)
    if not path.is_file():
        steps = _steps_in_name(path) or DEFAULT_PRETRAIN_STEPS
        raise HarnessError(f"DQN checkpoint {path} is missing: build it with `{PRETRAIN_COMMAND.format(steps=steps)}` "
                           f"(it is cached under {checkpoint_dir()})")
    from stable_baselines3 import DQN

    return DQN.load(path, env=env, device="cpu")


def _steps_in_name(path: Path) -> int | None:
    for part in path.stem.split("-"):
        if part.endswith("steps") and part[:-5].isdigit():
            return int(part[:-5])
    return None


def finetune(model: Any, sampler: Sampler | None, steps: int, *, adversarial_ratio: float = 0.5,
             family: str = "highway", world: Any = None, seed: int = 0) -> TrainStats:
    """Train `model` in place for `steps` more steps on `family`, each episode attacked by a draw of
    `sampler` with probability `adversarial_ratio` (the round's mixing schedule). Returns the cost."""
    env = DefenderEnv(world, family, sampler, adversarial_ratio if sampler is not None else 0.0)
    model.set_env(env)
    model.set_random_seed(seed)  # seeds the env's next reset too: the episode sequence follows `seed`
    try:
        return learn(model, steps, reset=False)
    finally:
        env.close()


class DqnDefender:
    """A trained DQN driving greedily: the argmax action of its Q-network at every step."""

    name = "dqn"

    def __init__(self, model: Any):
        self.model = model
        self.illegal = 0  # greedy choices that were not available and became IDLE

    def act(self, view: DriverView) -> str:
        action, _ = self.model.predict(np.asarray(view.features, dtype=np.float32), deterministic=True)
        name = legal_action(int(action), view)
        self.illegal += name != META_ACTIONS[int(action)]
        return name

    def episode(self, world: Any, family: str, seed: int, attack: ScenarioParams | None,
                frames: bool = False) -> EpisodeResult:
        """One episode of `world` driven by this defender."""
        episode = world.start_episode(family, seed, attack, frames=frames)
        try:
            while not episode.done:
                episode.step(self.act(episode.view()))
            result: EpisodeResult = episode.result().model_copy(update={"defender": self.name})  # world: Any
            return result
        finally:
            episode.close()
