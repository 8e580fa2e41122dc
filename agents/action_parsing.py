"""Reading a model's reply as data: the action(s) it names, the JSON object it wrote, and the
observation text cut to a prompt budget.

Nothing here executes or interprets model text beyond string matching and `json.loads`; an action
string is handed to the environment's own action API, which validates its arguments.
"""

from __future__ import annotations

import re
from typing import Any

from harness.environment import ACTION_HELP
from harness.structured import extract_json_object  # re-exported: the first JSON object of a reply

__all__ = ["action_help", "extract_json_object", "parse_actions", "truncate_observation"]

_FENCE = re.compile(r"```(?:[a-zA-Z]*\n)?(.*?)```", re.S)
_PREFIX = re.compile(r"^\s*(?:[-*>]+\s*|\d+[.)]\s*|(?:next\s+)?action\s*\d*\s*[:=]\s*|`)+", re.I)


def action_help(action_classes: tuple[str, ...], info: dict[str, Any] | None = None,
                default: str | None = None) -> str:
    """How to write the actions, as the environment says it: its observation's
    `info["action_help"]`, else the help it gave the agent's config (`default`), else the bare
    list of its action classes."""
    given = info.get(ACTION_HELP) if info else None
    if isinstance(given, str):
        return given
    if default:
        return default
    return "\n".join(f"  {c}" for c in action_classes)


def _class_of(line: str, classes: list[str]) -> str | None:
    low = line.lower()
    for cls in classes:  # longest first, so `go_back` wins over a class `go`
        if low.startswith(cls) and (len(low) == len(cls) or not (low[len(cls)].isalnum() or low[len(cls)] == "_")):
            return cls
    return None


def _clean(line: str) -> str:
    line = _PREFIX.sub("", line.strip()).strip().strip("`").strip()
    # Bracketed syntax ends at its last bracket: `stop [Sam Lee] because he wrote it` -> `stop [Sam Lee]`.
    first, last = line.find("["), line.rfind("]")
    if 0 <= first < last:
        return line[: last + 1]
    return line.rstrip(".")


def parse_actions(text: str, action_classes: tuple[str, ...], admissible: list[str] | None = None,
                  limit: int = 1) -> list[str]:
    """Up to `limit` distinct actions named in `text`, in order: lines (or fenced blocks) that
    start with one of the environment's action classes, after list markers and an `Action:`
    label. Where the environment lists admissible actions, only those count (case-insensitive)."""
    classes = sorted({c.lower() for c in action_classes}, key=len, reverse=True)
    chunks = [m.group(1) for m in _FENCE.finditer(text)] + [_FENCE.sub("\n", text)]
    allowed = {a.lower(): a for a in admissible} if admissible else None
    found: list[str] = []
    for chunk in chunks:
        for raw in chunk.splitlines():
            line = _clean(raw)
            if not line:
                continue
            if allowed is not None:
                action = allowed.get(line.lower())
            else:
                cls = _class_of(line, classes)
                action = (cls + line[len(cls):]) if cls else None  # the class in canonical case
            if action and action not in found:
                found.append(action)
                if len(found) >= limit:
                    return found
    return found


def truncate_observation(text: str, budget_chars: int, head_share: float = 0.25) -> str:
    """`text` cut to about `budget_chars` at line boundaries: the first lines (URL, title, where
    the agent is) and the tail (on long pages the forms and buttons that act come last), with a
    marker saying how many lines were left out. A single overlong line is cut by characters."""
    if len(text) <= budget_chars:
        return text
    lines = text.splitlines()
    head_budget = int(budget_chars * head_share)
    head, used = [], 0
    for line in lines:
        if used + len(line) + 1 > head_budget:
            break
        head.append(line)
        used += len(line) + 1
    tail, tail_used = [], 0
    for line in reversed(lines[len(head):]):
        if used + tail_used + len(line) + 1 > budget_chars - 40:
            break
        tail.append(line)
        tail_used += len(line) + 1
    tail.reverse()
    omitted = len(lines) - len(head) - len(tail)
    if not head and not tail:  # one giant line
        return text[: budget_chars // 4] + "\n[... cut ...]\n" + text[-(budget_chars - budget_chars // 4 - 20):]
    return "\n".join(head + [f"[... {omitted} lines omitted ...]"] + tail)
