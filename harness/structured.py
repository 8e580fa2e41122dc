"""One path for every role that must answer in a form: ask, parse, re-ask a bounded number of
times, and record each attempt with why it failed.

`ask_structured(generate, role, messages, schema_model, config, attempts)` asks a model and reads
the first JSON object of its reply against a pydantic model; a reply without one (`no_json`) or
one the model rejects (`invalid`) is answered with a correction and asked again, each attempt with
seed `config.seed + attempt` (when the config names a seed; otherwise the run's per-sample seed
applies and the correction alone makes the re-ask differ). A model call that fails for good
(`model_error`) ends the asking: retries of transient errors are `harness.calls`'s job. A role
whose form is not JSON passes its own `parse` (raising `ReplyProblem`) and `reask`.

The form is also asked of the provider (`form`): `constrained` (the default) sends the schema as
`GenerateConfig.json_schema`, so an engine with constrained decoding can only write a valid object;
`tools` asks for the object as the arguments of one forced tool call; `free` asks in the prompt
only. Whatever the provider did, the reply is parsed and checked here: the constraint makes a valid
reply likely, the parse makes it certain. A reply cut at `max_tokens` before it parsed is a
`truncated` failure.

`retry_reply(ask, attempts)` is the loop beneath it, for roles asked through a callable of their
own (a prompt builder that also parses): `ask(attempt, tried)` returns the value or raises
`ReplyProblem` / `ModelError`, and sees the attempts so far to word its feedback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, JsonValue, ValidationError

from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig, ModelError, ModelOutput, ToolSpec

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
FailureKind = Literal["no_json", "invalid", "truncated", "model_error"]
# How a role is asked for its form: in the prompt only, as a decoding constraint, or as a tool call.
Form = Literal["free", "constrained", "tools"]
FORMS: tuple[Form, ...] = ("free", "constrained", "tools")
Generate = Callable[[str, list[ChatMessage], GenerateConfig], Awaitable[ModelOutput]]


class ReplyProblem(ValueError):
    """A reply that is not in the asked-for form; `kind` is no_json or invalid."""

    def __init__(self, kind: FailureKind, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class Attempt:
    kind: Literal["ok", "no_json", "invalid", "truncated", "model_error"]
    text: str = ""  # the reply ("" when the call failed)
    problem: str | None = None  # why it failed: the parser's or the model error's message
    seed: int | None = None


@dataclass
class StructuredReply(Generic[T]):
    value: T | None  # None when no attempt gave a usable reply
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.value is not None

    @property
    def invalid(self) -> int:
        """Replies that arrived but were not in the form (model errors not counted)."""
        return sum(a.kind in ("no_json", "invalid", "truncated") for a in self.attempts)

    @property
    def failure(self) -> FailureKind | None:
        """Why the last attempt failed (None when the reply was usable or nothing was asked)."""
        return None if self.ok or not self.attempts else self.attempts[-1].kind  # type: ignore[return-value]

    @property
    def error(self) -> str | None:
        """The message of a model error that ended the asking."""
        last = self.attempts[-1] if self.attempts else None
        return last.problem if last is not None and last.kind == "model_error" else None

    @property
    def text(self) -> str:
        """The last reply's text."""
        return next((a.text for a in reversed(self.attempts) if a.kind != "model_error"), "")


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (inside a fence or bare), or None. Only `json.loads`."""
    decoder = json.JSONDecoder()
    for start in [m.start() for m in re.finditer(r"\{", text)]:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_json_reply(text: str, schema_model: type[M]) -> M:
    """The first JSON object of `text` as `schema_model`; raises `ReplyProblem` saying what is wrong
    (the first validation error, as `field/path: message`)."""
    obj = extract_json_object(text)
    if obj is None:
        raise ReplyProblem("no_json", "no JSON object found")
    try:
        return schema_model.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "/".join(str(p) for p in first["loc"]) or "the object"
        raise ReplyProblem("invalid", f"{where}: {first['msg']}"[:200]) from None


def with_form(config: GenerateConfig, form: Form, schema: dict[str, JsonValue], tool: str = "reply") -> GenerateConfig:
    """`config` asking for `schema` as `form` says. Stop strings are dropped under a constraint:
    one inside a JSON string would cut a valid object short."""
    if form == "constrained":
        return config.model_copy(update={"json_schema": schema, "stop": None})
    if form == "tools":
        spec = ToolSpec(name=tool, description="Give your answer as this call's arguments.", parameters=schema)
        return config.model_copy(update={"tools": [spec], "tool_choice": tool, "stop": None})
    return config


def reply_text(out: ModelOutput) -> str:
    """The reply to parse: a tool call's arguments as JSON, else the text."""
    if out.tool_calls:
        return json.dumps(out.tool_calls[0].arguments, ensure_ascii=False)
    return out.text


