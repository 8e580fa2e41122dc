"""The worlds the planner check plays, and how it asks one "what would this action change" from the
live state without touching it (the oracle world model and the check of the expert's proposals).

Two ways, both exact:
- a deep copy of the live environment plays the actions (MiniGrid: plain Python state);
- a **replay twin** (the household world: its engine's state lives in fast-downward's C library,
  which can be neither copied nor saved and restored): a second environment on the same task
  replays the live one's actions (`env.played`) and then the asked ones. The engine is deterministic
  given the task (tests/environments/household checks a twin's state against the live one's), so the
  twin's delta is the live world's. The twin moves forward while the asked sequences extend what it
  has played (ReAct checking the plan's next step) and restarts (an engine reset on the loaded game,
  0.3 s) only when they branch; a sequence asked twice is answered from memory.

The web world is not wired: its environment drives Chromium against a local server whose state is a
process of its own, so neither a copy nor a cheap twin exists yet (`refuse_world` says so).

May import: `harness`, `environments.cdwm`.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

from harness.environment import Delta, Environment
from harness.errors import HarnessError

PLANNER_WORLDS = ("minigrid", "household")
NOT_WIRED = {
    "web": "the web world's state is a server process behind Chromium, which the oracle and the proposal check "
           "can neither copy nor replay cheaply yet",
}


def refuse_world(world: str, option: str = "--world") -> None:
    """A clear error for a world the planner does not play (naming the option and the way out)."""
    if world in PLANNER_WORLDS:
        return
    why = NOT_WIRED.get(world, "not a world the planner check plays")
    raise HarnessError(f"{option} {world}: {why}; use one of {', '.join(PLANNER_WORLDS)}")


class Ledger(Protocol):
    """The environment's own delta of the last of `actions`, played from the live state (which
    stays untouched)."""

    def __call__(self, actions: list[str]) -> Delta: ...

    def close(self) -> None: ...


class CopyLedger:
    """Plays the actions on a deep copy of the live environment."""

    def __init__(self, env: Environment) -> None:
        self.env = env

    def __call__(self, actions: list[str]) -> Delta:
        try:
            twin = copy.deepcopy(self.env)
        except (TypeError, ValueError) as exc:  # e.g. ctypes handles in an engine without `twin()`
            raise HarnessError(
                f"--world: the ledger check plays each first candidate on a copy of the environment, and "
                f"{type(self.env).__name__} can be neither copied ({exc}) nor replayed (no `twin()`); "
                f"use one of {', '.join(PLANNER_WORLDS)}"
            ) from exc
        result = None
        for action in actions:
            result = twin.step(action)
        return result.delta if result is not None else Delta()

    def close(self) -> None:
        pass


class ReplayLedger:
    """Plays the live environment's actions, then the asked ones, on a twin (`env.twin()`)."""

    def __init__(self, env: Any) -> None:
        self.env = env  # has `played` (the actions since reset) and `twin()`
        self._twin: Any = None
        self._at: tuple[str, ...] = ()  # what the twin has played since its reset
        self._memo: dict[tuple[str, ...], Delta] = {}  # a played sequence -> its last action's delta
        self.restarts = 0

    def __call__(self, actions: list[str]) -> Delta:
        if not actions:
            return Delta()
        target = tuple(self.env.played) + tuple(actions)
        if target in self._memo:
            return self._memo[target]
        if self._twin is not None and self._at != target[: len(self._at)]:
            self._twin.close()  # its engine goes back to the pool, still loaded: the next twin only resets it
            self._twin, self.restarts = None, self.restarts + 1
        if self._twin is None:
            self._twin, self._at = self.env.twin(), ()
        for action in target[len(self._at):]:
            self._memo[self._at + (action,)] = self._twin.step(action).delta
            self._at += (action,)
        return self._memo[target]

    def close(self) -> None:
        if self._twin is not None:
            self._twin.close()
            self._twin = None


def ledger_for(env: Environment) -> Ledger:
    """The exact ledger a world offers: a replay twin where the environment has one, else a copy."""
    return ReplayLedger(env) if callable(getattr(env, "twin", None)) else CopyLedger(env)
