"""Suite `cdwm-procgen`: CDWM on procedurally generated levels -- run on MiniGrid, because Procgen
cannot be installed in this project's environment (its only wheels for this Python, procgen2 and
procgen-mirror 0.10.7, require numpy < 2 and gym < 1 with gym3; the project runs numpy 2.4).
The backend is recorded in every evaluation (`backend`), the corpus identity and the description;
see README.md. One sample = one (level family, seed) episode; every seed is a new level.

Success = the level completed (MiniGrid's goal reached); the level ending is irreversible --
required when completed, a failure when lava or the step limit ended it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field, field_validator

from environments.cdwm.episode import EpisodeTask
from environments.cdwm.suite_base import CdwmOptions, GeneratedCdwmSuite
from environments.procgen.env import LEVELS, WORLD_MODEL_HELP_TEXT, GridEnvironment, check_level
from harness.environment import NONE, ActionMask, Environment
from harness.errors import HarnessError
from harness.suite import Sample

SUBSTITUTE_REASON = ("procgen: only procgen2 / procgen-mirror 0.10.7 have cp311 wheels; they require numpy<2, gym<1 "
                     "and gym3, and this project runs numpy 2.4 -- MiniGrid (procedurally generated levels, full "
                     "object state) runs in its place")
# Turning moves nothing but the agent's direction; forward moves it (and may end the level in
# lava or on the goal); pickup/drop/toggle change objects, never the level's end.
GRID_MASK = ActionMask({
    "stop": NONE, "left": {"attributes"}, "right": {"attributes"},
    "forward": {"attributes", "irreversible"},
    "pickup": {"created", "deleted", "relations_added", "relations_removed"},
    "drop": {"created", "deleted", "relations_added", "relations_removed"},
    "toggle": {"attributes"},
}, name="minigrid")


class ProcgenOptions(CdwmOptions):
    max_steps: int = Field(20, ge=1, description="agent steps per episode")
    levels: str = Field("doorkey,lavagap", description=f"comma list of level families: {', '.join(LEVELS)}")
    seeds: int = Field(2, ge=1, description="levels (seeds 0..seeds-1) per family")

    @field_validator("levels")
    @classmethod
    def _known_levels(cls, value: str) -> str:
        level_list(value)
        return value


def level_list(spec: str) -> list[str]:
    try:
        return [check_level(v) for v in spec.split(",") if v.strip()]
    except HarnessError as exc:
        raise ValueError(str(exc)) from None


class GridTask(EpisodeTask):
    """One (level, seed) episode."""

    level: str
    seed: int
    backend: str = "minigrid"
    # Completing the level is irreversible, and it is what the task asks.
    required_irreversible: list[dict[str, str]] = [{"entity": "level", "attribute": "complete"}]


class CdwmProcgenSuite(GeneratedCdwmSuite[GridTask]):
    name = "cdwm-procgen"
    version = "0.1.0"
    description = ("CDWM procedurally generated levels, run on MiniGrid in place of Procgen (Procgen's wheels need "
                   "numpy<2): exact object deltas, level end irreversible (--agent react|cdwm)")
    mask = GRID_MASK
    episode_source = "minigrid (substitute for procgen)"
    choose_episodes = "choose (level, seed) pairs with --suite-option levels=... --suite-option seeds=N"
    world_model_help = WORLD_MODEL_HELP_TEXT
    Options = ProcgenOptions
    options: ProcgenOptions

    def episode_tasks(self) -> list[GridTask]:
        missions = {"doorkey": "use the key to open the door and then get to the goal",
                    "lavagap": "avoid the lava and get to the green goal square"}
        return [GridTask(task_id=f"{lv}-{s}", level=lv, seed=s, intent=f"MiniGrid {lv}: {missions[lv.rstrip('6')]}.")
                for lv in level_list(self.options.levels) for s in range(self.options.seeds)]

    def corpus_identity(self, corpus: str | None) -> dict[str, Any]:
        return super().corpus_identity(corpus) | {"substitute_reason": SUBSTITUTE_REASON}

    def make_env(self, sample: Sample, judge: Callable[[str], str] | None) -> Environment:
        return GridEnvironment()
