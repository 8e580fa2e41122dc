"""The MiniGrid world's exploring policy for `harness cdwm collect` (environments/cdwm/collect.py):
a breadth-first planner over the full level state (DoorKey and LavaGap need no more), to the goal
or, when the collector asks for an irreversible action, into lava; and the held-out rule
perturbation `key_consumed` (unlocking a door uses the key up). No model is called.

BabyAI's bot (`minigrid.utils.baby_ai_bot`) follows a BabyAI mission's instructions; DoorKey and
LavaGap have none, so it cannot play these levels -- hence a planner of our own.
It lives here, not in `cdwm/`, because the CDWM environment folders import `cdwm`, never the
reverse (the acyclic import contract); `cdwm/collect.py` names this module by string.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, TypedDict, cast

import gymnasium as gym

from environments.procgen.env import ACTIONS, LEVELS, GridEnvironment

if TYPE_CHECKING:
    from minigrid.minigrid_env import MiniGridEnv

DIR_VEC = ((1, 0), (0, 1), (-1, 0), (0, -1))  # MiniGrid's agent_dir 0..3
# The planner's state: x, y, direction, key colour held, keys taken and doors opened on the way.
State = tuple[int, int, int, str | None, frozenset[tuple[int, int]], frozenset[tuple[int, int]]]


class KeyConsumed(gym.Wrapper):
    """Rule perturbation: unlocking a door uses the key up (it leaves the agent's hands and the
    level). In training a key stays in hand, so a model must learn a new effect of `toggle`."""

    def step(self, action: int) -> Any:
        from minigrid.core.world_object import Door

        u = cast("MiniGridEnv", self.env.unwrapped)  # the wrapper is only put over MiniGrid levels
        ahead = u.grid.get(*u.front_pos)
        door = ahead if isinstance(ahead, Door) else None  # (MiniGrid's only type "door")
        was_locked = door is not None and door.is_locked
        result = self.env.step(action)
        if door is not None and was_locked and not door.is_locked and u.carrying is not None and u.carrying.type == "key":
            u.carrying = None
        return result


PERTURBATIONS = {"key_consumed": KeyConsumed}


def plan(u: MiniGridEnv, target: str = "goal") -> list[str] | None:
    """Shortest action list from the level's current state that steps onto `target` ("goal" or
    "lava"); None when none exists. State: position, direction, key colour held, keys taken and
    doors opened on the way (the only changes these levels allow)."""
    from minigrid.core.world_object import Door  # MiniGrid's only type "door"

    start: State = (int(u.agent_pos[0]), int(u.agent_pos[1]), int(u.agent_dir),
             u.carrying.color if u.carrying is not None and u.carrying.type == "key" else None,
             frozenset(), frozenset())
    parents: dict[State, tuple[State, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        x, y, d, carry, taken, opened = state
        fx, fy = x + DIR_VEC[d][0], y + DIR_VEC[d][1]
        cell = u.grid.get(fx, fy)
        if cell is not None and cell.type == "key" and (fx, fy) in taken:
            cell = None
        for action in ("forward", "left", "right", "pickup", "toggle"):
            nxt: State | None = None
            if action == "left":
                nxt = (x, y, (d - 1) % 4, carry, taken, opened)
            elif action == "right":
                nxt = (x, y, (d + 1) % 4, carry, taken, opened)
            elif action == "forward":
                if cell is not None and cell.type == target:
                    path: list[str] = [action]
                    while (parent := parents[state]) is not None:
                        state, step = parent
                        path.append(step)
                    return path[::-1]
                if cell is None or (isinstance(cell, Door) and (cell.is_open or (fx, fy) in opened)):
                    nxt = (fx, fy, d, carry, taken, opened)
            elif action == "pickup" and cell is not None and cell.type == "key" and carry is None:
                nxt = (x, y, d, cell.color, taken | {(fx, fy)}, opened)
            elif (action == "toggle" and isinstance(cell, Door) and not cell.is_open
                  and (fx, fy) not in opened and (not cell.is_locked or carry == cell.color)):
                nxt = (x, y, d, carry, taken, opened | {(fx, fy)})
            if nxt is not None and nxt not in parents:
                parents[nxt] = (state, action)
                queue.append(nxt)
    return None


class GridSpec(TypedDict):
    """One collection episode: the level, MiniGrid's seed, and the rule perturbation (or None)."""

    level: str
    seed: int
    perturbation: str | None


class GridEpisode:
    def __init__(self, spec: GridSpec) -> None:
        self.env = GridEnvironment()
        self.observation = self.env.reset({"level": spec["level"], "seed": spec["seed"]})
        if perturbation := spec.get("perturbation"):
            # GridEnvironment steps whatever `_env` holds; the wrapper changes one rule under it.
            self.env._env = PERTURBATIONS[perturbation](self.env._env)
        self.intent = str(self.env._env.unwrapped.mission)

    def admissible(self) -> list[str]:
        return list(ACTIONS)

    def detoured(self) -> None:
        pass  # the planner reads the level afresh every step

    def expert(self) -> str | None:
        path = plan(self.env._env.unwrapped, "goal")
        return path[0] if path else None

    def toward_irreversible(self) -> str | None:
        path = plan(self.env._env.unwrapped, "lava")
        return path[0] if path else None

    def close(self) -> None:
        self.env.close()


class GridWorld:
    name = "minigrid"
    task_types = tuple(LEVELS)  # doorkey, lavagap, doorkey6, lavagap6
    default_heldout = ("lavagap6",)
    # perturbation -> the task types it changes anything in (a level with a locked door)
    perturbations = {"key_consumed": ("doorkey", "doorkey6")}
    max_steps = 60

    def spec(self, task_type: str, index: int, seed: int, perturbation: str | None) -> GridSpec:
        # MiniGrid's own generator makes the level from its seed; mix the collection seed in.
        return {"level": task_type, "seed": (index + seed * 1_000_003) % (1 << 31), "perturbation": perturbation}

    def open(self, spec: GridSpec) -> GridEpisode:
        return GridEpisode(spec)


WORLD = GridWorld()
