"""The environment protocol every CDWM environment offers its agents (web, household, science).

It lives in the core (`harness.environment`): observations, step results, the synchronous
`Environment` contract (`reset`, `step`, `action_class`, `evaluate`, `close`) and `ThreadedEnv`,
which drives one from asyncio. This module keeps the names the environment families import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.environment import (
    ACTION_HELP,
    STOP,
    WORLD_MODEL_HELP,
    AsyncEnvironment,
    Delta,
    Environment,
    EnvironmentClosed,
    Observation,
    StepResult,
    ThreadedEnv,
)

CdwmEnvironment = Environment  # the name the CDWM suites and tests use

__all__ = ["ACTION_HELP", "STOP", "WORLD_MODEL_HELP", "AsyncEnvironment", "CdwmEnvironment", "Environment",
           "EnvironmentClosed", "Observation", "StepResult", "ThreadedEnv", "screen_action"]


def fixed_action_class(action: str) -> str:
    """The action class in a world with a fixed action list: the normalised command, or `stop`."""
    word = " ".join(action.strip().lower().split())
    return STOP if word.startswith(STOP) else word


def screen_action(action: str, actions: Sequence[str], observe: Callable[[str], Observation], *, over: bool,
                  world: str) -> tuple[str, StepResult | None]:
    """What a world with a fixed action list checks before it plays an action: the normalised
    command, and the result that ends the step early (the episode is over, `stop`, or not one of
    `actions`); None: play it. A stop result is `done` on a live episode: the caller records it."""
    command = " ".join(action.strip().lower().split())
    if over:
        return command, StepResult(observe("The episode is over."), Delta(), done=True, valid=False,
                                   info={"error": "the episode is over"})
    if command.startswith(STOP):
        return command, StepResult(observe("You stop."), Delta(), done=True)
    if command not in actions:
        return command, StepResult(observe("Nothing happens."), Delta(), done=False, valid=False,
                                   info={"error": f"not an action of {world}: {command[:40]!r}; use one of "
                                                  f"{', '.join(actions)}"})
    return command, None
