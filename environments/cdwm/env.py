"""The interface every CDWM environment offers its agents (web, household, science).

An agent sees an `Observation` (text, plus the action classes it may use and, where the world can
list them, admissible actions), sends one action string, and gets a `StepResult` whose `delta` is
the ground truth of what that action changed (the environment's ledger, never shown to the agent
before it acts). Environments are always closed (`close()`), also on errors and Ctrl-C.

Action strings follow the environment's own action space (the web world: WebArena's
`click [12]`, `type [7] [text] [1]`, `goto [url]`, `stop [answer]`, ...). `action_class(action)`
names the class of an action (e.g. "click", "type", "stop"), the key of CDWM's per-class mask.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from environments.cdwm.deltas import Delta

STOP = "stop"


@dataclass
class Observation:
    text: str  # what the agent reads (web: URL + accessibility tree with element ids)
    action_classes: tuple[str, ...] = ()  # the classes of action this environment accepts
    admissible: list[str] | None = None  # concrete admissible actions, where the world can list them
    screenshot_png: bytes | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepResult:
    observation: Observation
    delta: Delta  # ground truth: what the action changed (empty for reads and invalid actions)
    done: bool  # the episode ended (stop action, task end, step limit)
    valid: bool = True  # False when the action could not be parsed or executed (the error is in info)
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class CdwmEnvironment(Protocol):
    def reset(self, task: dict[str, Any]) -> Observation: ...

    def step(self, action: str) -> StepResult: ...

    def action_class(self, action: str) -> str: ...

    def evaluate(self) -> dict[str, Any]:
        """After the episode: {"success": float in [0,1], "required_irreversible": [...], ...}."""
        ...

    def close(self) -> None: ...
