"""The household world's exploring policy for `harness cdwm collect` (environments/cdwm/collect.py):
the task's gold plan, ALFWorld's planner expert after any detour, and a way to an irreversible
action (slicing) when the collector asks for one. No model is called.

It lives here, not in `cdwm/`, because the CDWM environment folders import `cdwm`, never the
reverse (the acyclic import contract); `cdwm/collect.py` names this module by string.
"""

from __future__ import annotations

from typing import TypedDict

from environments.household.catalog import OBJECTS, SLICE
from environments.household.env import HouseholdEnvironment
from environments.household.generator import SHORT, generate_task

LONG = {short: long for long, short in SHORT.items()}
# Engine names are the lower-cased type plus a number ("apple 1"); these can be sliced.
SLICEABLE = tuple(sorted(name.lower() for name, o in OBJECTS.items() if SLICE in o.affords))


class HouseholdSpec(TypedDict):
    """One collection episode: the generator's seed, task type (short name) and index."""

    seed: int
    type: str
    index: int


class HouseholdEpisode:
    def __init__(self, spec: HouseholdSpec, max_steps: int) -> None:
        self.task = generate_task(int(spec["seed"]), LONG[spec["type"]], int(spec["index"]))
        self.intent = self.task.intent
        self.env = HouseholdEnvironment(max_steps=max_steps)
        self.observation = self.env.reset(self.task.model_dump())
        self._plan = [self.env.render(c) for c in self.task.gold_plan]
        self._stale = False

    def admissible(self) -> list[str]:
        # Sorted: the engine's order is not part of the seed's contract, the collector's choice is.
        return sorted(c for c in self.env.admissible if c != "help")

    def detoured(self) -> None:
        """An action off the plan was played: the rest of the plan may no longer fit."""
        self._stale = True

    def lost(self) -> bool:
        """Whether the goal is out of reach: an object of the target's type was sliced (the only
        irreversible change a generated task's goal cannot survive). Checked here because
        fast-downward, asked to replan an unsolvable state, searches the whole space (minutes)."""
        prefix = self.task.target.lower() + " "
        return any(p == "issliced" and args[0].startswith(prefix) for p, args in self.env.world_facts)

    def expert(self) -> str | None:
        """The next plan command; the planner replans after a detour (None: the goal is lost)."""
        if self._stale or not self._plan or self._plan[0] not in set(self.env.admissible):
            if self.lost():
                return None
            self._plan, self._stale = self.env.expert_plan(), False
        return self._plan.pop(0) if self._plan else None

    def toward_irreversible(self) -> str | None:
        """A step towards slicing something: slice when possible, else put down what is held, fetch
        a knife, go to a sliceable object with it. None when no way is open (no knife here)."""
        adm = self.admissible()
        slicing = [c for c in adm if c.startswith("slice ")]
        if slicing:
            return slicing[0]
        facts = self.env.world_facts
        held = [args[1] for p, args in facts if p == "holds"]
        where = {args[0]: args[1] for p, args in facts if p == "inreceptacle"}
        if any(h.startswith("knife") for h in held):
            targets = sorted(r for o, r in where.items() if o.startswith(SLICEABLE))
        elif held:
            # Hands full: put the object down here first (a knife needs a free hand).
            put = [c for c in adm if c.startswith("move ")]
            return put[0] if put else None
        else:
            take = [c for c in adm if c.startswith("take knife")]
            if take:
                return take[0]
            targets = sorted(r for o, r in where.items() if o.startswith("knife"))
        moves = [f"go to {r}" for r in targets if f"go to {r}" in adm]
        return moves[0] if moves else None

    def close(self) -> None:
        self.env.close()


class HouseholdWorld:
    name = "household"
    task_types = tuple(SHORT.values())  # place, light, clean, heat, cool, two
    default_heldout = ("cool",)
    # A rule perturbation here means editing ALFWorld's PDDL domain and text grammar (shared by
    # every task, parsed by fast-downward's translator): not cheap, so the world offers none.
    perturbations: dict[str, tuple[str, ...]] = {}
    max_steps = 30

    def spec(self, task_type: str, index: int, seed: int, perturbation: str | None) -> HouseholdSpec:
        return {"seed": seed, "type": task_type, "index": index}

    def open(self, spec: HouseholdSpec) -> HouseholdEpisode:
        return HouseholdEpisode(spec, self.max_steps)


WORLD = HouseholdWorld()
