"""The model interface every provider implements, and the errors the runner understands.

Providers only translate: a list of chat messages plus a `GenerateConfig` in, a `ModelOutput`
out. Retries, timeouts, caching and concurrency limits live in `harness.calls`, once, for every
provider; a provider signals "worth retrying" by raising `RetryableModelError`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal, Protocol, runtime_checkable

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from harness.messages import ChatMessage, hash_form


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def add(self, other: "Usage") -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.calls += other.calls


class ToolSpec(BaseModel):
    """One function the model may call: a name, what it does, and its arguments' JSON schema."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolCall(BaseModel):
    """A call the model made: the tool's name and its arguments, parsed (never executed here)."""

    id: str = ""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


# How the reply's form was enforced: `none` (no constraint asked), `provider` (the provider or its
# engine enforced it natively: constrained decoding, structured outputs, native tool calls) or
# `reask` (the provider cannot: the caller's parse-and-re-ask path is all that holds the form).
ConstraintPath = Literal["none", "provider", "reask"]


class GenerateConfig(BaseModel):
    """Sampling parameters of one call. `seed` reaches the model (per sample and epoch).

    At most one output constraint per call: `json_schema` (the reply is one JSON value valid
    against it), `choice` (the reply is exactly one of these strings), `regex` (the reply matches
    it in full), or `tools` with `tool_choice` `required` or a tool's name (the reply is a tool
    call). `tools` with `tool_choice` `auto` (the default) lets the model answer in text or call.
    All of it is part of the config, so it enters the request hash.
    """

    temperature: float = 0.0
    max_tokens: int = 512
    top_p: float = 1.0
    seed: int | None = None
    stop: list[str] | None = None
    json_schema: dict[str, Any] | None = None
    choice: list[str] | None = None
    regex: str | None = None
    tools: list[ToolSpec] | None = None
    tool_choice: str | None = None  # auto | required | none | the name of one tool
    # "image": the call asks for a picture (an OpenAI-compatible images endpoint: the messages'
    # contents are the prompt), answered in `ModelOutput.images`; None: a text reply
    output: Literal["image"] | None = None

    @property
    def constrained(self) -> bool:
        """Does this call ask for a form (schema, choice, regex or tools)?"""
        return bool(self.json_schema is not None or self.choice or self.regex is not None or self.tools)

    @property
    def forced_tool(self) -> bool:
        """Must the reply be a tool call?"""
        return bool(self.tools) and self.tool_choice not in (None, "auto", "none")

    def merged(self, **overrides: Any) -> "GenerateConfig":
        data = self.model_dump()
        data.update({k: v for k, v in overrides.items() if v is not None})
        return GenerateConfig(**data)


class ModelOutput(BaseModel):
    text: str
    finish_reason: str = "stop"
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    request_hash: str = ""
    cached: bool = False
    attempts: int = 1
    tool_calls: list[ToolCall] = Field(default_factory=list)
    constrained_by: ConstraintPath = "none"
    images: list[str] = Field(default_factory=list)  # base64 PNGs, for a call with output="image"


class ModelError(Exception):
    """A call failed in a way that retrying will not fix (bad request, context overflow)."""


class RetryableModelError(ModelError):
    """A call failed in a way that may pass on retry: 429, 5xx, timeout, connection error.

    `rate_limited`: the provider said too many requests (HTTP 429): the adaptive limit
    (`harness.limits`) backs off. `retry_after_s`: how long the provider asked to wait (its
    `Retry-After`), None if it did not say."""

    def __init__(self, message: str, *, rate_limited: bool = False, retry_after_s: float | None = None):
        super().__init__(message)
        self.rate_limited = rate_limited
        self.retry_after_s = retry_after_s

    def __reduce__(self) -> tuple[Any, ...]:  # keyword fields survive pickling (a Ray task's error)
        return (_retryable, (str(self), self.rate_limited, self.retry_after_s))


def _retryable(message: str, rate_limited: bool, retry_after_s: float | None) -> RetryableModelError:
    return RetryableModelError(message, rate_limited=rate_limited, retry_after_s=retry_after_s)


class ConstraintError(ModelError):
    """An output constraint that cannot be served: an invalid schema or regex, a nameless tool, an
    unknown `tool_choice`, a form no reply can take. Never retried."""


