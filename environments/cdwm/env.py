"""The environment protocol every CDWM environment offers its agents (web, household, science).

It lives in the core (`harness.environment`): observations, step results, the synchronous
`Environment` contract (`reset`, `step`, `action_class`, `evaluate`, `close`) and `ThreadedEnv`,
which drives one from asyncio. This module keeps the names the environment families import.
"""

from __future__ import annotations

from harness.environment import (
    ACTION_HELP,
    STOP,
    WORLD_MODEL_HELP,
    AsyncEnvironment,
    Environment,
    EnvironmentClosed,
    Observation,
    StepResult,
    ThreadedEnv,
)

CdwmEnvironment = Environment  # the name the CDWM suites and tests use

__all__ = ["ACTION_HELP", "STOP", "WORLD_MODEL_HELP", "AsyncEnvironment", "CdwmEnvironment", "Environment",
           "EnvironmentClosed", "Observation", "StepResult", "ThreadedEnv"]
