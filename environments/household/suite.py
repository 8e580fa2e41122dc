"""Suite `cdwm-household`: ALFWorld-style household tasks of the six ALFWorld types, played
through ALFWorld's text engine, by the ReAct baseline or the CDWM agent (`--agent react|cdwm`),
scored by the PDDL goal (won) and CDWM's metrics over ground-truth deltas.

Tasks: by default the project's generated set (`generator.py`: seed 0, 12 per type, 72 tasks;
options `seed`, `per_type`, `task_types`). With `ALFWORLD_DATA` (or `--corpus`) pointing at
ALFWorld's downloaded data, its official games instead (option `split`, default valid_unseen),
unchanged. One sample = one game = one episode (ALFWorld's limit: 50 steps).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from pydantic import Field, JsonValue, field_validator

from environments.cdwm.suite_base import CdwmOptions, CdwmSuite
from environments.household import generator
from environments.household.mask import HOUSEHOLD_MASK
from environments.household.official import DEFAULT_SPLIT, OfficialDataError, data_root, intent_of_game, official_tasks
from environments.household.task import GeneratedTask, HouseholdTask, OfficialTask
from harness.environment import Environment
from harness.errors import HarnessError
from harness.suite import Sample

HOUSEHOLD_WORLD_MODEL_HELP = (
    "Entities are named as the game shows them: apple 1, fridge 1, sinkbasin 1, desklamp 1; the agent is "
    "'agent'. Relations: agent at fridge 1 (where the agent stands; 'middle of room' at the start), agent "
    "holds apple 1, apple 1 in fridge 1. Attributes (true/false): open (receptacles), clean, hot, cool, sliced, "
    "on (lamps). Going somewhere removes the old 'agent at' and adds the new one; taking removes 'X in Y' and "
    "adds 'agent holds X'. Cannot be undone: slicing an object (sliced true)."
)


class HouseholdOptions(CdwmOptions):
    max_steps: int = Field(50, ge=1, description="agent steps per episode (ALFWorld's limit: 50)")
    seed: int = Field(generator.DEFAULT_SEED, description="generated tasks: the generator's seed")
    per_type: int = Field(generator.DEFAULT_PER_TYPE, ge=1, description="generated tasks per task type")
    task_types: str = Field("all", description=f"'all' or a comma list of {', '.join(generator.SHORT.values())}")
    split: str = Field(DEFAULT_SPLIT, description="official games (ALFWORLD_DATA): valid_unseen, valid_seen or train")

    @field_validator("task_types")
    @classmethod
    def _known_types(cls, value: str) -> str:
        _task_types(value)
        return value


class CdwmHouseholdSuite(CdwmSuite[HouseholdTask]):
    name = "cdwm-household"
    version = "1.0.0"
    description = ("CDWM household: ALFWorld's six task types on generated PDDL problems (or the official games "
                   "with ALFWORLD_DATA) in ALFWorld's text engine (--agent react|cdwm)")
    mask = HOUSEHOLD_MASK
    world_model_help = HOUSEHOLD_WORLD_MODEL_HELP
    Options = HouseholdOptions
    options: HouseholdOptions

    def __init__(self, options: HouseholdOptions | None = None) -> None:
        super().__init__(options)
        self.seed, self.per_type, self.split = self.options.seed, self.options.per_type, self.options.split
        self.task_types = _task_types(self.options.task_types)

    def load_samples(self, corpus: str | None) -> list[Sample]:
        tasks = self._tasks(corpus)
        return [Sample(id=t.task_id, data=t) for t in tasks]

    def _tasks(self, corpus: str | None) -> list[HouseholdTask]:
        try:
            root = Path(corpus).expanduser() if corpus else data_root()
            if root is not None:
                if not (root / "json_2.1.1").is_dir():
                    raise OfficialDataError(f"--corpus {corpus}: no json_2.1.1 folder there; give ALFWorld's data "
                                            "folder (the one `alfworld-download` filled)")
                return [t for t in official_tasks(root, self.split) if t.task_type in self.task_types]
        except OfficialDataError as exc:
            raise HarnessError(str(exc)) from None
        return [t for t in generator.generate_tasks(self.seed, self.per_type) if t.task_type in self.task_types]

    def corpus_identity(self, corpus: str | None) -> dict[str, JsonValue]:
        tasks = self._tasks(corpus)
        digest = hashlib.sha256()
        for t in tasks:  # a generated task hashed as its JSON (the dict it was before it was typed)
            payload = (Path(t.game_file).read_bytes() if isinstance(t, OfficialTask)
                       else json.dumps(t.model_dump(mode="json"), sort_keys=True).encode())
            digest.update(t.task_id.encode() + b"\0" + payload)
        first = tasks[0] if tasks else None
        official = isinstance(first, OfficialTask)
        return {"path": str(Path(first.game_file).parents[3]) if isinstance(first, OfficialTask) else None,
                "source": f"alfworld:{self.split}" if official else f"generated:v{generator.GENERATOR_VERSION}",
                "seed": None if official else self.seed, "tasks": len(tasks), "sha256": digest.hexdigest()}

    def intent_of(self, sample: Sample[HouseholdTask]) -> str:
        task = sample.data
        return task.intent if isinstance(task, GeneratedTask) else intent_of_game(task.game_file)

    def make_env(self, sample: Sample[HouseholdTask], judge: Callable[[str], str] | None) -> Environment:
        from environments.household.env import HouseholdEnvironment

        # One step above the agent's limit: the agent's own limit ends the episode (and says so).
        return HouseholdEnvironment(max_steps=self.config.max_steps + 1)


def _task_types(spec: str) -> set[str]:
    if spec in ("", "all"):
        return set(generator.TASK_TYPES)
    by_short = {v: k for k, v in generator.SHORT.items()}
    out = set()
    for part in str(spec).split(","):
        name = by_short.get(part.strip(), part.strip())
        if name not in generator.TASK_TYPES:
            raise ValueError(f"unknown type {part.strip()!r}; use 'all' or a comma list of "
                             f"{', '.join(generator.SHORT.values())} (or ALFWorld's names)")
        out.add(name)
    return out