def check_constraint(config: GenerateConfig) -> None:
    """Raise `ConstraintError` naming the bad input; every provider relies on this having run."""
    given = [k for k in ("json_schema", "choice", "regex") if getattr(config, k) is not None]
    if config.forced_tool:
        given.append("tools")
    if len(given) > 1:
        raise ConstraintError(f"one output constraint per call, got {' and '.join(given)}")
    if config.output == "image" and (given or config.tools):
        raise ConstraintError(f"output='image' asks for a picture: it takes no {' or '.join(given or ['tools'])}")
    if config.json_schema is not None:
        try:
            jsonschema.Draft202012Validator.check_schema(config.json_schema)
        except jsonschema.SchemaError as exc:
            raise ConstraintError(f"invalid JSON schema: {exc.message}") from None
    if config.choice is not None:
        if not config.choice or any(not isinstance(c, str) or not c for c in config.choice):
            raise ConstraintError("choice needs at least one non-empty string")
    if config.regex is not None:
        try:
            re.compile(config.regex)
        except re.error as exc:
            raise ConstraintError(f"regex {config.regex!r} does not compile: {exc}") from None
    for tool in config.tools or []:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", tool.name):
            raise ConstraintError(f"tool name {tool.name!r}: use 1-64 letters, digits, _ . or -")
        try:
            jsonschema.Draft202012Validator.check_schema(tool.parameters)
        except jsonschema.SchemaError as exc:
            raise ConstraintError(f"tool {tool.name!r}: invalid parameters schema: {exc.message}") from None
    if config.tool_choice is not None:
        names = [t.name for t in config.tools or []]
        if config.tool_choice not in ("auto", "required", "none", *names):
            raise ConstraintError(f"tool_choice {config.tool_choice!r}: use auto, required, none or one of "
                                  f"the tools ({', '.join(names) or 'none given'})")
        if config.tool_choice == "required" and not names:
            raise ConstraintError("tool_choice 'required' needs at least one tool")


def tool_call_schema(tools: list[ToolSpec], tool_choice: str | None = None) -> dict[str, JsonValue]:
    """The JSON schema of one tool call `{"name": ..., "arguments": {...}}` over `tools` (or the one
    `tool_choice` names): what an engine without native tool calls constrains its reply to."""
    chosen = [t for t in tools if tool_choice in (None, "auto", "required") or t.name == tool_choice]
    branches: list[dict[str, JsonValue]] = [{"type": "object", "properties": {"name": {"const": t.name}, "arguments": t.parameters},
                 "required": ["name", "arguments"], "additionalProperties": False} for t in chosen]
    return branches[0] if len(branches) == 1 else {"anyOf": [*branches]}


@runtime_checkable
class Model(Protocol):
    """What a provider returns. `name` is the full spec string, e.g. `openai/gpt-4o`."""

    name: str

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        ...

    async def aclose(self) -> None:
        ...


@runtime_checkable
class RawTextModel(Protocol):
    """A model that also generates from raw text, no chat template (`vllm/`, `openai/` through the
    completions endpoint, `local/`). Constraints in `config` apply as in `generate`."""

    name: str

    async def complete(self, prompt: str, config: GenerateConfig) -> ModelOutput:
        ...


# Constraint fields enter the hash only when set, so unconstrained calls keep the keys they had
# before these fields existed (earlier runs' caches still answer them).
_OPTIONAL_IN_HASH = ("json_schema", "choice", "regex", "tools", "tool_choice", "output")


def request_hash(model_name: str, messages: list[ChatMessage], config: GenerateConfig,
                 extra: Mapping[str, JsonValue] | None = None) -> str:
    """Content address of a call: the cache key. Secrets never enter it (model name and params only).
    Each message enters in its `hash_form` (a picture as it was keyed before content parts)."""
    return _hash(model_name, [hash_form(m) for m in messages], config, extra)


def raw_prompt_hash(model_name: str, prompt: str, config: GenerateConfig,
                    extra: Mapping[str, object] | None = None) -> str:
    """The cache key of a raw-text call (`complete`): the prompt keyed as a `prompt` turn, a role no
    chat message has, so it never shares a key with a chat call."""
    return _hash(model_name, [{"role": "prompt", "content": prompt}], config, {"raw_prompt": True, **(extra or {})})


def _hash(model_name: str, messages: list[Mapping[str, object]], config: GenerateConfig,
          extra: Mapping[str, object] | None) -> str:
    payload = {
        "model": model_name,
        "messages": messages,
        "config": config.model_dump(exclude={k for k in _OPTIONAL_IN_HASH if getattr(config, k) is None}),
        "extra": extra or {},
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
