"""WebArena's action space, parsed strictly. An action string is model output: it is only ever
matched against these patterns, never executed or used as a path; a URL must be http(s).

    click [id]            type [id] [text] [0|1]    (1, the default, presses Enter after typing)
    hover [id]            press [key_comb]          scroll [down|up]
    goto [url]            go_back                   go_forward
    new_tab               tab_focus [index]         close_tab
    stop [answer]         (answer "N/A" says the task cannot or should not be done)

The web world also owns what its agents are told about these actions: `ACTION_HELP` (the policy's
action list, sent with every observation as `info["action_help"]`) and `WEB_MASK` (which delta
dimensions each class can touch, for the CDWM agent's world model).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlparse

from harness.environment import ALL, NONE, STOP, ActionMask

ACTION_CLASSES = ("click", "type", "hover", "press", "scroll", "goto", "go_back", "go_forward",
                  "new_tab", "tab_focus", "close_tab", "stop")
USAGE = ("use one of: click [id], type [id] [text] [0|1], hover [id], press [key_comb], scroll [down|up], "
         "goto [url], go_back, go_forward, new_tab, tab_focus [index], close_tab, stop [answer]")
# How each action is written, in ACTION_CLASSES order, and the rules for ids and answers.
_SYNTAX = {
    "click": "click [id]", "type": "type [id] [text] [1]", "hover": "hover [id]", "press": "press [key]",
    "scroll": "scroll [down]", "goto": "goto [url]", "go_back": "go_back", "go_forward": "go_forward",
    "new_tab": "new_tab", "tab_focus": "tab_focus [index]", "close_tab": "close_tab", "stop": "stop [answer]",
}
ACTION_HELP = "\n".join(f"  {_SYNTAX[c]}" for c in ACTION_CLASSES) + (
    f"\nUse the ids shown in [brackets] in the observation. When the task is done, or to answer a "
    f"question, use {STOP} [answer].")
# Navigation and reading happen through GET requests, which change no server state on these sites,
# so they touch nothing persistent; `click`, `type` (with Enter it submits a form) and `press`
# (Enter, shortcuts) can submit anything.
WEB_MASK = ActionMask({
    "click": ALL, "type": ALL, "press": ALL,
    "hover": NONE, "scroll": NONE, "goto": NONE, "go_back": NONE, "go_forward": NONE,
    "new_tab": NONE, "tab_focus": NONE, "close_tab": NONE, "stop": NONE, "noop": NONE,
}, name="web")
KEY_RE = re.compile(r"^[A-Za-z0-9]+(\+[A-Za-z0-9]+)*$")
# The action space as one regex, for decoding held to it (`--action-format constrained`): each
# class with its arguments' shapes, ids as digits, typed text, URLs and answers up to 100
# characters without brackets or line breaks (xgrammar 0.2.8, vLLM 0.32's pin, fails to compile a
# pattern with a repetition bound of 200; 100 compiles in 0.2.8 and 0.2.9). Everything it admits,
# `parse_action` accepts.
_FREE_TEXT = r"[^\[\]\n]{0,100}"
ACTION_PATTERN = "^(" + "|".join([
    r"(click|hover) \[[0-9]{1,6}\]",
    r"type \[[0-9]{1,6}\] \[" + _FREE_TEXT + r"\]( \[[01]\])?",
    r"press \[[A-Za-z0-9]{1,12}(\+[A-Za-z0-9]{1,12}){0,3}\]",
    r"scroll \[(down|up)\]",
    r"goto \[https?://[^\[\]\s]{1,100}\]",
    r"go_back", r"go_forward", r"new_tab", r"close_tab",
    r"tab_focus \[[0-9]{1,2}\]",
    r"stop \[" + _FREE_TEXT + r"\]",
]) + ")$"
MAX_TEXT = 2000


class ActionError(ValueError):
    """A malformed action; the message says what was wrong and what to send instead."""


@dataclass(frozen=True)
class Action:
    kind: str
    element: int | None = None
    text: str = ""  # typed text, key combination, scroll direction, URL or answer
    enter: bool = False
    index: int | None = None


_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("type3", re.compile(r"^type\s*\[(\d+)\]\s*\[(.*)\]\s*\[([01])\]$", re.S)),
    ("type", re.compile(r"^type\s*\[(\d+)\]\s*\[(.*)\]$", re.S)),
    ("element", re.compile(r"^(click|hover)\s*\[(\d+)\]$")),
    ("press", re.compile(r"^press\s*\[(.+)\]$")),
    ("scroll", re.compile(r"^scroll\s*\[(down|up)\]$", re.I)),
    ("goto", re.compile(r"^goto\s*\[(.+)\]$")),
    ("bare", re.compile(r"^(go_back|go_forward|new_tab|close_tab)$")),
    ("tab_focus", re.compile(r"^tab_focus\s*\[(\d+)\]$")),
    ("stop", re.compile(r"^stop(?:\s*\[(.*)\])?$", re.S)),
]


def action_class(action: str) -> str:
    """The class of an action string (its first word), or "invalid" when it names none."""
    word = action.strip().split("[", 1)[0].split(None, 1)
    head = word[0].lower() if word else ""
    return head if head in ACTION_CLASSES else "invalid"


def parse_action(raw: str) -> Action:
    if not isinstance(raw, str) or not raw.strip():
        raise ActionError(f"empty action; {USAGE}")
    s = raw.strip()
    if len(s) > MAX_TEXT + 100:
        raise ActionError(f"action is {len(s)} characters long; keep typed text under {MAX_TEXT}")
    for kind, pattern in _PATTERNS:
        m = pattern.match(s)
        if not m:
            continue
        if kind == "type3":
            return Action("type", element=int(m[1]), text=m[2], enter=m[3] == "1")
        if kind == "type":
            return Action("type", element=int(m[1]), text=m[2], enter=True)
        if kind == "element":
            return Action(m[1], element=int(m[2]))
        if kind == "press":
            key = m[1].strip()
            if not KEY_RE.match(key) or len(key) > 40:
                raise ActionError(f"press [{key}]: not a key combination; use e.g. press [Enter] or press [Control+a]")
            return Action("press", text=key)
        if kind == "scroll":
            return Action("scroll", text=m[1].lower())
        if kind == "goto":
            url = m[1].strip()
            parsed = urlparse(url)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ActionError(f"goto [{url[:80]}]: only http(s) URLs can be opened; use goto [http://host/path]")
            return Action("goto", text=url)
        if kind == "bare":
            return Action(m[1])
        if kind == "tab_focus":
            return Action("tab_focus", index=int(m[1]))
        if kind == "stop":
            return Action("stop", text=(m[1] or "").strip())
    cls = action_class(s)
    hint = f"malformed {cls} action" if cls != "invalid" else "unknown action"
    raise ActionError(f"{hint}: {s[:80]!r}; {USAGE}")
