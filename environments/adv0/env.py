"""One ADV-0 episode behind the core's environment protocol, so any registered agent (the LLM
driver, ReAct) drives it without knowing this family.

The observation is the driver's view as text, with the meta-actions available now as the
admissible actions; a step's info says whether the ego crashed and, from the geometry, who was at
fault (the driver reflects only on crashes it may have caused). There are no CDWM deltas in this
world: every step's delta is the empty one.
"""

from __future__ import annotations

import base64
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from environments.adv0.sim.scenario import META_ACTIONS, Episode, EpisodeResult
from harness.environment import ACTION_HELP, Delta, EnvironmentClosed, Observation, StepResult

DRIVING_HELP = (
    "Answer with exactly one of the available actions: LANE_LEFT and LANE_RIGHT change lane, FASTER and SLOWER "
    "change speed, IDLE keeps lane and speed."
)


# pygame's renderer is not safe to drive from several threads at once: episodes that render
# (frames=True) step one at a time. Model calls, not steps, dominate an LLM driver's episode.
RENDER_LOCK = threading.Lock()


class DrivingEnvironment:
    """`start()` builds the episode (on the environment's thread); `result` is set when it ends,
    and `filmstrip_png` (base64) when it ended in a crash and the episode kept its frames."""

    def __init__(self, start: Callable[[], Episode], frames: bool = False):
        self._start = start
        self.frames = frames
        self._episode: Episode | None = None
        self.result: EpisodeResult | None = None
        self.filmstrip_png: str | None = None

    def _live(self) -> Episode:
        if self._episode is None:
            raise EnvironmentClosed("this driving episode is not running (reset it, or it was closed)")
        return self._episode

    def _observation(self) -> Observation:
        view = self._live().view()
        return Observation(text=view.text(), action_classes=META_ACTIONS, admissible=list(view.available),
                           info={ACTION_HELP: DRIVING_HELP})

    def reset(self, task: dict[str, Any]) -> Observation:
        self.close()
        self.result, self.filmstrip_png = None, None
        with self._rendering():
            self._episode = self._start()
        return self._observation()

    def _rendering(self) -> Any:
        return RENDER_LOCK if self.frames else _NoLock()

    def step(self, action: str) -> StepResult:
        episode = self._live()
        name = action.strip().upper()
        valid = name in episode.view().available
        with self._rendering():
            episode.step(name)  # the world counts an unavailable action as an invalid one and keeps the lane (IDLE)
        info: dict[str, bool | str | None] = {}
        if episode.done:
            self.result = episode.result()
            info = {"crashed": self.result.crashed,
                    "fault": self.result.collision.fault if self.result.collision is not None else None}
            return StepResult(observation=Observation(text="The episode is over."), delta=Delta(), done=True,
                              valid=valid, info=info)
        return StepResult(observation=self._observation(), delta=Delta(), done=False, valid=valid, info=info)

    def action_class(self, action: str) -> str:
        return action.strip().upper()

    def evaluate(self) -> dict[str, Any]:
        result = self.result or self._live().result()
        return {"success": float(not result.crashed), "required_irreversible": []}

    def close(self) -> None:
        if self._episode is not None:
            if self.result is None:
                self.result = self._episode.result()
            if self.frames and self.result.crashed:
                self.filmstrip_png = _strip_png(self._episode)
            self._episode.close()
            self._episode = None


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _strip_png(episode: Episode) -> str | None:
    """The crash's filmstrip (highway-env's own frames, one strip PNG) as base64; None for a world
    that keeps no frames (the toy world)."""
    save = getattr(episode, "filmstrip", None)
    if save is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / p for p in save(tmp)]
        strip = next((p for p in paths if p.name.endswith("-strip.png")), None)
        return base64.b64encode(strip.read_bytes()).decode("ascii") if strip is not None else None
