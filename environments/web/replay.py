"""Scripted trajectories: the task files' `cdwm.reference_actions` / `cdwm.wrong_actions` name
elements by role and name (`click [@button 'Place order']`) because element ids change between
page loads; each is resolved against the live observation just before it is sent, so replaying
also checks that the accessibility tree exposes the element."""

from __future__ import annotations

import re
from typing import Any

from environments.cdwm.env import StepResult
from environments.web.tasks import substitute

REF_RE = re.compile(r"\[@(\w+) '((?:[^'\\]|\\.)*)'\]")
LINE_RE = re.compile(r"^\s*\[(\d+)\] (\w+) '((?:[^'\\]|\\.)*)'")


class ReplayError(RuntimeError):
    pass


def resolve(action: str, observation: str) -> str:
    """Replace each `[@role 'name']` by `[id]` of the first element with that role and name."""

    def sub(m: re.Match[str]) -> str:
        role, name = m[1], m[2]
        for line in observation.splitlines():
            hit = LINE_RE.match(line)
            if hit and hit[2] == role and hit[3] == name:
                return f"[{hit[1]}]"
        raise ReplayError(f"no {role} {name!r} on the page for action {action!r}\n{observation}")

    return REF_RE.sub(sub, action)


def replay(env: Any, task: dict[str, Any], actions: list[str]) -> tuple[list[StepResult], dict[str, Any]]:
    """Reset, run the actions (stopping with an empty answer if the script has no stop), evaluate."""
    obs = env.reset(task)
    actions = substitute({"task_id": task["task_id"], "actions": list(actions)}, env.site_urls)["actions"]
    results: list[StepResult] = []
    for raw in actions:
        result = env.step(resolve(raw, obs.text))
        if not result.valid:
            raise ReplayError(f"task {task['task_id']}: {raw!r} was refused: {result.info.get('error')}")
        results.append(result)
        obs = result.observation
        if result.done:
            break
    if not results or not results[-1].done:
        results.append(env.step("stop []"))
    return results, env.evaluate()
