"""vLLM on its CPU build (marker `vllm`): run with `make test-vllm`, in `.venv-vllm`.

One in-process engine for the module (startup ~30-50 s), one OpenAI-compatible vLLM server. The
engine also serves the structured-output tests (JSON schema, choice, regex, forced and auto tool
calls, raw-text `complete`, cache keys, constraints vLLM rejects). In the default environment (no vllm) the module is skipped, and the provider's install hint is
checked instead.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import time

import httpx
import pytest

from harness.errors import HarnessError
from harness.providers import GenerateConfig, ModelError, load_model
from preft.vllm_provider import vllm_available
from harness.spec import ModelSpec
from tests.conftest import REPO

pytestmark = pytest.mark.vllm

FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
QUESTIONS = [FRANCE, [{"role": "user", "content": "Name three fruits."}],
             [{"role": "user", "content": "Write one sentence about the sea."}]]


def test_without_vllm_the_spec_is_one_clear_error():
    if vllm_available():
        pytest.skip("vllm is installed here")
    with pytest.raises(HarnessError, match="make vllm-install"):
        load_model(ModelSpec.parse("vllm/smollm2-135m"))


needs_vllm = pytest.mark.skipif(not vllm_available(), reason="vllm not installed: `make vllm-install; make test-vllm`")


@pytest.fixture(scope="module")
def engine(loop):
    model = load_model(ModelSpec.parse("vllm/smollm2-135m"))
    yield model
    loop.run_until_complete(model.aclose())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_vllm
def test_greedy_generation_equals_the_embedded_engine(engine, loop):
    """Same weights, same prompt ids: vLLM's greedy text equals the PreFT engine's (base mode)."""
    from preft.provider import LocalModel

    config = GenerateConfig(max_tokens=24)
    async def together():
        return await asyncio.gather(*[engine.generate(q, config) for q in QUESTIONS])

    got = loop.run_until_complete(together())
    local = LocalModel()
    want = [asyncio.run(local.generate(q, config)) for q in QUESTIONS]
    for g, w in zip(got, want):
        assert g.text == w.text
        assert g.usage.prompt_tokens == w.usage.prompt_tokens and g.usage.completion_tokens > 0
    assert "Paris" in got[0].text


@needs_vllm
def test_seeded_sampling_is_reproducible(engine, loop):
    sampled = GenerateConfig(max_tokens=16, temperature=1.0, seed=5)
    a = loop.run_until_complete(engine.generate(QUESTIONS[2], sampled))
    b = loop.run_until_complete(engine.generate(QUESTIONS[2], sampled))
    c = loop.run_until_complete(engine.generate(QUESTIONS[2], sampled.merged(seed=6)))
    assert a.text == b.text and a.text != c.text
    assert loop.run_until_complete(engine.generate(FRANCE, GenerateConfig(max_tokens=3))).finish_reason == "length"


@needs_vllm
def test_served_model_round_trip_through_the_openai_provider(engine, loop):
    """`harness serve --model vllm/...` starts vLLM's server on loopback; `openai/<name>` with
    --base-url gets the same greedy text as the in-process engine."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "harness.cli", "serve", "--model", "vllm/smollm2-135m",
                               "--port", str(port)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, server.stderr.read().decode()[-2000:]
            try:
                if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "vLLM server did not come up in 240 s"
            time.sleep(2)
        client = load_model(ModelSpec.parse("openai/smollm2-135m", base_url=base))
        config = GenerateConfig(max_tokens=24)
        served = asyncio.run(client.generate(FRANCE, config))
        direct = loop.run_until_complete(engine.generate(FRANCE, config))
        assert served.text == direct.text
        assert served.usage.prompt_tokens == direct.usage.prompt_tokens
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


# ---- structured output, tool calls and raw-text prompts (vLLM's structured outputs, its tool parser)

CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}, "capital": {"type": "boolean"}},
        "required": ["city", "capital"], "additionalProperties": False}
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
                                            "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]


def _tools():
    from harness.providers.base import ToolSpec

    add = ToolSpec(name="add", description="Add two integers",
                   parameters={"type": "object", "properties": {"a": {"type": "integer", "maximum": 999},
                                                                "b": {"type": "integer", "maximum": 999}},
                               "required": ["a", "b"], "additionalProperties": False})
    return [ToolSpec(name="get_weather", description="The weather in a city", parameters=WEATHER), add]


