"""`openai/<name>`: any OpenAI-compatible chat endpoint through the official `openai` client.

Output constraints travel in the API's own fields: a JSON schema as `response_format`, tools as
`tools`/`tool_choice`. A choice set or regex has no OpenAI field: a self-hosted endpoint (a
`base_url`: vLLM, `harness serve`) gets vLLM's `structured_outputs`; api.openai.com gets nothing
extra and the reply's form is left to the caller's re-ask path (`constrained_by="reask"`).
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import json
import os
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any, Literal, TypedDict
from urllib.parse import urlparse

import openai
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionContentPartParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
    ChatCompletionToolChoiceOptionParam,
)
from openai.types.shared_params import ResponseFormatJSONSchema
from pydantic import JsonValue

from harness.errors import HarnessError
from harness.messages import ChatMessage, ImagePart, TextPart, text_of
from harness.replicas import LeastLoaded, split_urls
from harness.spec import ModelSpec
from harness.providers.base import (
    ConstraintError,
    ConstraintPath,
    GenerateConfig,
    ModelError,
    ModelOutput,
    RetryableModelError,
    ToolCall,
    Usage,
)

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def api_key_for(base_url: str | None) -> str:
    """The key comes from the environment only. A loopback server needs none."""
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    if base_url and urlparse(base_url).hostname in _LOOPBACK:
        return "EMPTY"
    raise HarnessError(
        "openai/... models need an API key: export OPENAI_API_KEY=... (or pass --base-url to a local server)"
    )


class OpenAIModel:
    """One model behind one endpoint, or behind several replicas (`base_url` "URL1,URL2"): each
    request then goes to the least-loaded replica (`harness.replicas`)."""

    def __init__(self, name: str, base_url: str | None = None):
        self.name = f"openai/{name}"
        self.model_id = name
        self.base_url = base_url
        # Retries are the runner's job (harness.calls), so the client's own are off.
        urls: list[str | None] = list(split_urls(base_url)) or [None]
        self.replicas = LeastLoaded([
            openai.AsyncOpenAI(api_key=api_key_for(url), base_url=url, max_retries=0, timeout=None) for url in urls])

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The first replica's client (the only one when a single endpoint is named)."""
        return self.replicas.replicas[0]

    @contextlib.contextmanager
    def _replica(self) -> Iterator[openai.AsyncOpenAI]:
        """The least-loaded replica for one request; a connection failure leaves it out a while."""
        with self.replicas.use() as (i, client):
            try:
                yield client
            except openai.APIConnectionError:
                self.replicas.mark_down(i)
                raise

    draws_images = True  # config.output == "image": the images endpoint (see `draw`)
    sees_images = True  # an image part goes as an `image_url` part (see `chat_messages`)

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        if config.output == "image":
            return await self.draw(messages)
        started = time.perf_counter()
        params, path = constraint_params(config, self_hosted=self.base_url is not None)
        try:
            with self._replica() as client:
                resp = await client.chat.completions.create(
                    model=self.model_id, messages=chat_messages(messages),
                    **chat_params(config), **params)
        except openai.OpenAIError as exc:
            raise classify_error(self.name, exc) from exc
        return to_output(self.name, resp, started, path)

    async def draw(self, messages: list[ChatMessage]) -> ModelOutput:
        """One picture from `/v1/images/generations`: the messages' contents, joined, are the prompt
        (the endpoint takes one text); the PNG comes back base64-encoded in `images`."""
        started = time.perf_counter()
        prompt = "\n\n".join(text for text in map(text_of, messages) if text)
        try:
            with self._replica() as client:
                resp = await client.images.generate(model=self.model_id, prompt=prompt, n=1,
                                                    response_format="b64_json")
        except openai.OpenAIError as exc:
            raise classify_error(self.name, exc) from exc
        images = [d.b64_json for d in resp.data or [] if d.b64_json]
        if not images:
            raise RetryableModelError(f"{self.name}: the images endpoint answered without an image")
        return ModelOutput(text="", images=images, latency_s=time.perf_counter() - started,
                           usage=Usage(calls=1))

    async def complete(self, prompt: str, config: GenerateConfig) -> ModelOutput:
        """Raw text through the completions endpoint (no chat template). The endpoint has no
        `response_format` or tools: a self-hosted one takes vLLM's `structured_outputs`."""
        if config.tools:
            raise ConstraintError(f"{self.name}: tools need the chat endpoint (generate), not complete")
        started = time.perf_counter()
        outputs = vllm_structured_outputs(config)
        extra_body: ExtraBody | None = None  # None: the client's default, no extra fields
        path: ConstraintPath = "none"
        if outputs:
            path = "provider" if self.base_url is not None else "reask"
            if self.base_url is not None:
                extra_body = {"structured_outputs": outputs}
        try:
            with self._replica() as client:
                resp = await client.completions.create(model=self.model_id, prompt=prompt,
                                                       **chat_params(config), extra_body=extra_body)
        except openai.OpenAIError as exc:
            raise classify_error(self.name, exc) from exc
        if not resp.choices:
            raise RetryableModelError(f"{self.name}: response had no choices")
        choice = resp.choices[0]
        return ModelOutput(text=choice.text or "", finish_reason=choice.finish_reason or "stop",
                           usage=_usage(resp), latency_s=time.perf_counter() - started, constrained_by=path)

    async def aclose(self) -> None:
        for client in self.replicas.replicas:
            await client.close()


