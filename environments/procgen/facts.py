"""MiniGrid's observation text read back into the level state, so that the diff of two observations
is a `Delta` in the ledger's own vocabulary -- what the generative world-model baseline needs
(`environments/cdwm/generative_model.py`: it predicts the next observation, and its delta is the
diff of the facts read from this one and from the predicted one).

The observation (`env.GridEnvironment._observe`) lists every entity `read_state` records, one
`- name: key=value, ...` line each, and the lava cells; reading those lines gives back the same
`GridState`, and `env.grid_delta` -- the function the ledger itself uses -- turns two states into
the delta. What the text does not say is the level's end: it is inferred from the agent's cell
(on lava: `failed`; on the goal: `complete`), which is exactly when MiniGrid ends these levels
before their step limit. The step limit's end (MiniGrid truncates at 4-10 x width x height steps)
is not read: the planner and the collector stop long before it.

May import: `harness`, `environments.cdwm`, this folder.
"""

from __future__ import annotations

import re

from environments.procgen.env import Attributes, GridState, grid_delta
from harness.environment import Delta

_ENTITY = re.compile(r"^- ([a-z]+(?::[a-z]+)?): (.+)$")
_LAVA = re.compile(r"\((\d+),(\d+)\)")


def _value(text: str) -> int | str | bool:
    """A value as `read_state` stored it: a cell index, a flag, or a name."""
    if text in ("True", "False"):
        return text == "True"
    return int(text) if text.lstrip("-").isdigit() else text


def read_observation(text: str) -> tuple[GridState, set[tuple[int, int]]] | None:
    """(the level state, the lava cells) an observation's text lists; None when it lists no agent
    (not a MiniGrid observation, or a predicted one that lost the agent's line)."""
    state: GridState = {}
    lava: set[tuple[int, int]] = set()
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("- lava at "):
            lava |= {(int(x), int(y)) for x, y in _LAVA.findall(line)}
            continue
        m = _ENTITY.match(line)
        if m is None:
            continue
        attrs: Attributes = {}
        for part in m.group(2).split(", "):
            key, eq, value = part.partition("=")
            if eq:
                attrs[key.strip()] = _value(value.strip())
        state[m.group(1)] = attrs
    agent = state.get("agent", {})
    if not isinstance(agent.get("x"), int) or not isinstance(agent.get("y"), int):
        return None
    return state, lava


def ending(state: GridState, lava: set[tuple[int, int]]) -> str | None:
    """The level's end the state shows: the agent on lava (`failed`) or on the goal (`complete`)."""
    agent = state["agent"]
    at = (agent.get("x"), agent.get("y"))
    if at in lava:
        return "failed"
    goal = state.get("goal")
    if goal is not None and (goal.get("x"), goal.get("y")) == at:
        return "complete"
    return None


def observation_delta(before: str, after: str) -> Delta | None:
    """The delta between two observations' facts, irreversible as the ledger's is (the level's end);
    None when either text is not readable. The lava cells are scenery: those of either text count."""
    first, second = read_observation(before), read_observation(after)
    if first is None or second is None:
        return None
    (old, lava_before), (new, lava_after) = first, second
    lava = lava_before | lava_after
    # A level that had already ended does not end again (MiniGrid accepts no step after its end).
    ended = ending(new, lava) if ending(old, lava) is None else None
    return grid_delta(old, new, ended)
