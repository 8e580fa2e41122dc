"""Structured output and tool calls over the OpenAI-compatible wire: the loopback server maps
`response_format`, `tools`, `tool_choice` and vLLM's `structured_outputs` onto `GenerateConfig`, and
the `openai/` and `litellm/` providers send them and read tool calls back, all through the official
clients over real HTTP. Where a test is about the server's mapping, the served model is a small
scripted one that records the config it received (the server's logic is what is tested)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import jsonschema
import openai
import pytest
from aiohttp import web
from openai.types.chat import ChatCompletionMessage
from pydantic import JsonValue

from harness.loopback import LoopbackServer, running_server
from harness.providers import load_model
from harness.providers.base import (
    ConstraintError,
    GenerateConfig,
    ModelError,
    ModelOutput,
    ToolCall,
    ToolSpec,
    Usage,
    request_hash,
)
from harness.providers.openai_provider import constraint_params, parse_tool_calls, strict_compatible
from harness.spec import ModelSpec

MESSAGES = [{"role": "user", "content": "Is the sky blue?"}]
VERDICT = {"type": "object", "properties": {"score": {"enum": ["PASS", "FAIL"]}, "evidence": {"type": "string"}},
           "required": ["score", "evidence"], "additionalProperties": False}
SEARCH = ToolSpec(name="search", description="Search the shop",
                  parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
CLICK = ToolSpec(name="click", parameters={"type": "object", "properties": {"id": {"type": "integer"}}})
SEARCH_WIRE = {"type": "function", "function": {"name": "search", "description": "Search the shop",
                                                 "parameters": SEARCH.parameters}}
CLICK_WIRE = {"type": "function", "function": {"name": "click", "parameters": CLICK.parameters}}


class ChatOnlyModel:
    """Records every config it gets. A forced tool call answers with a call to the first allowed
    tool; a JSON schema with a fixed verdict; anything else with `plain`. No raw-text completion."""

    name = "scripted"

    def __init__(self) -> None:
        self.calls: list[tuple[Any, GenerateConfig]] = []

    async def generate(self, messages: list[dict[str, str]], config: GenerateConfig) -> ModelOutput:
        self.calls.append((messages, config))
        if config.forced_tool:
            assert config.tools
            name = config.tool_choice if config.tool_choice != "required" else config.tools[0].name
            return ModelOutput(text="", tool_calls=[ToolCall(name=name, arguments={"query": "red shoes", "n": 2})],
                               usage=Usage(prompt_tokens=5, completion_tokens=9, calls=1), constrained_by="provider")
        if config.json_schema is not None:
            return ModelOutput(text='{"score": "PASS", "evidence": "blue"}', constrained_by="provider")
        return ModelOutput(text="plain", usage=Usage(prompt_tokens=5, completion_tokens=1, calls=1))

    async def aclose(self) -> None:
        return None


class ScriptedModel(ChatOnlyModel):
    """The same model with raw-text completion."""

    async def complete(self, prompt: str, config: GenerateConfig) -> ModelOutput:
        self.calls.append((prompt, config))
        return ModelOutput(text=f"raw<{prompt}>", finish_reason="length",
                           usage=Usage(prompt_tokens=2, completion_tokens=3, calls=1))


@contextlib.contextmanager
def in_process_server(model: Any) -> Iterator[tuple[str, list[dict[str, JsonValue]]]]:
    """The loopback server's app on 127.0.0.1 in a thread of this process (so the test sees what
    the scripted model received); also yields every request body as it arrived on the wire."""
    bodies: list[dict[str, JsonValue]] = []

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.method == "POST":
            bodies.append(json.loads(await request.read()))
        return await handler(request)

    app = LoopbackServer(model, [], hang_s=1.0).app()
    app.middlewares.append(record)
    runner = web.AppRunner(app, access_log=None)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> int:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return int(runner.addresses[0][1])

    port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        yield f"http://127.0.0.1:{port}/v1", bodies
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture()
def scripted():
    model = ScriptedModel()
    with in_process_server(model) as (url, bodies):
        yield model, url, bodies


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0)


def _call(spec: str, url: str | None, config: GenerateConfig, prompt: str | None = None) -> ModelOutput:
    """One call through a harness provider (`generate`, or `complete` when a prompt is given)."""
    async def go() -> ModelOutput:
        model = load_model(ModelSpec.parse(spec, base_url=url))
        try:
            return await (model.complete(prompt, config) if prompt is not None else model.generate(MESSAGES, config))
        finally:
            await model.aclose()

    return asyncio.run(go())


# --- the server, through the official client -------------------------------------------------------

def test_response_format_json_schema_reaches_the_model_exactly(scripted):
    model, url, _ = scripted
    resp = _client(url).chat.completions.create(
        model="m", messages=MESSAGES, temperature=0.0, max_tokens=30, seed=7, stop=["\n\n"],
        response_format={"type": "json_schema", "json_schema": {"name": "verdict", "schema": VERDICT, "strict": True}})
    [(messages, config)] = model.calls
    assert messages == MESSAGES
    assert config == GenerateConfig(temperature=0.0, max_tokens=30, seed=7, stop=["\n\n"], json_schema=VERDICT)
    jsonschema.validate(json.loads(resp.choices[0].message.content), VERDICT)


def test_json_object_mode_is_an_object_schema(scripted):
    model, url, _ = scripted
    _client(url).chat.completions.create(model="m", messages=MESSAGES, response_format={"type": "json_object"})
    _client(url).chat.completions.create(model="m", messages=MESSAGES, response_format={"type": "text"})
    assert [c.json_schema for _, c in model.calls] == [{"type": "object"}, None]
    assert model.calls[1][1].temperature == 1.0  # OpenAI's default when the request names none


def test_forced_tool_call_round_trips_in_openai_format(scripted):
    model, url, _ = scripted
    resp = _client(url).chat.completions.create(
        model="m", messages=MESSAGES, tools=[SEARCH_WIRE, CLICK_WIRE],
        tool_choice={"type": "function", "function": {"name": "search"}})
    [(_, config)] = model.calls
    assert config.tools == [SEARCH, CLICK]
    assert config.tool_choice == "search" and config.forced_tool
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "search"
    assert json.loads(call.function.arguments) == {"query": "red shoes", "n": 2}
    assert resp.usage.completion_tokens == 9


@pytest.mark.parametrize("tool_choice", ["auto", "none", "required"])
def test_tool_choice_words_reach_the_model(scripted, tool_choice):
    model, url, _ = scripted
    resp = _client(url).chat.completions.create(model="m", messages=MESSAGES, tools=[SEARCH_WIRE],
                                                tool_choice=tool_choice)
    [(_, config)] = model.calls
    assert config.tool_choice == tool_choice and config.tools == [SEARCH]
    assert bool(resp.choices[0].message.tool_calls) == (tool_choice == "required")


@pytest.mark.parametrize(("extra", "field", "value"), [
    ({"structured_outputs": {"choice": ["yes", "no"]}}, "choice", ["yes", "no"]),
    ({"structured_outputs": {"regex": r"\d{3}"}}, "regex", r"\d{3}"),
    ({"structured_outputs": {"json": VERDICT}}, "json_schema", VERDICT),
    ({"structured_outputs": {"json": json.dumps(VERDICT)}}, "json_schema", VERDICT),
    ({"guided_choice": ["a", "b"]}, "choice", ["a", "b"]),
    ({"guided_regex": "[a-z]+"}, "regex", "[a-z]+"),
    ({"guided_json": VERDICT}, "json_schema", VERDICT),
])
def test_vllm_structured_output_fields_reach_the_model(scripted, extra, field, value):
    model, url, _ = scripted
    _client(url).chat.completions.create(model="m", messages=MESSAGES, extra_body=extra)
    [(_, config)] = model.calls
    assert getattr(config, field) == value
    others = {"choice", "regex", "json_schema"} - {field}
    assert all(getattr(config, f) is None for f in others)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}}},
     "invalid JSON schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "json_schema"),
    ({"response_format": {"type": "yaml"}}, "response_format"),
    ({"tools": [SEARCH_WIRE], "tool_choice": "sometimes"}, "tool_choice 'sometimes'"),
    ({"tools": [SEARCH_WIRE], "tool_choice": {"type": "function", "function": {"name": "buy"}}}, "tool_choice 'buy'"),
    ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools[0]: the function has no name"),
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tool name 'bad name!'"),
    ({"extra_body": {"structured_outputs": {"regex": "(unclosed"}}}, "does not compile"),
    ({"extra_body": {"structured_outputs": {"grammar": "root ::= x"}}}, "structured_outputs.grammar"),
    ({"response_format": {"type": "json_object"}, "extra_body": {"guided_choice": ["a"]}},
     "one output constraint per call"),
    ({"response_format": {"type": "json_object"}, "extra_body": {"guided_json": VERDICT}}, "json_schema given twice"),
])
def test_bad_constraints_are_400_naming_the_input(scripted, kwargs, message):
    model, url, _ = scripted
    with pytest.raises(openai.BadRequestError) as info:
        _client(url).chat.completions.create(model="m", messages=MESSAGES, **kwargs)
    assert info.value.status_code == 400
    assert message in info.value.message
    assert model.calls == []  # never reached the model


def test_tool_call_history_reaches_a_text_model_as_strings(scripted):
    """An agent's second turn: its earlier call (content null) and the tool's result."""
    model, url, _ = scripted
    history = [*MESSAGES,
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"query": "sky"}'}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "the sky is blue"}]
    _client(url).chat.completions.create(model="m", messages=history)
    [(messages, _)] = model.calls
    assert messages[1] == {"role": "assistant",
                           "content": json.dumps([{"name": "search", "arguments": {"query": "sky"}}])}
    assert messages[2] == {"role": "tool", "content": "the sky is blue"}


def test_completions_endpoint_reaches_complete(scripted):
    model, url, _ = scripted
    resp = _client(url).completions.create(model="m", prompt="Once upon a", max_tokens=3, temperature=0.0,
                                           extra_body={"structured_outputs": {"regex": "[a-z ]+"}})
    [(prompt, config)] = model.calls
    assert prompt == "Once upon a"
    assert config == GenerateConfig(temperature=0.0, max_tokens=3, regex="[a-z ]+")
    assert resp.choices[0].text == "raw<Once upon a>"
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage.prompt_tokens == 2 and resp.usage.completion_tokens == 3


def test_completions_endpoint_is_400_for_a_chat_only_model():
    model = ChatOnlyModel()
    with in_process_server(model) as (url, _):
        with pytest.raises(openai.BadRequestError, match="no raw-text completion"):
            _client(url).completions.create(model="m", prompt="hello")
    assert model.calls == []


def test_echo_server_checks_constraints_and_still_echoes():
    with running_server("--echo") as url:
        ok = _client(url).chat.completions.create(model="m", messages=MESSAGES, response_format={"type": "json_object"})
        assert ok.choices[0].message.content == "echo: Is the sky blue?"
        raw = _client(url).completions.create(model="m", prompt="abc")
        assert raw.choices[0].text == "echo: abc"
        with pytest.raises(openai.BadRequestError, match="invalid JSON schema"):
            _client(url).chat.completions.create(model="m", messages=MESSAGES, response_format={
                "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 3}}})


# --- the openai/ provider -----------------------------------------------------------------------

def test_openai_provider_sends_json_schema_natively(scripted):
    model, url, bodies = scripted
    out = _call("openai/m", url, GenerateConfig(max_tokens=20, json_schema=VERDICT))
    assert out.constrained_by == "provider"
    jsonschema.validate(json.loads(out.text), VERDICT)
    assert bodies[0]["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "reply", "schema": VERDICT, "strict": True}}
    assert model.calls[0][1].json_schema == VERDICT
    # A schema OpenAI's strict mode cannot take goes with strict false.
    loose = {"type": "object", "properties": {"score": {"type": "string", "minLength": 1}}}
    _call("openai/m", url, GenerateConfig(json_schema=loose))
    assert bodies[1]["response_format"]["json_schema"]["strict"] is False
    assert model.calls[1][1].json_schema == loose


def test_openai_provider_tool_call_comes_back_parsed(scripted):
    model, url, bodies = scripted
    config = GenerateConfig(tools=[SEARCH, CLICK], tool_choice="search")
    out = _call("openai/m", url, config)
    assert bodies[0]["tools"] == [SEARCH_WIRE, {"type": "function", "function": {
        "name": "click", "description": "", "parameters": CLICK.parameters}}]
    assert bodies[0]["tool_choice"] == {"type": "function", "function": {"name": "search"}}
    assert model.calls[0][1].tools == [SEARCH, CLICK] and model.calls[0][1].tool_choice == "search"
    [call] = out.tool_calls
    assert (call.name, call.arguments) == ("search", {"query": "red shoes", "n": 2})
    assert call.id.startswith("call_")
    assert out.text == "" and out.finish_reason == "tool_calls" and out.constrained_by == "provider"


def test_openai_provider_choice_and_regex_self_hosted_use_structured_outputs(scripted):
    model, url, bodies = scripted
    out = _call("openai/m", url, GenerateConfig(choice=["yes", "no"]))
    assert bodies[0]["structured_outputs"] == {"choice": ["yes", "no"]}
    assert model.calls[0][1].choice == ["yes", "no"]
    assert out.constrained_by == "provider"
    out = _call("openai/m", url, GenerateConfig(regex=r"\d+"))
    assert bodies[1]["structured_outputs"] == {"regex": r"\d+"}
    assert out.constrained_by == "provider"
    assert _call("openai/m", url, GenerateConfig()).constrained_by == "none"


def test_openai_provider_against_api_openai_com_leaves_choice_to_reask(scripted, monkeypatch):
    """No base_url: api.openai.com has no choice/regex field, so nothing extra is sent. The client
    is pointed at the loopback server only to see what went over the wire."""
    model, url, bodies = scripted
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")

    async def go() -> ModelOutput:
        m = load_model(ModelSpec.parse("openai/m"))
        await m.client.close()
        m.replicas.replicas[0] = openai.AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0)
        try:
            return await m.generate(MESSAGES, GenerateConfig(choice=["yes", "no"]))
        finally:
            await m.aclose()

    out = asyncio.run(go())
    assert out.constrained_by == "reask"
    assert not {"structured_outputs", "guided_choice", "response_format", "tools"} & set(bodies[0])
    assert model.calls[0][1].choice is None
    assert constraint_params(GenerateConfig(regex="x"), self_hosted=False) == ({}, "reask")


def test_openai_provider_complete_uses_the_completions_endpoint(scripted):
    model, url, bodies = scripted
    out = _call("openai/m", url, GenerateConfig(max_tokens=4, choice=["A", "B"]), prompt="Pick: ")
    assert out.text == "raw<Pick: >"
    assert (out.finish_reason, out.usage.prompt_tokens, out.usage.completion_tokens) == ("length", 2, 3)
    assert out.constrained_by == "provider"
    assert bodies[0]["prompt"] == "Pick: " and bodies[0]["structured_outputs"] == {"choice": ["A", "B"]}
    assert model.calls[0] == ("Pick: ", GenerateConfig(max_tokens=4, choice=["A", "B"]))
    with pytest.raises(ConstraintError, match="openai/m: tools need the chat endpoint"):
        _call("openai/m", url, GenerateConfig(tools=[SEARCH], tool_choice="search"), prompt="Pick: ")
    assert len(bodies) == 1  # refused before sending


def test_undecodable_tool_arguments_are_an_error_naming_the_tool():
    def message(arguments: str) -> ChatCompletionMessage:
        return ChatCompletionMessage.model_validate({"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "search", "arguments": arguments}}]})

    assert parse_tool_calls("openai/m", message('{"query": "x"}')) == [
        ToolCall(id="call_9", name="search", arguments={"query": "x"})]
    assert parse_tool_calls("openai/m", message("")) == [ToolCall(id="call_9", name="search")]
    with pytest.raises(ModelError, match="openai/m: tool call 'search' has arguments that are not JSON"):
        parse_tool_calls("openai/m", message('{"query": '))
    with pytest.raises(ModelError, match="'search' has arguments that are not a JSON object"):
        parse_tool_calls("openai/m", message('["x"]'))


def test_strict_compatible_schemas():
    assert strict_compatible(VERDICT)
    nested = {"type": "object", "additionalProperties": False, "required": ["items"], "properties": {
        "items": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
        "$defs": {"item": {"type": "object", "properties": {"id": {"type": ["integer", "null"]}},
                           "required": ["id"], "additionalProperties": False}}}
    assert strict_compatible(nested)
    open_inner = json.loads(json.dumps(nested))
    del open_inner["$defs"]["item"]["additionalProperties"]
    assert not strict_compatible(open_inner)
    assert not strict_compatible({**VERDICT, "required": ["score"]})  # a property left optional
    assert not strict_compatible({"type": "array", "items": {"type": "string"}})  # root not an object
    assert not strict_compatible({**VERDICT, "allOf": [{"type": "object"}]})  # keyword strict mode lacks


def test_cache_key_differs_when_only_the_schema_differs():
    other = {**VERDICT, "properties": {**VERDICT["properties"], "score": {"enum": ["YES", "NO"]}}}
    keys = {request_hash("openai/m", MESSAGES, GenerateConfig(json_schema=s)) for s in (VERDICT, other)}
    assert len(keys) == 2
    plain = request_hash("openai/m", MESSAGES, GenerateConfig())
    assert plain not in keys
    # The same schema with its keys in another order is the same request.
    reordered = dict(reversed(list(VERDICT.items())))
    assert request_hash("openai/m", MESSAGES, GenerateConfig(json_schema=reordered)) in keys
    tools_a = request_hash("openai/m", MESSAGES, GenerateConfig(tools=[SEARCH], tool_choice="search"))
    tools_b = request_hash("openai/m", MESSAGES, GenerateConfig(tools=[SEARCH, CLICK], tool_choice="search"))
    assert len({tools_a, tools_b, plain}) == 3


# --- the litellm/ provider -----------------------------------------------------------------------

def test_litellm_sends_schema_and_tools_natively_and_reasks_choice(scripted):
    model, url, bodies = scripted
    out = _call("litellm/openai/m", url, GenerateConfig(json_schema=VERDICT))
    assert out.constrained_by == "provider"
    assert bodies[0]["response_format"]["json_schema"]["schema"] == VERDICT
    assert model.calls[0][1].json_schema == VERDICT

    out = _call("litellm/openai/m", url, GenerateConfig(tools=[SEARCH], tool_choice="required"))
    assert bodies[1]["tool_choice"] == "required" and bodies[1]["tools"][0]["function"]["name"] == "search"
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("search", {"query": "red shoes", "n": 2})]
    assert out.constrained_by == "provider"

    out = _call("litellm/openai/m", url, GenerateConfig(choice=["yes", "no"]))
    assert out.constrained_by == "reask"
    assert not {"structured_outputs", "guided_choice", "extra_body"} & set(bodies[2])
    assert model.calls[2][1].choice is None


def test_litellm_request_kwargs():
    from harness.providers.litellm_provider import LiteLLMModel

    m = LiteLLMModel("anthropic/claude-x")
    kwargs, path = m.request_kwargs(MESSAGES, GenerateConfig(max_tokens=9, tools=[SEARCH], tool_choice="search"))
    assert path == "provider"
    assert kwargs["tools"] == [SEARCH_WIRE]
    assert kwargs["tool_choice"] == {"type": "function", "function": {"name": "search"}}
    assert kwargs["max_tokens"] == 9 and "api_base" not in kwargs
    kwargs, path = m.request_kwargs(MESSAGES, GenerateConfig(regex="[0-9]"))
    assert path == "reask" and "regex" not in json.dumps(kwargs)
    assert m.request_kwargs(MESSAGES, GenerateConfig())[1] == "none"


def test_litellm_request_kwargs_name_a_base_url(monkeypatch):
    from harness.providers.litellm_provider import LiteLLMModel

    m = object.__new__(LiteLLMModel)  # request_kwargs only: no litellm import needed
    m.name, m.model_id, m.base_url = "litellm/openai/served", "openai/served", "http://127.0.0.1:9/v1"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    kwargs, _ = m.request_kwargs(MESSAGES, GenerateConfig())
    assert (kwargs["api_base"], kwargs["api_key"]) == ("http://127.0.0.1:9/v1", "EMPTY")  # a dummy key, none set
    assert list(kwargs)[-2:] == ["api_base", "api_key"]  # after the request's own fields, as before
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    kwargs, _ = m.request_kwargs(MESSAGES, GenerateConfig())
    assert kwargs["api_base"] == "http://127.0.0.1:9/v1" and "api_key" not in kwargs  # litellm reads the set key


# --- the embedded model behind `harness serve` ----------------------------------------------------

@pytest.mark.slow
def test_served_embedded_model_answers_schema_and_forced_tool_through_the_official_client():
    """Real constrained decoding: SmolLM2-135M on CPU behind the project's server. The tool's string
    is bounded: unbounded, this 135M model repeats itself inside the string until max_tokens."""
    short_search = {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"query": {"type": "string", "maxLength": 30}}, "required": ["query"],
        "additionalProperties": False}}}
    with running_server("--model", "local/smollm2-135m") as url:
        client = _client(url)
        resp = client.chat.completions.create(
            model="smollm2", messages=[{"role": "user", "content": "Is the sky blue? Give a verdict."}],
            max_tokens=60, temperature=0.0,
            response_format={"type": "json_schema", "json_schema": {"name": "verdict", "schema": VERDICT}})
        jsonschema.validate(json.loads(resp.choices[0].message.content), VERDICT)

        resp = client.chat.completions.create(
            model="smollm2", messages=[{"role": "user", "content": "Find red shoes in the shop."}],
            max_tokens=60, temperature=0.0, tools=[short_search, CLICK_WIRE],
            tool_choice={"type": "function", "function": {"name": "search"}})
        choice = resp.choices[0]
        assert choice.finish_reason == "tool_calls"
        [call] = choice.message.tool_calls
        assert call.function.name == "search"
        jsonschema.validate(json.loads(call.function.arguments), short_search["function"]["parameters"])

        # Raw text (no chat template) through /v1/completions, constrained to a choice.
        raw = client.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=8,
                                        temperature=0.0, extra_body={"structured_outputs": {"choice": [" Paris", " Rome"]}})
        assert raw.choices[0].text in (" Paris", " Rome")
