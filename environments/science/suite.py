"""Suite `cdwm-science`: ScienceWorld's 30 tasks (the `scienceworld` package's simulator), run by
the ReAct baseline or the CDWM agent (`--agent react|cdwm`), scored by the simulator's own task
score, with ground-truth deltas from diffs of its object tree (`environments.science.deltas`).

Samples are task variations from the package's own splits (`get_variations_train/dev/test`), the
first `variations_per_task` of each task in the split (or the `variations` named), so a sample
list is deterministic. One sample = one episode in its own JVM. There is no corpus file: the tasks
ship with the package; `corpus_identity` records its version and the options that pick samples.

Options (`--suite-option key=value`), besides CdwmSuite's (agent, max_steps, ...):
    split=dev                train | dev | test
    tasks=                   comma-separated names (boil) or ids (1-1); empty = all 30
    variations_per_task=2    the first N variations of the split, per task
    variations=              comma-separated variation numbers instead (each within the task's range)
    simplification=easy      ScienceWorld's simplifications, comma-separated; "easy" = teleportAction,
                             openDoors, selfWateringFlowerPots and, except on electrical tasks,
                             noElectricalAction -- the setting LLM-agent evaluations usually use
    env_step_limit=100       the simulator's move limit (`wait` counts 10)
    max_steps=100            the agent's step limit
    max_admissible=2000      cap on the admissible actions listed per observation
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field, JsonValue, field_validator

from environments.cdwm.episode import EpisodeTask
from environments.cdwm.suite_base import CdwmOptions, CdwmSuite
from environments.science.mask import SCIENCE_MASK
from harness.environment import Environment
from harness.errors import HarnessError
from harness.suite import Sample

SPLITS = ("train", "dev", "test")
# ScienceWorld's simplifications (`get_possible_simplifications()`), and its shorthand "easy".
SIMPLIFICATIONS = ("teleportAction", "selfWateringFlowerPots", "openContainers", "openDoors",
                   "noElectricalAction", "easy")

# How the ground truth names things (environments/science/deltas.py), so a world model can name
# what it expects to change the way the diff does. Knowledge of the world's schema, not of a task.
SCIENCE_WORLD_MODEL_HELP = (
    "Entities are named as the game prints them: objects (metal pot, water, sink, thermometer), rooms "
    "(kitchen), agent, inventory, doors 'door to kitchen', animals with their life stage (baby brown bear). "
    "Relations: X in Y (the direct container; agent in ROOM; X in inventory when held), agent focus on X, "
    "'battery anode' connected to 'black wire terminal 1'. Attributes: is open, is activated, temperature "
    "(whole degrees C), state of matter (solid/liquid/gas), name (water -> steam when it boils), life stage, "
    "is dead, is combusting, task status (failed/completed). Most actions take one tick, so heating, filling "
    "and growing go on meanwhile. Cannot be undone: focus on X (focusing on the wrong thing fails the task), "
    "eating, burning, mixing (the ingredients are deleted), deaths."
)


class ScienceOptions(CdwmOptions):
    max_steps: int = Field(100, ge=1, description="agent steps per episode (ScienceWorld's usual 100)")
    split: str = Field("dev", description=f"variations from this split: {', '.join(SPLITS)}")
    tasks: str = Field("", description="comma-separated task names or ids (empty: all 30)")
    variations_per_task: int = Field(2, ge=1, description="the first N variations of the split per task")
    variations: str = Field("", description="explicit variation numbers, e.g. 0,3,12 (overrides variations_per_task)")
    simplification: str = Field("easy", description=f"comma-separated subset of {', '.join(SIMPLIFICATIONS)} (or empty)")
    env_step_limit: int = Field(100, ge=1, description="the simulator's own move limit")
    max_admissible: int = Field(2000, ge=1, description="admissible actions listed at most")

    @field_validator("split")
    @classmethod
    def _known_split(cls, value: str) -> str:
        if value not in SPLITS:
            raise ValueError(f"unknown split; choose one of {', '.join(SPLITS)}")
        return value

    @field_validator("simplification")
    @classmethod
    def _known_simplifications(cls, value: str) -> str:
        unknown = [s for s in value.split(",") if s and s not in SIMPLIFICATIONS]
        if unknown:
            raise ValueError(f"unknown {', '.join(unknown)}; use a comma-separated subset of {', '.join(SIMPLIFICATIONS)}")
        return value


class ScienceTask(EpisodeTask):
    """One ScienceWorld task variation."""

    task_name: str
    task_number: str  # ScienceWorld's task id, e.g. "1-1"
    variation: int
    split: str  # the option's split, or `other` for a variation chosen outside it
    simplification: str


class CdwmScienceSuite(CdwmSuite[ScienceTask]):
    name = "cdwm-science"
    version = "1.0.0"
    description = "CDWM science: ScienceWorld's 30 tasks by split and variation (--agent react|cdwm)"
    mask = SCIENCE_MASK
    world_model_help = SCIENCE_WORLD_MODEL_HELP
    Options = ScienceOptions
    options: ScienceOptions

    def __init__(self, options: ScienceOptions | None = None) -> None:
        super().__init__(options)
        o = self.options
        self.split, self.tasks = o.split, resolve_tasks(o.tasks)
        self.variations_per_task, self.variations = o.variations_per_task, parse_variations(o.variations)
        self.simplification, self.env_step_limit, self.max_admissible = o.simplification, o.env_step_limit, o.max_admissible

    def load_samples(self, corpus: str | None) -> list[Sample]:
        if corpus:
            raise HarnessError(f"--corpus {corpus}: cdwm-science takes its tasks from the installed scienceworld "
                               "package; leave --corpus out and pick tasks with --suite-option tasks=... / split=...")
        from environments.science.env import ScienceEnvironment

        samples = []
        try:
            with ScienceEnvironment() as env:
                for number, task in self.tasks:
                    in_split, total = env.split_variations(task, self.split)
                    if self.variations:
                        bad = [v for v in self.variations if not 0 <= v < total]
                        if bad:
                            raise HarnessError(f"--suite-option variations={','.join(map(str, self.variations))}: "
                                               f"task {task} has variations 0-{total - 1} ({self.split} split: "
                                               f"{_ranges(in_split)}); {', '.join(map(str, bad))} is out of range")
                        chosen = list(self.variations)
                    else:
                        chosen = in_split[: self.variations_per_task]
                    for v in chosen:
                        intent = env.task_description(task, v, self.simplification)
                        samples.append(Sample(id=f"{task}/var{v}", data=ScienceTask(
                            task_id=f"{task}/var{v}", task_name=task, task_number=number, variation=v,
                            split=self.split if v in in_split else "other", simplification=self.simplification,
                            intent=intent)))
        except HarnessError:
            raise
        except Exception as exc:  # no Java, a broken jar: one clear line instead of a py4j traceback
            raise HarnessError(f"cdwm-science: ScienceWorld did not start ({type(exc).__name__}: "
                               f"{str(exc).splitlines()[0][:200] if str(exc) else ''}); install Java 17+ and "
                               "`pip install -e '.[science]'`") from None
        return samples

    def corpus_identity(self, corpus: str | None) -> dict[str, JsonValue]:
        from importlib.metadata import version

        return {"path": None, "source": "scienceworld", "scienceworld_version": version("scienceworld"),
                "split": self.split, "tasks": [t for _, t in self.tasks], "variations_per_task": self.variations_per_task,
                "variations": list(self.variations), "simplification": self.simplification,
                "env_step_limit": self.env_step_limit, "max_admissible": self.max_admissible}

    def make_env(self, sample: Sample, judge: Callable[[str], str] | None) -> Environment:
        from environments.science.env import ScienceEnvironment

        # One step above the agent's limit: the agent's own limit ends the episode (and says so).
        return ScienceEnvironment(simplification=self.simplification, env_step_limit=self.env_step_limit,
                                  max_steps=self.config.max_steps + 1, max_admissible=self.max_admissible)


def resolve_tasks(text: str) -> list[tuple[str, str]]:
    """(task id, task name) of each comma-separated name or id, in the package's order; all 30
    when empty. Needs no JVM: the names come from the package's tasks.json."""
    try:
        from scienceworld.constants import ID2TASK
    except ImportError:
        raise HarnessError("cdwm-science: the scienceworld package is not installed; "
                           "`pip install -e '.[science]'` (and Java 17+)") from None
    by_name = {name: number for number, name in ID2TASK.items()}
    wanted = [t.strip() for t in text.split(",") if t.strip()]
    if not wanted:
        return list(ID2TASK.items())
    out = []
    for item in wanted:
        number = item if item in ID2TASK else by_name.get(item)
        if number is None:
            choices = ", ".join(f"{n} ({name})" for n, name in ID2TASK.items())
            raise HarnessError(f"--suite-option tasks={text}: unknown task {item!r}; use names or ids: {choices}")
        if (number, ID2TASK[number]) not in out:
            out.append((number, ID2TASK[number]))
    return out


def parse_variations(text: str) -> list[int]:
    out = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isdigit():
            raise HarnessError(f"--suite-option variations={text}: {item!r} is not a variation number; "
                               "write numbers like 0,3,12")
        out.append(int(item))
    return sorted(set(out))


def _ranges(values: list[int]) -> str:
    """3,4,5,9 -> "3-5, 9": a split's variations are long runs."""
    out, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            out.append(f"{start}-{v}" if v != start else f"{v}")
            start = None
    return ", ".join(out) or "none"

