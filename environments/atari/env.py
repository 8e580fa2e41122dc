"""`AtariEnvironment`: one Atari 100k game in ale-py behind the CDWM protocol.

The emulator runs the protocol's settings (sticky actions p=0.25, frame skip 4, minimal action
set; `games.py`). An agent action is one of the game's minimal actions (`noop`, `fire`, `left`,
...), held for `action_repeat` emulator steps; the step's ground-truth delta is the change of the
object state (`objects.py`) over the hold, with the step's events (bounces) as relations, and is
irreversible when a life or point was lost or the game ended. `stop [reason]` ends the episode.

Episodes are a pure function of the seed and the actions (ale-py seeds its sticky-action RNG from
`reset(seed=...)`). Around each irreversible event the last `FILMSTRIP_FRAMES` screens are kept as
one PNG strip (`filmstrips`), for the transcript's pictures. Time spent in the emulator and in
object extraction is counted separately (`timing`), for `harness bench cdwm-visual`.
"""

from __future__ import annotations

import base64
import io
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import JsonValue

from environments.atari import games
from environments.atari.frame import Frame
from environments.atari.objects import coarse, delta_between, describe, lost, read
from environments.cdwm.env import fixed_action_class, screen_action
from harness.environment import ACTION_HELP, STOP, WORLD_MODEL_HELP, Observation, StepResult

if TYPE_CHECKING:
    import gymnasium

FILMSTRIP_FRAMES = 6
MAX_FILMSTRIPS = 3

WORLD_MODEL_HELP_TEXT = (
    "Entities: the game's objects as the observation names them (e.g. paddle, ball, player, enemy, car, ghost, "
    "floe, item, farmer) and 'game'. Attributes: x, y (cells of 8 pixels; DOWN raises y), dx, dy (direction: "
    "-1, 0, 1), and per game e.g. speed, floor, heading (eighths of a turn), turn, eggs, dots; game score, "
    "lives, conceded (points the opponent scored), over. An object that appears is created, one that leaves "
    "play or is used up is deleted. Relations: the game's events, e.g. ball bounced off paddle, chicken crossed "
    "road, player landed on floe, player collected item, player ate egg, player climbed floor. Cannot be "
    "undone: losing a life, conceding a point, an item consumed, the game ending."
)


def make_ale_env(game: str, sticky: float = games.STICKY_ACTION_P) -> gymnasium.Env[np.ndarray, int]:
    """ale-py's gymnasium env for `game` with the Atari 100k settings (RAM observations; the
    screen is read from the emulator only when a frame is kept)."""
    import gymnasium as gym
    from ale_py.env import AtariEnv

    env = AtariEnv(game=game, obs_type="ram", frameskip=games.FRAME_SKIP, repeat_action_probability=sticky,
                   full_action_space=games.FULL_ACTION_SPACE, max_num_frames_per_episode=games.MAX_FRAMES)
    return gym.wrappers.TimeLimit(env, max_episode_steps=games.MAX_AGENT_STEPS)


