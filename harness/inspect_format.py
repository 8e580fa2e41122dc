"""How a family's transcripts map to Inspect eval logs, both ways, without importing inspect_ai.

`harness export inspect` (leaderboards/inspect_log.py) writes a run as an Inspect log and
`harness score --from-inspect` (harness/inspect_import.py) reads one back; both ask the suite's
adapter, found by entry point, what a transcript looks like as chat messages and a score, and how an
Inspect sample becomes a transcript again. The types here are plain dataclasses so that a family's
adapter (in environments/) needs neither inspect_ai nor its version: only the two modules above
import inspect_ai, and only when the `inspect` extra is installed.

A family registers an `InspectAdapter` subclass under the entry-point group `harness.inspect`; the
entry's name is a suite name or a prefix ending in `*`. Every hook is optional: the base class
exports any transcript generically (its JSON as one message, its scalar scores as the score) and
reads none back, with an error that says so.

May import: the standard library and `harness` (errors, the suite contract's `Sample`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any, ClassVar, Literal

from pydantic import JsonValue

from harness.errors import HarnessError
from harness.suite import Sample

GROUP = "harness.inspect"

Role = Literal["system", "user", "assistant"]
# A score value as Inspect's `Score.value` accepts it: a scalar, or a flat mapping of scalars.
Scalar = str | int | float | bool
ScoreValue = Scalar | dict[str, Scalar | None]


@dataclass
class Message:
    """One chat message of an exported sample. `source`: "input" for what the model was given,
    "generate" for what the model under test wrote (Inspect's own distinction)."""

    role: Role
    content: str
    source: Literal["input", "generate"] | None = None
    metadata: dict[str, JsonValue] = field(default_factory=dict)


@dataclass
class ScoreView:
    """A sample's scores as one Inspect score: `value` (what the viewer's score column shows),
    `answer` (a one-line summary of the verdicts) and `explanation` (why: the judge's words)."""

    value: ScoreValue
    answer: str | None = None
    explanation: str | None = None


@dataclass
class InspectSample:
    """What the import hands an adapter of one Inspect sample: its id and epoch (Inspect's, 1-based),
    messages, metadata and error message (None: the sample ended without error)."""

    id: str
    epoch: int
    messages: list[Message]
    metadata: dict[str, JsonValue] = field(default_factory=dict)
    error: str | None = None


class InspectAdapter:
    """The hooks a family may give. The base class is the generic adapter."""

    reads_inspect: ClassVar[bool] = False  # whether `transcript` is implemented

    def messages(self, output: Mapping[str, Any], model: str | None) -> list[Message]:
        """A transcript as chat messages. Generic: the messages of an output that holds a chat
        (`messages`: [{role, content}]), else the transcript's JSON as one assistant message, so the
        viewer still shows everything the run recorded."""
        chat = output.get("messages")
        if isinstance(chat, list) and chat and all(isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")
                                                   for m in chat):
            return [Message(m["role"], _text(m.get("content")), "generate" if m["role"] == "assistant" else "input")
                    for m in chat]
        return [Message("assistant", json.dumps(dict(output), indent=2, sort_keys=True, default=str), "generate",
                        {"harness_payload": True})]

    def score_view(self, scores: Mapping[str, Any]) -> ScoreView:
        """Generic: the scalar entries of the scores (a suite's own fields: success, reward, ...)."""
        value: dict[str, Scalar | None] = {k: v for k, v in scores.items()
                                           if v is None or isinstance(v, (str, int, float, bool))}
        return ScoreView(value=value or {"scored": bool(scores)})

    def transcript(self, sample: InspectSample, data: Sample, source: str) -> dict[str, JsonValue]:
        """The transcript the suite's scorer takes, from an Inspect sample and the dataset sample
        of the same id; `source` names the log in errors. The generic adapter reads none."""
        raise HarnessError(f"{source}: this suite cannot read Inspect samples (no reader registered under the "
                           f"entry-point group `{GROUP}`); re-score a harness run with `harness score RUN_ID` instead")


def extra_hint() -> str:
    """How to install inspect_ai: the `inspect` extra's own pin, read from the installed harness's
    metadata so that pyproject.toml stays its one home. (No `.[inspect]` here: the CLI prints errors
    as rich markup, which takes `[inspect]` for a style tag and drops it.)"""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        found = [r.split(";")[0].strip() for r in requires("harness") or () if "extra == \"inspect\"" in r]
    except PackageNotFoundError:
        found = []
    return f"install the harness's `inspect` extra: pip install '{found[0] if found else 'inspect_ai'}' (or `make install`)"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI-style parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


@lru_cache(maxsize=64)
def adapter_for(suite: str) -> InspectAdapter:
    """The adapter registered for `suite` (by its name, else its longest `prefix*`), or the generic one."""
    found = {ep.name: ep for ep in entry_points(group=GROUP)}
    prefixes = sorted((n for n in found if n.endswith("*") and suite.startswith(n[:-1])), key=len, reverse=True)
    for name in [suite, *prefixes]:
        if name in found:
            cls = found[name].load()
            if isinstance(cls, type) and issubclass(cls, InspectAdapter):
                return cls()
            raise HarnessError(f"entry point {GROUP}:{name} ({found[name].value}) is not an InspectAdapter subclass")
    return InspectAdapter()
