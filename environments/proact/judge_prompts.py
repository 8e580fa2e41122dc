"""Which prompt grades a reply, and with which settings: the project's own judge prompt
(`protocol.judge_messages`, the default) or the reference code's, loaded from a checkout the user
has (`reference.py`). Both are a `JudgePrompt`: how to build the messages for one trigger, the
answer form the judge is held to, and how to read its answer.

A prompt's `sha256` is taken over the messages it builds for one fixed probe input (our own
text), so it changes exactly when the prompt text does, whatever the source file around it;
the run's manifest records it, and a reference-prompt run carries it in its suite options too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import JsonValue

from corpora.proact_types import Rubric
from environments.proact.protocol import JUDGE_CONFIG, JUDGE_DECODE_SCHEMA, judge_messages, parse_judge
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig

Messages = list[ChatMessage]
# (trigger turn, rubric, history ending with the trigger turn's user message, reply) -> messages
BuildPrompt = Callable[[int, Rubric, Messages, str], Messages]

# The probe the hash is taken over: any fixed input would do; it only has to exercise every part
# of a prompt (turn, each rubric field, a history with both roles, the reply).
_PROBE: tuple[int, Rubric, Messages, str] = (
    2,
    Rubric(type="CRITICAL", pass_criteria="probe pass", partial_criteria="probe partial", fail_criteria="probe fail"),
    [{"role": "user", "content": "probe first question"}, {"role": "assistant", "content": "probe first answer"},
     {"role": "user", "content": "probe second question"}],
    "probe reply under review",
)


def prompt_sha256(build: BuildPrompt) -> str:
    """The hash of what `build` writes for the probe input."""
    turn, rubric, history, reply = _PROBE
    rendered = build(turn, rubric.model_copy(), [m.copy() for m in history], reply)
    return hashlib.sha256(json.dumps(rendered, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class JudgePrompt:
    name: str  # "harness" | "reference"
    build: BuildPrompt
    parse: Callable[[str], dict[str, str]]  # answer -> score, rationale, evidence (+ status); JudgeFormatError
    schema: dict[str, JsonValue]  # what the judge's decoding is held to, where the provider can
    source: str  # where the prompt text comes from
    sha256: str = ""

    def identity(self) -> dict[str, JsonValue]:
        return {"name": self.name, "sha256": self.sha256, "source": self.source}


def _harness_build(turn: int, rubric: Rubric, history: Messages, reply: str) -> Messages:
    return judge_messages(rubric, history, reply)  # the project's prompt does not name the turn


HARNESS_PROMPT = JudgePrompt(name="harness", build=_harness_build, parse=parse_judge, schema=JUDGE_DECODE_SCHEMA,
                             source="environments/proact/protocol.py (judge_messages)",
                             sha256=prompt_sha256(_harness_build))


def _same(config: GenerateConfig, model_name: str) -> GenerateConfig:
    return config


@dataclass(frozen=True)
class JudgeSettings:
    """A prompt and the generation settings of the judge's calls. `for_model` adjusts them to the
    judge model where a preset asks to (the reference raises temperature and tokens for
    reasoning models)."""

    prompt: JudgePrompt = HARNESS_PROMPT
    config: GenerateConfig = field(default_factory=lambda: JUDGE_CONFIG)
    for_model: Callable[[GenerateConfig, str], GenerateConfig] = field(default=_same)

    def config_for(self, model_name: str) -> GenerateConfig:
        return self.for_model(self.config.model_copy(update={"json_schema": self.prompt.schema}), model_name)


HARNESS_JUDGE = JudgeSettings()
