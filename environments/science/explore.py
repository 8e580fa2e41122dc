"""The science world's exploring policy for `harness cdwm collect` (environments/cdwm/collect.py):
ScienceWorld's gold path for the task variation, followed on after any detour (the simulator has
no replanner; a gold action a detour made impossible is answered as such and changes nothing),
and, when the collector asks for an irreversible action, a focus on an object the gold path never
focuses on (ScienceWorld fails the task on a wrong focus: the world's own irreversible commitment).
No model is called. Deltas are `ScienceEnvironment`'s diff of the simulator's object tree.

Task types are ScienceWorld's 30 task names; train plays the package's `train` variations and
validation its `dev` ones (the package's own split).

Rule perturbation `put_closes` (`environments.science.env.RULES`: set inside the simulator, so the
diff records it): a closable container that something is moved into closes; in training it stays
open. It is played on the task types whose gold paths put a pot into a freezer or a blast
furnace (`PUT_TASKS`, from their gold paths), so the changed rule is met, not only possible.

Reproducible by seed: the simulator's hash sets of objects used to iterate in an order random per
JVM (two runs of one variation's gold path could differ); `ScienceEnvironment` starts the JVM with
a constant identity hash, so a seed fixes every row and a resumed collection equals an
uninterrupted one (see env.py).

It lives here, not in `cdwm/`, because the CDWM environment folders import `cdwm`, never the
reverse (the acyclic import contract); `cdwm/collect.py` names this module by string.
"""

from __future__ import annotations

from typing import TypedDict

from environments.science.env import RULES, ScienceEnvironment, check_rule

# ScienceWorld's task names (scienceworld.constants.ID2TASK), written out so that listing them
# needs no JVM.
TASKS = (
    "boil",
    "melt",
    "freeze",
    "change-the-state-of-matter-of",
    "use-thermometer",
    "measure-melting-point-known-substance",
    "measure-melting-point-unknown-substance",
    "power-component",
    "power-component-renewable-vs-nonrenewable-energy",
    "test-conductivity",
    "test-conductivity-of-unknown-substances",
    "find-living-thing",
    "find-non-living-thing",
    "find-plant",
    "find-animal",
    "grow-plant",
    "grow-fruit",
    "chemistry-mix",
    "chemistry-mix-paint-secondary-color",
    "chemistry-mix-paint-tertiary-color",
    "lifespan-longest-lived",
    "lifespan-shortest-lived",
    "lifespan-longest-lived-then-shortest-lived",
    "identify-life-stages-1",
    "identify-life-stages-2",
    "inclined-plane-determine-angle",
    "inclined-plane-friction-named-surfaces",
    "inclined-plane-friction-unnamed-surfaces",
    "mendelian-genetics-known-plant",
    "mendelian-genetics-unknown-plant",
)
# Task types whose gold paths move something into a closable container (freezer, blast furnace),
# read from 4 train variations each: where `put_closes` changes what the plan does.
PUT_TASKS = (
    "boil",
    "melt",
    "freeze",
    "change-the-state-of-matter-of",
    "measure-melting-point-known-substance",
    "measure-melting-point-unknown-substance",
)
ADMISSIBLE_ROWS = 200  # the first of the simulator's list (moves, opening, switching, taking come first)


class ScienceSpec(TypedDict):
    """One collection episode: the task, the variation (from the package's train or dev split) and
    the rule perturbation (or None)."""

    task_name: str
    variation: int
    perturbation: str | None


class ScienceEpisode:
    def __init__(self, spec: ScienceSpec, env: ScienceEnvironment) -> None:
        self.env = env
        self.observation = env.reset(
            {
                "task_name": spec["task_name"],
                "variation": spec["variation"],
                "gold_path": True,
                "perturbation": spec.get("perturbation"),
            }
        )
        self.intent = env.description
        self._plan = [a for a in env.gold_path or [] if not a.startswith("ERROR")]
        self._gold_focus = {a for a in self._plan if a.startswith("focus on ")}

    def admissible(self) -> list[str]:
        return self.env.admissible_actions()[:ADMISSIBLE_ROWS]

    def detoured(self) -> None:
        pass  # the gold path goes on (module docstring)

    def expert(self) -> str | None:
        return self._plan.pop(0) if self._plan else None

    def toward_irreversible(self) -> str | None:
        wrong = [a for a in self.env.admissible_actions() if a.startswith("focus on ") and a not in self._gold_focus]
        return wrong[0] if wrong else None

    def won(self, done: bool) -> bool:
        # evaluate() ends the episode (it replays the gold path): asked only once it is over.
        return done and self.env.evaluate().get("success", 0.0) >= 1.0

    def close(self) -> None:
        pass  # the JVM is the world's, reused by the next episode


class ScienceWorld:
    name = "science"
    task_types = TASKS
    default_heldout = ("chemistry-mix", "chemistry-mix-paint-secondary-color", "chemistry-mix-paint-tertiary-color")
    perturbations = {"put_closes": PUT_TASKS}
    rule_changes = RULES  # what each changes (the dataset card says it)
    max_steps = 30

    def __init__(self) -> None:
        self._env: ScienceEnvironment | None = None
        self._variations: dict[tuple[str, str], list[int]] = {}

    def _live(self) -> ScienceEnvironment:
        if self._env is None or self._env._closed:
            self._env = ScienceEnvironment(max_steps=self.max_steps + 10)
        return self._env

    def spec(self, task_type: str, index: int, seed: int, perturbation: str | None) -> ScienceSpec:
        check_rule(perturbation)  # before any JVM starts
        # Even indices (train, held-out) play the package's train variations, odd ones (validation) its dev ones.
        split = "dev" if index % 2 else "train"
        key = (task_type, split)
        if key not in self._variations:
            self._variations[key] = self._live().split_variations(task_type, split)[0]
        pool = self._variations[key]
        return {
            "task_name": task_type,
            "variation": pool[(index // 2 + seed) % len(pool)],
            "perturbation": perturbation,
        }

    def open(self, spec: ScienceSpec) -> ScienceEpisode:
        return ScienceEpisode(spec, self._live())

    def shutdown(self) -> None:
        """Stop the JVM (it also stops at exit)."""
        if self._env is not None:
            self._env.close()
            self._env = None


WORLD = ScienceWorld()