def chat_messages(messages: list[ChatMessage]) -> list[ChatCompletionMessageParam]:
    """The harness's messages in the chat API's form (the litellm provider sends the same): an image
    part becomes an `image_url` part (a PNG data URL), a tool call a `function` call with its
    arguments as JSON text. Plain-text messages go as they are."""
    out: list[ChatCompletionMessageParam] = []
    for m in messages:
        if m["role"] == "system":
            out.append({"role": "system", "content": m["content"]})
        elif m["role"] == "user":
            content = m["content"]
            if isinstance(content, str):
                out.append({"role": "user", "content": content})
            else:
                out.append({"role": "user", "content": [_wire_part(p) for p in content]})
        elif m["role"] == "assistant":
            reply: ChatCompletionAssistantMessageParam = {"role": "assistant", "content": m["content"]}
            if m.get("tool_calls"):
                reply["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)}}
                    for c in m.get("tool_calls", [])]
            out.append(reply)
        else:
            out.append({"role": "tool", "content": m["content"], "tool_call_id": m.get("tool_call_id", "")})
    return out


def _wire_part(part: TextPart | ImagePart) -> ChatCompletionContentPartParam:
    if part["type"] == "text":
        return {"type": "text", "text": part["text"]}
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{part['image']}"}}


class ChatParams(TypedDict, total=False):
    """The sampling fields of a request (chat or completions), each sent only when needed."""

    temperature: float
    max_tokens: int
    top_p: float
    seed: int
    stop: list[str]


class StructuredOutputs(TypedDict, total=False):
    """vLLM's `structured_outputs` request field: one of its keys."""

    choice: list[str]
    regex: str
    json: dict[str, JsonValue]  # a JSON schema


class ExtraBody(TypedDict):
    """What a request to a self-hosted (vLLM-compatible) endpoint adds to OpenAI's fields."""

    structured_outputs: StructuredOutputs


class ConstraintParams(TypedDict, total=False):
    """The fields of a chat-completions request that carry an output constraint."""

    response_format: ResponseFormatJSONSchema
    tools: list[ChatCompletionFunctionToolParam]
    tool_choice: ChatCompletionToolChoiceOptionParam
    extra_body: ExtraBody


# OpenAI's own `tool_choice` modes; any other value of GenerateConfig.tool_choice names a tool.
_TOOL_CHOICE_MODES: dict[str, Literal["auto", "required", "none"]] = {
    "auto": "auto", "required": "required", "none": "none"}


def chat_params(config: GenerateConfig) -> ChatParams:
    """Sampling parameters of a chat-completions request (shared with the litellm provider)."""
    params: ChatParams = {"temperature": config.temperature, "max_tokens": config.max_tokens}
    if config.top_p != 1.0:  # the API default; sending it costs request-encoding time per call
        params["top_p"] = config.top_p
    if config.seed is not None:
        params["seed"] = config.seed
    if config.stop:
        params["stop"] = config.stop
    return params


def constraint_params(config: GenerateConfig, self_hosted: bool) -> tuple[ConstraintParams, ConstraintPath]:
    """The request fields that carry `config`'s constraint, and which path will hold the form.
    `self_hosted`: the endpoint takes vLLM's `structured_outputs` (choice, regex)."""
    if not config.constrained:
        return {}, "none"
    params = openai_constraint_fields(config)
    if config.choice is not None or config.regex is not None:
        if not self_hosted:
            return params, "reask"  # api.openai.com has no choice or regex field
        params["extra_body"] = {"structured_outputs": vllm_structured_outputs(config)}
    return params, "provider"


