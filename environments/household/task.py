"""A household task, as a sample carries it: a generated one (`generator.py`) or an official
ALFWorld game (`official.py`). The environment is reset with its JSON dump (`model_dump()`, the
protocol's dict) and reads it back with `read_task`; the dump is the task's former dict, key for
key, so the corpus hash of the generated set is unchanged."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from environments.cdwm.episode import EpisodeTask


class GeneratedTask(EpisodeTask):
    """One generated task: a room, a PDDL problem and the gold plan that wins it."""

    task_type: str  # ALFWorld's name, e.g. pick_and_place_simple
    room: str
    pddl_problem: str  # the problem, played with the bundled ALFRED domain and grammar
    gold_plan: list[str]  # commands with `{entity-id}` placeholders
    target: str  # the object type the goal is about
    goal_receptacle: str | None  # its receptacle type (None: look at it under the lamp)
    irreversible_trap: str | None  # "slice" when the target can be sliced, which ruins the task
    required_irreversible: list[str]  # none: no generated task needs an irreversible change
    seed: int
    generator_version: str


class OfficialTask(BaseModel):
    """One official ALFWorld game, played unchanged from its `game.tw-pddl`."""

    model_config = ConfigDict(frozen=True)

    task_id: str  # <split>/<trial folder>
    task_type: str
    game_file: str
    required_irreversible: list[str]
    split: str


HouseholdTask = GeneratedTask | OfficialTask


def read_task(data: dict[str, Any]) -> HouseholdTask:
    """The task an environment is reset with (the protocol's dict): an official game has a game file."""
    return OfficialTask.model_validate(data) if data.get("game_file") else GeneratedTask.model_validate(data)