def bounded(schema: dict[str, Any], max_length: int, max_items: int | None = None) -> dict[str, Any]:
    """A copy of `schema` in which every string without a `maxLength` (and without an `enum` or
    `const`) gets `max_length`, and every array without `maxItems` gets `max_items`: under
    constrained decoding a small model can otherwise write one string or list until `max_tokens`
    and never close the object. Plain dicts (`Any` values) in and out: families pass their own
    schema literals, and callers read and edit the copy's nested nodes before they send it."""
    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: walk(v) for k, v in node.items()}
        types = out.get("type")
        kinds = set(types) if isinstance(types, list) else {types}
        if "string" in kinds and not {"maxLength", "enum", "const"} & out.keys():
            out["maxLength"] = max_length
        if "array" in kinds and max_items is not None and "maxItems" not in out:
            out["maxItems"] = max_items
        return out

    return walk(schema)  # type: ignore[no-any-return]


def truncation(out: ModelOutput, problem: ReplyProblem) -> ReplyProblem:
    """A reply that stopped at `max_tokens` did not fail its form: it ran out of room."""
    if out.finish_reason == "length" and not out.tool_calls:
        return ReplyProblem("truncated", f"reply cut at max_tokens before it was complete ({problem})")
    return problem


def default_reask(text: str, problem: ReplyProblem) -> list[ChatMessage]:
    return [{"role": "assistant", "content": text[:600]},
            {"role": "user", "content": f"Invalid reply ({problem}). Reply with the JSON object only."}]


async def retry_reply(ask: Callable[[int, list[Attempt]], Awaitable[T]], attempts: int, *,
                      retry_model_errors: bool = False) -> StructuredReply[T]:
    """Call `ask(attempt, tried)` until it returns a value, at most `attempts` times. A
    `ReplyProblem` is recorded and asked again; a `ModelError` is recorded and ends the asking
    unless `retry_model_errors`."""
    tried: list[Attempt] = []
    for attempt in range(max(1, attempts)):
        try:
            value = await ask(attempt, tried)
        except ReplyProblem as problem:
            tried.append(Attempt(problem.kind, "", str(problem)))
            continue
        except ModelError as exc:
            tried.append(Attempt("model_error", "", str(exc)))
            if retry_model_errors:
                continue
            return StructuredReply(None, tried)
        tried.append(Attempt("ok"))
        return StructuredReply(value, tried)
    return StructuredReply(None, tried)


async def ask_structured(generate: Generate, role: str, messages: list[ChatMessage], schema_model: type[M],
                         config: GenerateConfig, attempts: int, *,
                         parse: Callable[[str], Any] | None = None,
                         reask: Callable[[str, ReplyProblem], list[ChatMessage]] | None = None,
                         form: Form = "constrained", schema: dict[str, Any] | None = None,
                         tool: str = "reply") -> StructuredReply[Any]:
    """Ask `role` until its reply parses as `schema_model` (or by `parse`), at most `attempts`
    asks; each failed reply and its correction (`reask`, default: "Invalid reply (...)") are
    appended to the conversation for the next ask. `form` says how the form is asked for and
    `schema` what is sent (default: `schema_model`'s JSON schema); `tool` names the tool under `tools`."""
    parse = parse or (lambda text: parse_json_reply(text, schema_model))
    reask = reask or default_reask
    config = with_form(config, form, schema if schema is not None else schema_model.model_json_schema(), tool)
    history = list(messages)
    calls: list[tuple[int | None, str]] = []  # (seed, reply text) of each attempt

    async def ask(attempt: int, tried: list[Attempt]) -> Any:
        nonlocal history
        cfg = config if config.seed is None else config.model_copy(update={"seed": config.seed + attempt})
        calls.append((cfg.seed, ""))
        out = await generate(role, history, cfg)
        text = reply_text(out)
        calls[-1] = (cfg.seed, text)
        try:
            return parse(text)
        except ReplyProblem as problem:
            history = history + reask(text, problem)
            raise truncation(out, problem) from None

    reply = await retry_reply(ask, attempts)
    for a, (seed, text) in zip(reply.attempts, calls):
        a.seed, a.text = seed, text
    return reply