def openai_constraint_fields(config: GenerateConfig) -> ConstraintParams:
    """OpenAI's own fields for a JSON schema and tools (litellm passes the same ones through)."""
    params: ConstraintParams = {}
    if config.json_schema is not None:
        params["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "reply", "schema": config.json_schema, "strict": strict_compatible(config.json_schema)}}
    if config.tools:
        params["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}} for t in config.tools]
    if config.tool_choice is not None:
        mode = _TOOL_CHOICE_MODES.get(config.tool_choice)
        if mode is not None:
            params["tool_choice"] = mode
        else:
            params["tool_choice"] = {"type": "function", "function": {"name": config.tool_choice}}
    return params


def vllm_structured_outputs(config: GenerateConfig) -> StructuredOutputs:
    """vLLM's `structured_outputs` request field for a choice, regex or JSON schema ({} for none)."""
    if config.choice is not None:
        return {"choice": config.choice}
    if config.regex is not None:
        return {"regex": config.regex}
    if config.json_schema is not None:
        return {"json": config.json_schema}
    return {}


# What OpenAI's strict mode accepts (its structured-outputs guide): these keywords only, every
# object closed (`additionalProperties: false`) with all its properties required, and an object
# at the root. Anything else is sent with strict false, which the API takes as a best effort.
_STRICT_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
    "description", "title", "$defs", "definitions", "$ref", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems"})


def strict_compatible(schema: dict[str, JsonValue]) -> bool:
    """May this schema go to OpenAI with `strict: true`?"""
    return schema.get("type") == "object" and _strict_node(schema)


def _strict_node(node: Any) -> bool:
    if not isinstance(node, dict) or set(node) - _STRICT_KEYWORDS:
        return False
    types = node.get("type")
    props = node.get("properties", {})
    if "properties" in node or types == "object" or (isinstance(types, list) and "object" in types):
        if not isinstance(props, dict) or node.get("additionalProperties") is not False:
            return False
        if set(node.get("required", [])) != set(props):
            return False
    items = node.get("items")
    if isinstance(items, list):  # tuple-form items: not accepted in strict mode
        return False
    children = [*props.values(), *([items] if items is not None else []), *node.get("anyOf", []),
                *node.get("$defs", {}).values(), *node.get("definitions", {}).values()]
    return all(_strict_node(child) for child in children)


def _usage(resp: Any) -> Usage:
    usage = Usage(calls=1)
    if getattr(resp, "usage", None) is not None:
        usage.prompt_tokens = resp.usage.prompt_tokens or 0
        usage.completion_tokens = resp.usage.completion_tokens or 0
    return usage


def to_output(model_name: str, resp: Any, started: float, constrained_by: ConstraintPath = "none") -> ModelOutput:
    """A chat-completions response (openai's or litellm's, same shape) as a ModelOutput."""
    if not resp.choices:
        raise RetryableModelError(f"{model_name}: response had no choices")
    choice = resp.choices[0]
    return ModelOutput(
        text=choice.message.content or "",
        finish_reason=choice.finish_reason or "stop",
        usage=_usage(resp),
        latency_s=time.perf_counter() - started,
        tool_calls=parse_tool_calls(model_name, choice.message),
        constrained_by=constrained_by,
    )


def parse_tool_calls(model_name: str, message: Any) -> list[ToolCall]:
    """`message.tool_calls` (openai's or litellm's objects) as ToolCalls, arguments decoded.
    Arguments that are not a JSON object are a ModelError naming the tool: no caller can use them."""
    calls = []
    for call in getattr(message, "tool_calls", None) or []:
        fn = getattr(call, "function", None)
        if fn is None:
            raise ModelError(f"{model_name}: a {getattr(call, 'type', '?')!r} tool call is not a function call")
        raw = fn.arguments or ""
        try:
            # Some servers send "" for a call without arguments.
            arguments = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise ModelError(f"{model_name}: tool call {fn.name!r} has arguments that are not JSON: "
                             f"{raw[:200]!r}") from None
        if not isinstance(arguments, dict):
            raise ModelError(f"{model_name}: tool call {fn.name!r} has arguments that are not a JSON "
                             f"object: {raw[:200]!r}")
        calls.append(ToolCall(id=call.id or "", name=fn.name, arguments=arguments))
    return calls


def classify_error(model_name: str, exc: Exception) -> ModelError:
    """Map an `openai` exception (litellm's subclass them) to retryable or not; a 429 is a rate
    limit, and the response's Retry-After (if any) travels with the error."""
    status = getattr(exc, "status_code", None)
    what = f"{model_name}: {type(exc).__name__}" + (f" (HTTP {status})" if status else "")
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return RetryableModelError(what)
    if status is not None and (status >= 500 or status in (408, 409, 429)):
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or {}
        return RetryableModelError(what, rate_limited=status == 429, retry_after_s=retry_after(headers))
    return ModelError(what)


def retry_after(headers: Any) -> float | None:
    """Seconds to wait from a response's headers: `retry-after-ms` (OpenAI's, finer), else
    `Retry-After` as seconds or as an HTTP date; None when neither says."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(millis) / 1000.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def limit_key(spec: ModelSpec) -> str:
    """One adaptive limit per endpoint and API key (`harness.limits`): every `openai/` model on
    the same base URL with the same key shares it. The key enters only as a short hash."""
    key = os.environ.get("OPENAI_API_KEY") or ""
    digest = hashlib.sha256(key.encode()).hexdigest()[:12] if key else "none"
    return f"openai|{spec.base_url or 'https://api.openai.com/v1'}|key:{digest}"


class OpenAIProvider:
    """`openai/NAME`: any OpenAI-compatible endpoint (`--base-url`), api.openai.com by default."""

    name = "openai"

    def validate(self, spec: ModelSpec) -> None:
        api_key_for(spec.base_url)

    def create(self, spec: ModelSpec) -> OpenAIModel:
        return OpenAIModel(spec.name, spec.base_url)

    def limit_key(self, spec: ModelSpec) -> str:
        return limit_key(spec)


PROVIDER = OpenAIProvider()