class AtariEnvironment:
    """One game, one episode at a time (`reset(task)` with task {"game", "seed"})."""

    def __init__(self, action_repeat: int = 4, filmstrip: bool = True, image: bool = False,
                 sticky: float = games.STICKY_ACTION_P):
        if action_repeat < 1:
            raise ValueError(f"action_repeat={action_repeat}: hold each action for at least 1 emulator step")
        self.action_repeat, self.keep_frames, self.image, self.sticky = action_repeat, filmstrip, image, sticky
        self._env: Any = None
        self.game = ""
        self.actions: list[str] = []
        self.filmstrips: list[dict[str, str]] = []
        self.timing = {"emulator_s": 0.0, "extract_s": 0.0, "frames_s": 0.0, "env_steps": 0}
        self.closed = False

    # -- the protocol ----------------------------------------------------------------------------
    def reset(self, task: dict[str, Any]) -> Observation:
        self.game = games.check_game(str(task.get("game", "")))
        self.seed = int(task.get("seed", 0))
        if self._env is None or self._env.unwrapped._game != self.game:
            self.close_emulator()
            self._env = make_ale_env(self.game, self.sticky)
        self.ram, _ = self._env.reset(seed=self.seed)
        ale = self._env.unwrapped.ale
        self.actions = [m.lower() for m in self._env.unwrapped.get_action_meanings()]
        self.score, self.env_steps, self.agent_steps = 0.0, 0, 0
        self.done, self.game_over = False, False
        self.stopped: str | None = None
        self.frame = read(self.game, self.ram, self.score, ale.lives(), None)
        self.recent: deque[np.ndarray] = deque(maxlen=FILMSTRIP_FRAMES)
        self.filmstrips = []
        self._keep_frame()
        return self._observe("The game starts.")

    def step(self, action: str) -> StepResult:
        if self._env is None:
            raise RuntimeError("call reset(task) before step()")
        command, early = screen_action(action, self.actions, self._observe, over=self.done, world=self.game)
        if early is not None:
            if early.done and not self.done:  # `stop`
                self.done, self.stopped = True, command
            return early
        self.agent_steps += 1
        start, reward, cost = self.frame, 0.0, 0.0
        events: set[tuple[str, str, str]] = set()
        for _ in range(self.action_repeat):
            r, over = self._emulate(self.actions.index(command))
            reward += r
            before, self.frame = self.frame, self._extract(self.frame)
            events |= self.frame.relations
            loss = lost(before, self.frame) + int(over)
            if loss:
                cost += loss
                self._save_filmstrip(before, self.frame, over)
            if over:
                self.done = self.game_over = True
                break
        # One typed delta per agent step: the net object change over the hold, its events.
        end = Frame(self.frame.objects, self.frame.raw, events)
        delta = delta_between(start, end, game_over=self.game_over, cost=cost)
        return StepResult(self._observe(f"Reward {reward:g}."), delta, done=self.done,
                          info={"reward": reward, "score": self.score, "env_steps": self.env_steps})

    def action_class(self, action: str) -> str:
        return fixed_action_class(action)

    def evaluate(self) -> dict[str, JsonValue]:  # the transcript's evaluation (JSON)
        if self._env is None:
            raise RuntimeError("call reset(task) and run the episode before evaluate()")
        return {"success": 1.0 if self.score > 0 else 0.0, "game": self.game, "seed": self.seed, "score": self.score,
                "human_normalized_score": games.human_normalized(self.game, self.score),
                "env_steps": self.env_steps, "frames": self.env_steps * games.FRAME_SKIP,
                "agent_steps": self.agent_steps, "game_over": self.game_over, "stopped": self.stopped,
                "coarse_deltas": coarse(self.game), "required_irreversible": []}

    def close(self) -> None:
        self.close_emulator()
        self.closed = True

    def close_emulator(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    # -- internals -------------------------------------------------------------------------------
    def _emulate(self, index: int) -> tuple[float, bool]:
        t0 = time.perf_counter()
        self.ram, r, terminated, truncated, _ = self._env.step(index)
        self.timing["emulator_s"] += time.perf_counter() - t0
        self.env_steps += 1
        self.timing["env_steps"] += 1
        self.score += float(r)
        self._keep_frame()
        return float(r), bool(terminated or truncated)

    def _extract(self, prev: Frame) -> Frame:
        t0 = time.perf_counter()
        frame = read(self.game, self.ram, self.score, self._env.unwrapped.ale.lives(), prev)
        self.timing["extract_s"] += time.perf_counter() - t0
        return frame

    def _keep_frame(self) -> None:
        if not (self.keep_frames or self.image):
            return
        t0 = time.perf_counter()
        self.recent.append(self._env.unwrapped.ale.getScreenRGB())
        self.timing["frames_s"] += time.perf_counter() - t0

    def _save_filmstrip(self, before: Frame, after: Frame, over: bool) -> None:
        if not self.keep_frames or len(self.filmstrips) >= MAX_FILMSTRIPS or not self.recent:
            return
        what = "game over" if over else "life lost" if after.objects["game"]["lives"] < before.objects["game"]["lives"] \
            else "point conceded"
        caption = (f"{self.game} seed {self.seed}: {what} at emulator step {self.env_steps} "
                   f"(last {len(self.recent)} frames, {games.FRAME_SKIP} frames apart)")
        self.filmstrips.append({"caption": caption, "png": png_base64(np.concatenate(list(self.recent), axis=1))})

    def _observe(self, feedback: str) -> Observation:
        head = (f"{self.game} (Atari 2600), agent step {self.agent_steps}, emulator step {self.env_steps}. "
                f"{feedback}")
        actions = ", ".join(self.actions)
        text = f"{head}\nObjects:\n{describe(self.frame)}\nActions: {actions}"
        screenshot = png_bytes(self.recent[-1]) if self.image and self.recent else None
        return Observation(text=text, action_classes=(*self.actions, STOP), admissible=list(self.actions),
                           screenshot_png=screenshot,
                           info={ACTION_HELP: _action_help(self.actions, self.action_repeat),
                                 WORLD_MODEL_HELP: WORLD_MODEL_HELP_TEXT, "steps": self.agent_steps})


def _action_help(actions: list[str], repeat: int) -> str:
    return (f"  one of: {', '.join(actions)} -- held for {repeat} emulator steps ({repeat * games.FRAME_SKIP} frames)\n"
            "  stop [reason]   end the episode\nWrite the action exactly as listed.")


def png_bytes(rgb: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.asarray(rgb, dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def png_base64(rgb: np.ndarray) -> str:
    return base64.b64encode(png_bytes(rgb)).decode("ascii")
