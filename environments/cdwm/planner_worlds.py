"""The worlds the planner check plays, and how it asks one "what would this action change" from the
live state without touching it (the oracle world model and the check of the expert's proposals).

Two ways, both exact:
- a deep copy of the live environment plays the actions (MiniGrid: plain Python state);
- a **replay twin** (household, web): a second environment on the same task replays the live one's
  actions (`env.played`) and then the asked ones. Household: its engine's state lives in
  fast-downward's C library, which can be neither copied nor saved and restored
  (`HouseholdEnvironment.twin()`). Web: its state is a Flask + SQLite server behind Chromium; the
  twin has a server, database and browser of its own, on the same task and rule perturbation
  (`WebEnvironment.twin()`, seen through `explore.StableWeb`'s page-order ids so the shown actions
  replay unchanged). Both worlds are deterministic given the task and the actions (tests in
  tests/environments/household and tests/environments/web check a twin's state and deltas against
  the live one's), so the twin's delta is the live world's. The twin moves forward while the asked
  sequences extend what it has played (ReAct checking the plan's next step) and restarts (a reset
  of the twin it keeps: household 0.3 s, web ~0.1 s) only when they branch; a sequence asked twice
  is answered from memory.

The web world's environment is driven from a thread of its own (`WorldCalls`): Playwright's sync API
is bound to the thread that started the browser and refuses to run inside an event loop, while the
planner runs on one. Its browser, server and twin live as long as the process, reused by every
episode (`WebWorld.open`), so the thread does too.

May import: `harness`, `environments.cdwm`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from harness.environment import Delta, Environment
from harness.errors import HarnessError

PLANNER_WORLDS = ("minigrid", "household", "web")
# A world the collector offers but the planner cannot play yet -> why (the error says it).
NOT_WIRED: dict[str, str] = {}
# Worlds whose environment every call must reach on one thread of its own, outside any event loop.
OWN_THREAD = ("web",)
_THREADS: dict[str, ThreadPoolExecutor] = {}
# Per event loop and world: the turn of the one episode its shared environment plays.
_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = weakref.WeakKeyDictionary()
T = TypeVar("T")


class WorldCalls:
    """Calls into a world's environment from the planner's event loop: in place, or on the world's
    own thread (OWN_THREAD; one per world and process)."""

    def __init__(self, world: str) -> None:
        self.world = world
        self.pool = (_THREADS.setdefault(world, ThreadPoolExecutor(1, thread_name_prefix=f"cdwm-{world}"))
                     if world in OWN_THREAD else None)

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        if self.pool is None:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def turn(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """Held for a whole episode: a world on a thread of its own has one environment, reused by
        every episode (the web's browser), so its episodes take turns (`harness eval` may run
        several samples at once)."""
        if self.pool is None:
            return contextlib.nullcontext()
        return _TURNS.setdefault(asyncio.get_running_loop(), {}).setdefault(self.world, asyncio.Lock())

    def now(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the world's thread, from code outside the event loop."""
        return fn(*args) if self.pool is None else self.pool.submit(fn, *args).result()


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