@needs_vllm
def test_json_schema_reply_validates(engine, loop):
    import jsonschema

    config = GenerateConfig(max_tokens=40, json_schema=CITY)
    configs = [config, config.merged(temperature=1.0, seed=3), config.merged(temperature=1.0, seed=4)]

    async def together():
        return await asyncio.gather(*[engine.generate(FRANCE, c) for c in configs])

    for out in loop.run_until_complete(together()):
        assert out.finish_reason == "stop" and out.constrained_by == "provider", out
        jsonschema.validate(json.loads(out.text), CITY)
        assert "\n" not in out.text  # compact JSON (the engine's disable_any_whitespace)


@needs_vllm
def test_choice_and_regex_replies_hold_their_form(engine, loop):
    choices = ["Paris", "London", "Rome"]
    regex = r"[0-9]{3}-[A-Z]{2}"
    configs = [GenerateConfig(max_tokens=8, choice=choices), GenerateConfig(max_tokens=8, choice=choices, temperature=1.0, seed=9),
               GenerateConfig(max_tokens=12, regex=regex), GenerateConfig(max_tokens=12, regex=regex, temperature=1.0, seed=9)]

    async def together():
        return await asyncio.gather(*[engine.generate(FRANCE, c) for c in configs])

    outs = loop.run_until_complete(together())
    assert outs[0].text in choices and outs[1].text in choices
    assert re.fullmatch(regex, outs[2].text) and re.fullmatch(regex, outs[3].text), [o.text for o in outs]
    assert all(o.constrained_by == "provider" and o.finish_reason == "stop" for o in outs)


@needs_vllm
def test_forced_tool_call_parses_with_valid_arguments(engine, loop):
    import jsonschema

    tools = _tools()
    named = loop.run_until_complete(engine.generate(ASK_WEATHER, GenerateConfig(max_tokens=48, tools=tools, tool_choice="get_weather")))
    assert named.text == "" and named.finish_reason == "tool_calls" and named.constrained_by == "provider"
    [call] = named.tool_calls
    assert call.name == "get_weather" and call.id
    jsonschema.validate(call.arguments, WEATHER)
    required = loop.run_until_complete(engine.generate(ASK_WEATHER, GenerateConfig(max_tokens=48, tools=tools, tool_choice="required")))
    [call] = required.tool_calls
    jsonschema.validate(call.arguments, next(t.parameters for t in tools if t.name == call.name))


@needs_vllm
def test_auto_tools_get_the_embedded_prompt_and_protocol(engine, loop):
    """SmolLM2's template ignores `tools=`: vLLM gets the embedded model's prompt, the one `local/`
    sends (`embedded.chat_prompt_ids`), and reads the reply by the embedded protocol (exactly one
    valid {"name", "arguments"} object is a call; anything else stays text). Nothing enforces an
    auto call, so, as on `local/`, it is not labelled as constrained by the provider."""
    from harness.providers.embedded import chat_prompt_ids
    from preft.vllm_provider import chat_prompt

    tools = _tools()
    auto = GenerateConfig(max_tokens=24, tools=tools)
    out = loop.run_until_complete(engine.generate(ASK_WEATHER, auto))
    plain = loop.run_until_complete(engine.generate(ASK_WEATHER, GenerateConfig(max_tokens=16, tools=tools, tool_choice="none")))
    tokenizer = _tokenizer()
    ids, native = chat_prompt(tokenizer, ASK_WEATHER, auto)
    assert not native and ids == chat_prompt_ids(tokenizer, ASK_WEATHER, auto)
    assert out.usage.prompt_tokens == len(ids) > plain.usage.prompt_tokens + 50
    assert out.constrained_by == "none" and plain.constrained_by == "none" and plain.tool_calls == []
    if out.tool_calls:
        assert out.text == "" and out.finish_reason == "tool_calls" and out.tool_calls[0].id == f"call_{out.request_hash[:16]}"


