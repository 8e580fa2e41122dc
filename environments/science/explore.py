"""The science world's exploring policy for `harness cdwm collect` (environments/cdwm/collect.py):
ScienceWorld's gold path for the task variation, followed on after any detour (the simulator has
no replanner; a gold action a detour made impossible is answered as such and changes nothing),
and, when the collector asks for an irreversible action, a focus on an object the gold path never
focuses on (ScienceWorld fails the task on a wrong focus: the world's own irreversible commitment).
No model is called. Deltas are `ScienceEnvironment`'s diff of the simulator's object tree.

Task types are ScienceWorld's 30 task names; train plays the package's `train` variations and
validation its `dev` ones (the package's own split). No rule perturbation is offered (it would
mean editing the simulator's Scala rules).

Not reproducible by seed: ScienceWorld's gold-path generator makes unseeded choices (two runs of
grow-fruit variation 37 began with `open door to hallway` and `open door to outside`), so a
seed fixes the tasks and the mix, not every gold action; a resumed collection is valid, but its
science rows need not equal an uninterrupted run's.

It lives here, not in `cdwm/`, because the CDWM environment folders import `cdwm`, never the
reverse (the acyclic import contract); `cdwm/collect.py` names this module by string.
"""

from __future__ import annotations

from typing import TypedDict

from environments.science.env import ScienceEnvironment

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
ADMISSIBLE_ROWS = 200  # the first of the simulator's list (moves, opening, switching, taking come first)


class ScienceSpec(TypedDict):
    """One collection episode: the task and the variation (from the package's train or dev split)."""

    task_name: str
    variation: int


class ScienceEpisode:
    def __init__(self, spec: ScienceSpec, env: ScienceEnvironment) -> None:
        self.env = env
        self.observation = env.reset(
            {"task_name": spec["task_name"], "variation": spec["variation"], "gold_path": True}
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
    perturbations: dict[str, tuple[str, ...]] = {}  # none offered (module docstring)
    max_steps = 30

    def __init__(self) -> None:
        self._env: ScienceEnvironment | None = None
        self._variations: dict[tuple[str, str], list[int]] = {}

    def _live(self) -> ScienceEnvironment:
        if self._env is None or self._env._closed:
            self._env = ScienceEnvironment(max_steps=self.max_steps + 10)
        return self._env

    def spec(self, task_type: str, index: int, seed: int, perturbation: str | None) -> ScienceSpec:
        # Even indices (train, held-out) play the package's train variations, odd ones (validation) its dev ones.
        split = "dev" if index % 2 else "train"
        key = (task_type, split)
        if key not in self._variations:
            self._variations[key] = self._live().split_variations(task_type, split)[0]
        pool = self._variations[key]
        return {"task_name": task_type, "variation": pool[(index // 2 + seed) % len(pool)]}

    def open(self, spec: ScienceSpec) -> ScienceEpisode:
        return ScienceEpisode(spec, self._live())

    def shutdown(self) -> None:
        """Stop the JVM (it also stops at exit)."""
        if self._env is not None:
            self._env.close()
            self._env = None


WORLD = ScienceWorld()
