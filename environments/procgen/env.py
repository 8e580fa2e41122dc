"""`GridEnvironment`: a procedurally generated MiniGrid level behind the CDWM protocol -- the
stand-in for Procgen, which cannot be installed beside this project's numpy 2 (README.md).

Every seed generates a new level (MiniGrid's own generator). The full state is readable, so the
ground-truth delta is exact: the agent (x, y, dir, carrying), doors (open, locked), objects that
are picked up (deleted from the grid, `agent carries X` added) or dropped (created); the level
ending is irreversible -- completed (the task asks for it) or failed (lava, or the step limit).
The observation is the full grid as an object list (MiniGrid's agent sees a 7x7 egocentric view;
the text gives the whole level, which is easier, and says so).
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from environments.cdwm.env import fixed_action_class, screen_action
from harness.environment import ACTION_HELP, STOP, WORLD_MODEL_HELP, AttributeChange, Delta, Observation, Relation, StepResult
from harness.errors import HarnessError

LEVELS = {"doorkey": "MiniGrid-DoorKey-5x5-v0", "lavagap": "MiniGrid-LavaGapS5-v0",
          "doorkey6": "MiniGrid-DoorKey-6x6-v0", "lavagap6": "MiniGrid-LavaGapS6-v0"}
ACTIONS = ("left", "right", "forward", "pickup", "drop", "toggle")
DIRECTIONS = ("east", "south", "west", "north")  # MiniGrid's agent_dir 0..3
WORLD_MODEL_HELP_TEXT = (
    "Entities: agent, objects named type:color (key:yellow, door:yellow, ball:red), goal, level. Attributes: agent "
    "x, y, dir (east/south/west/north); door open, locked (true/false); object x, y; level complete, failed. "
    "Relations: agent carries key:yellow. Picking up deletes the object from the grid and adds 'agent carries'; "
    "dropping creates it. Cannot be undone: the level ending (complete or failed: stepping into lava)."
)


def check_level(level: str) -> str:
    name = level.strip().lower()
    if name not in LEVELS:
        raise HarnessError(f"unknown level family {level!r}: choose one of {', '.join(LEVELS)}")
    return name


# A level's state: entity -> attribute -> value (cells, a direction name, "type:colour", door flags).
Attributes = dict[str, int | str | bool]
GridState = dict[str, Attributes]


def read_state(env: Any) -> GridState:
    """Entity -> attributes of a MiniGrid level (walls, floor and lava are static scenery)."""
    u = env.unwrapped
    state: GridState = {"agent": {"x": int(u.agent_pos[0]), "y": int(u.agent_pos[1]),
                                                  "dir": DIRECTIONS[int(u.agent_dir)]}}
    if u.carrying is not None:
        state["agent"]["carrying"] = f"{u.carrying.type}:{u.carrying.color}"
    for x in range(u.width):
        for y in range(u.height):
            cell = u.grid.get(x, y)
            if cell is None or cell.type in ("wall", "floor", "lava"):
                continue
            name = "goal" if cell.type == "goal" else f"{cell.type}:{cell.color}"
            attrs: Attributes = {"x": x, "y": y}
            if cell.type == "door":
                attrs |= {"open": bool(cell.is_open), "locked": bool(cell.is_locked)}
            state[name] = attrs
    return state


def lava_cells(env: Any) -> list[tuple[int, int]]:
    u = env.unwrapped
    return [(x, y) for x in range(u.width) for y in range(u.height)
            if (c := u.grid.get(x, y)) is not None and c.type == "lava"]


def _carrying(state: GridState) -> str | None:
    held = state["agent"].get("carrying")  # "type:colour" when the agent holds something
    return held if isinstance(held, str) else None


def grid_delta(before: GridState, after: GridState, ended: str | None) -> Delta:
    """The typed delta between two level states; `ended` is "complete" or "failed" when the level ended."""
    held_before, held_after = _carrying(before), _carrying(after)
    created = sorted(set(after) - set(before))
    deleted = sorted(set(before) - set(after))
    attributes = [AttributeChange(entity=e, attribute=k, before=before.get(e, {}).get(k), after=v)
                  for e in sorted(after) for k, v in sorted(after[e].items())
                  if k != "carrying" and before.get(e, {}).get(k) != v]
    added = [Relation(subject="agent", relation="carries", object=held_after)] if held_after and held_after != held_before else []
    removed = [Relation(subject="agent", relation="carries", object=held_before)] if held_before and held_before != held_after else []
    if ended:
        attributes.append(AttributeChange(entity="level", attribute=ended, before=False, after=True))
    return Delta(created=created, deleted=deleted, attributes=attributes, relations_added=added,
                 relations_removed=removed, reversible=ended is None, irreversible_cost=0.0 if ended is None else 1.0)


class GridEnvironment:
    """One MiniGrid level per episode (`reset(task)` with task {"level", "seed"})."""

    def __init__(self) -> None:
        self._env: Any = None
        self.closed = False

    def reset(self, task: dict[str, Any]) -> Observation:
        import gymnasium as gym
        import minigrid

        gym.register_envs(minigrid)
        self.level, self.seed = check_level(str(task.get("level", ""))), int(task.get("seed", 0))
        if self._env is not None:
            self._env.close()
        self._env = gym.make(LEVELS[self.level])
        self._env.reset(seed=self.seed)
        self.state, self.lava = read_state(self._env), lava_cells(self._env)
        self.steps, self.done, self.reward = 0, False, 0.0
        self.outcome: str | None = None
        self.stopped: str | None = None
        return self._observe("The level starts.")

    def step(self, action: str) -> StepResult:
        if self._env is None:
            raise RuntimeError("call reset(task) before step()")
        command, early = screen_action(action, ACTIONS, self._observe, over=self.done, world=self.level)
        if early is not None:
            if early.done and not self.done:  # `stop`
                self.done, self.stopped = True, command
            return early
        self.steps += 1
        _, reward, terminated, truncated, _ = self._env.step(ACTIONS.index(command))
        after = read_state(self._env)
        ended = None
        if terminated or truncated:
            self.done = True
            self.outcome = "complete" if reward > 0 else "failed"
            ended = self.outcome
        delta = grid_delta(self.state, after, ended)
        self.state, self.reward = after, self.reward + float(reward)
        return StepResult(self._observe(f"Reward {reward:g}."), delta, done=self.done, info={"reward": float(reward)})

    def action_class(self, action: str) -> str:
        return fixed_action_class(action)

    def evaluate(self) -> dict[str, JsonValue]:  # the transcript's evaluation (JSON)
        if self._env is None:
            raise RuntimeError("call reset(task) and run the episode before evaluate()")
        return {"success": 1.0 if self.outcome == "complete" else 0.0, "level": self.level, "seed": self.seed,
                "return": self.reward, "steps": self.steps, "outcome": self.outcome, "stopped": self.stopped,
                "backend": "minigrid", "required_irreversible": [{"entity": "level", "attribute": "complete"}]}

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
        self.closed = True

    def _observe(self, feedback: str) -> Observation:
        u = self._env.unwrapped
        lines = [f"{self.level} level (seed {self.seed}), step {self.steps}. {feedback} Mission: {u.mission}.",
                 f"Grid {u.width}x{u.height} (x to the east, y to the south; walls around the edge).", "Objects:"]
        for name in sorted(self.state):
            lines.append(f"- {name}: " + ", ".join(f"{k}={v}" for k, v in sorted(self.state[name].items())))
        if self.lava:
            lines.append("- lava at " + " ".join(f"({x},{y})" for x, y in self.lava))
        lines.append("Actions: " + ", ".join(ACTIONS))
        help_text = ("  left / right: turn; forward: move one cell ahead; pickup / drop: the object ahead; "
                     "toggle: open or close the door ahead (a locked door needs its key)\n  stop [reason]   end the episode")
        return Observation(text="\n".join(lines), action_classes=(*ACTIONS, STOP), admissible=list(ACTIONS),
                           info={ACTION_HELP: help_text, WORLD_MODEL_HELP: WORLD_MODEL_HELP_TEXT, "steps": self.steps})