@needs_vllm
def test_a_native_template_reply_is_read_by_vllms_tool_parser(engine):
    """Where a template renders the tools itself, vLLM's hermes parser reads the reply: a call in the
    Hermes format is parsed, a malformed or unknown call stays text."""
    from preft.vllm_provider import native_tool_calls

    tokenizer, auto = _tokenizer(), GenerateConfig(max_tokens=16, tools=_tools())
    reply = 'Let me check. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'
    text, [call] = native_tool_calls(tokenizer, reply, auto, engine.name)
    assert text == "Let me check. " and call.name == "get_weather" and call.arguments == {"city": "Paris", "unit": "celsius"}
    for bad in ['<tool_call>{"name": "get_weather", "arguments": {"city": "Par', '<tool_call>{"name": "rm", "arguments": {}}</tool_call>',
                '<tool_call>{"name": "add", "arguments": {"a": "one", "b": 2}}</tool_call>', "It is sunny."]:
        assert native_tool_calls(tokenizer, bad, auto, engine.name) == (bad, [])


def _tokenizer():
    from transformers import AutoTokenizer

    from preft.vllm_provider import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("smollm2-135m"))


@needs_vllm
def test_a_template_that_renders_tools_gets_them_natively():
    from preft.vllm_provider import chat_prompt

    def chat_prompt_ids(*args):
        ids, native = chat_prompt(*args)
        assert native
        return ids

    tokenizer = _tokenizer()
    tokenizer.chat_template = ("{% if tools %}<|im_start|>system\nTOOLS {{ tools | map(attribute='function.name') | join(',') }}"
                               "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                               "<|im_end|>\n{% endfor %}<|im_start|>assistant\n")
    config = GenerateConfig(tools=_tools())
    text = tokenizer.decode(chat_prompt_ids(tokenizer, ASK_WEATHER, config))
    assert "TOOLS get_weather,add" in text and "<tool_call>" not in text
    named = tokenizer.decode(chat_prompt_ids(tokenizer, ASK_WEATHER, config.merged(tool_choice="add")))
    assert "TOOLS add<|im_end|>" in named


@needs_vllm
def test_complete_generates_from_raw_text(engine, loop):
    prompt = "The capital of France is"
    out = loop.run_until_complete(engine.complete(prompt, GenerateConfig(max_tokens=8)))
    assert out.usage.prompt_tokens == len(_tokenizer()(prompt)["input_ids"]) == 5  # no chat template around it
    assert "Paris" in out.text and out.constrained_by == "none"
    picked = loop.run_until_complete(engine.complete(prompt, GenerateConfig(max_tokens=8, choice=[" Paris", " Rome"])))
    assert picked.text in (" Paris", " Rome") and picked.constrained_by == "provider"
    with pytest.raises(ModelError, match="empty after tokenisation"):
        loop.run_until_complete(engine.complete("", GenerateConfig(max_tokens=4)))


@needs_vllm
def test_constrained_requests_have_their_own_cache_keys(engine, loop):
    from harness.providers.base import request_hash

    plain = GenerateConfig(max_tokens=4)
    configs = [plain, plain.merged(choice=["Paris", "Rome"]), plain.merged(choice=["Paris", "Lyon"]),
               plain.merged(regex="[A-Z][a-z]+"), plain.merged(json_schema=CITY), plain.merged(tools=_tools(), tool_choice="add")]

    async def together():
        return await asyncio.gather(*[engine.generate(FRANCE, c) for c in configs],
                                    engine.complete("The capital of France is", plain))

    outs = loop.run_until_complete(together())
    keys = [o.request_hash for o in outs]
    assert len(set(keys)) == len(keys)
    assert keys[0] == request_hash(engine.name, FRANCE, plain)  # unconstrained keys as before the constraint fields


@needs_vllm
def test_a_constraint_vllm_rejects_is_one_error_naming_it(engine, loop):
    from harness.providers.base import ConstraintError

    deep: dict = {"type": "string"}
    for _ in range(70):  # a valid JSON schema, nested past vLLM's limit (64 levels)
        deep = {"type": "array", "items": deep}
    with pytest.raises(ConstraintError, match=r"(?s)vllm/smollm2-135m: vLLM rejects the json_schema .*nested too deeply"):
        loop.run_until_complete(engine.generate(FRANCE, GenerateConfig(max_tokens=4, json_schema=deep)))
    with pytest.raises(ConstraintError, match=r"(?s)rejects the regex '\(a\)\\\\1'.*[Bb]ackreference"):
        loop.run_until_complete(engine.generate(FRANCE, GenerateConfig(max_tokens=4, regex=r"(a)\1")))
    assert loop.run_until_complete(engine.generate(FRANCE, GenerateConfig(max_tokens=4))).text  # still serving
