"""Constrained decoding in the embedded engine (`kernels/preft/constrain.py`, xgrammar).

Real model (SmolLM2-135M on the CPU), few tokens, tiny schemas: constrained replies always
validate (seeded random schemas and sampling seeds), choice and regex replies match, a
constrained request leaves its batch-mates' tokens (bare, adapted, seeded-sampled) unchanged,
forced tool calls parse into `ToolCall`, unenforceable constraints are `ConstraintError`, and a
reply cut by max_tokens ends with `length`. Tool-call parsing and the CLI's flag checks run
without the model.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys

import jsonschema
import pytest

from harness.errors import HarnessError
from harness.providers.base import ConstraintError, GenerateConfig, ModelOutput, ToolCall, ToolSpec

WEATHER = ToolSpec(name="get_weather", description="The weather in a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                               "required": ["city"]})
ADD = ToolSpec(name="add", description="Add two integers.",
               parameters={"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                                             "b": {"type": "integer", "minimum": 0, "maximum": 99}},
                           "required": ["a", "b"]})
PROMPTS = ["The capital of France is", "Once upon a time, in a small village by the sea,", "def fibonacci(n):",
           "Three reasons to learn Python:"]


def run(coro):
    return asyncio.run(coro)


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def base():
    from harness.providers.embedded import load_model

    return load_model()


@pytest.fixture(scope="module")
def model():
    from preft.provider import LocalModel

    m = LocalModel()
    yield m
    run(m.aclose())


# -- random small schemas ---------------------------------------------------------------------

def _random_field(rng: random.Random, nested: bool) -> dict:
    kinds = ["string", "integer", "boolean", "enum"] + ([] if nested else ["array"])
    kind = rng.choice(kinds)
    if kind == "string":
        return {"type": "string", "maxLength": rng.randint(1, 12)}
    if kind == "integer":
        low = rng.randint(-50, 50)
        return {"type": "integer", "minimum": low, "maximum": low + rng.randint(0, 100)}
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "enum":
        return {"enum": rng.sample(["red", "green", "blue", "small", "large", "yes", "no"], k=rng.randint(1, 4))}
    return {"type": "array", "items": _random_field(rng, True), "maxItems": rng.randint(1, 3)}


def random_schema(rng: random.Random) -> dict:
    """An object of 1-3 fields (string with maxLength, bounded integer, boolean, enum, array with
    maxItems), some required: every reply it admits fits in a few dozen tokens."""
    names = rng.sample(["name", "city", "count", "ok", "color", "tags", "size", "level"], k=rng.randint(1, 3))
    return {"type": "object", "properties": {n: _random_field(rng, False) for n in names},
            "required": [n for n in names if rng.random() < 0.7]}


def random_schemas(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [random_schema(rng) for _ in range(n)]


def test_random_schemas_are_varied_and_valid():
    schemas = random_schemas(6)
    for s in schemas:
        jsonschema.Draft202012Validator.check_schema(s)
    kinds = {f.get("type", "enum") for s in schemas for f in s["properties"].values()}
    assert kinds == {"string", "integer", "boolean", "enum", "array"} and len({json.dumps(s) for s in schemas}) == 6


@pytest.mark.slow
def test_constrained_outputs_always_validate(model):
    """Six random schemas x two sampling seeds (temperature 1), all in one continuous batch."""
    cases = [(schema, seed) for schema in random_schemas(6) for seed in (1, 2)]

    async def all_of_them():
        return await asyncio.gather(*(model.generate(
            ask(f"Fill in this form as JSON: {json.dumps(schema)}"),
            GenerateConfig(json_schema=schema, temperature=1.0, seed=seed, max_tokens=96)) for schema, seed in cases))

    outs = run(all_of_them())
    for (schema, seed), out in zip(cases, outs):
        assert out.finish_reason == "stop", (schema, seed, out.text)
        assert out.constrained_by == "provider"
        jsonschema.validate(json.loads(out.text), schema)  # raises on any invalid reply
    # seeded: the same schema and seed give the same reply again
    again = run(model.generate(ask(f"Fill in this form as JSON: {json.dumps(cases[0][0])}"),
                               GenerateConfig(json_schema=cases[0][0], temperature=1.0, seed=1, max_tokens=96)))
    assert again.text == outs[0].text


@pytest.mark.slow
def test_choice_and_regex_replies_match(model):
    colours = ["red", "green", "light blue"]
    pattern = r"[A-Z][a-z]{1,8} is [0-9]{1,2} years old\."
    configs = [GenerateConfig(choice=colours, max_tokens=8), GenerateConfig(choice=colours, temperature=1.0, seed=4,
                                                                           max_tokens=8),
               GenerateConfig(regex=pattern, max_tokens=32), GenerateConfig(regex=pattern, temperature=1.0, seed=5,
                                                                            max_tokens=32)]

    async def together():
        return await asyncio.gather(*(model.generate(ask("Name a colour, then tell me about a cat."), c)
                                      for c in configs))

    outs = run(together())
    assert outs[0].text in colours and outs[1].text in colours
    assert re.fullmatch(pattern, outs[2].text) and re.fullmatch(pattern, outs[3].text), [o.text for o in outs]
    assert all(o.finish_reason == "stop" and o.constrained_by == "provider" for o in outs)
    raw = run(model.complete("Q: Is the sky blue? A (yes or no):", GenerateConfig(choice=["yes", "no"], max_tokens=4)))
    assert raw.text in ("yes", "no") and raw.constrained_by == "provider"
    free = run(model.complete("Q: Is the sky blue? A (yes or no):", GenerateConfig(max_tokens=4)))
    assert free.constrained_by == "none"


@pytest.mark.slow
def test_constrained_request_leaves_batch_mates_unchanged(base):
    """Bare greedy, prefill-only and all-token adapted, and seeded-sampled requests give the same
    tokens with and without a constrained (adapted, sampled) request in their batch."""
    from harness.providers.embedded import stop_token_ids
    from preft.adapters import random_lora
    from preft.engine import Engine, Request
    from preft.provider import engine_constraint

    hf, tok = base
    stops = stop_token_ids(hf, tok)
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
                                               "rain": {"type": "boolean"}}, "required": ["city", "rain"]}

    def ids(prompt):
        return list(tok(prompt)["input_ids"])

    def batch_mates():
        return [Request(ids(PROMPTS[0]), 12, stop_ids=stops),
                Request(ids(PROMPTS[1]), 12, adapter="lora", mode="preft", stop_ids=stops),
                Request(ids(PROMPTS[2]), 12, adapter="lora", mode="all-token", stop_ids=stops),
                Request(ids(PROMPTS[3]), 12, temperature=1.0, top_p=0.9, seed=9, stop_ids=stops)]

    def constrained(constraint=True):
        config = GenerateConfig(json_schema=schema)
        return Request(ids("The weather today, as JSON:"), 24, adapter="lora", mode="preft", temperature=0.8,
                       seed=7, stop_ids=stops, constraint=engine_constraint(config, hf, tok) if constraint else None)

    def engine():
        e = Engine(hf, max_loras=2)
        e.register(random_lora(hf.config, 4, seed=3, name="lora", targets=("q_proj", "v_proj")))
        return e

    alone = engine().run(batch_mates())
    together = engine()
    mixed = together.run(batch_mates() + [constrained()])
    assert together.stats.max_running == 5  # one batch
    assert [r.output_ids for r in mixed[:4]] == [r.output_ids for r in alone]
    reply = tok.decode(mixed[4].output_ids[:-1], skip_special_tokens=True)
    assert mixed[4].finish_reason == "stop" and mixed[4].output_ids[-1] in stops
    jsonschema.validate(json.loads(reply), schema)
    # the mask acted on its own row: unconstrained, the same request says something else
    assert engine().run([constrained(False)])[0].output_ids != mixed[4].output_ids
    # seeded sampling under the constraint repeats exactly
    assert engine().run([constrained()])[0].output_ids == mixed[4].output_ids


@pytest.mark.slow
def test_forced_tool_calls_parse(model):
    weather = GenerateConfig(tools=[WEATHER, ADD], tool_choice="get_weather", max_tokens=40)
    required = GenerateConfig(tools=[WEATHER, ADD], tool_choice="required", max_tokens=40)

    async def together():
        return await asyncio.gather(model.generate(ask("What is the weather in Oslo?"), weather),
                                    model.generate(ask("What is 2 plus 3?"), required))

    outs = run(together())
    for out in outs:
        assert out.finish_reason == "tool_calls" and out.text == "" and out.constrained_by == "provider"
        assert len(out.tool_calls) == 1 and out.tool_calls[0].id.startswith("call_")
        call = out.tool_calls[0]
        spec = {"get_weather": WEATHER, "add": ADD}[call.name]
        jsonschema.validate(call.arguments, spec.parameters)
    assert outs[0].tool_calls[0].name == "get_weather"
    # tool_choice none: the tools are ignored, the reply is text
    out = run(model.generate(ask("Hi"), GenerateConfig(tools=[WEATHER], tool_choice="none", max_tokens=6)))
    assert out.tool_calls == [] and out.constrained_by == "none"


@pytest.mark.slow
def test_schema_cut_by_max_tokens_is_length(model):
    schema = {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 10}
    out = run(model.generate(ask("List ten fruits as JSON."), GenerateConfig(json_schema=schema, max_tokens=5)))
    assert out.finish_reason == "length" and out.usage.completion_tokens == 5
    assert out.constrained_by == "provider" and out.text.startswith("[")
    with pytest.raises(ValueError):
        json.loads(out.text)


@pytest.mark.parametrize("config, names", [
    (GenerateConfig(json_schema={"type": "string", "pattern": "(?<=x)y"}), "JSON schema"),
    (GenerateConfig(json_schema={"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}), "JSON schema"),
    (GenerateConfig(json_schema={"type": "integer", "minimum": 5, "maximum": 2}), "JSON schema"),
    (GenerateConfig(regex=r"(a)\1"), "regex '(a)\\\\1'"),
    (GenerateConfig(regex=r"(?=a)b"), "regex '(?=a)b'"),
    (GenerateConfig(regex=r"([a-z"), "regex '([a-z'"),
    (GenerateConfig(json_schema={"type": "nonsense"}), "invalid JSON schema"),
])
def test_unenforceable_constraint_is_constraint_error(model, config, names):
    with pytest.raises(ConstraintError, match=re.escape(names)):
        run(model.generate(ask("hi"), config))


# -- tool-call parsing (our logic, no model) -------------------------------------------------

def test_parse_tool_call_accepts_only_an_exact_valid_call():
    from harness.providers.embedded import parse_tool_call

    call = parse_tool_call('{"name": "add", "arguments": {"a": 1, "b": 2}}', [WEATHER, ADD])
    assert call == ToolCall(name="add", arguments={"a": 1, "b": 2})
    for text in ['Sure: {"name": "add", "arguments": {"a": 1, "b": 2}}',  # not only the object
                 '{"name": "add", "arguments": {"a": 1}}',  # a required argument missing
                 '{"name": "sub", "arguments": {"a": 1, "b": 2}}',  # unknown tool
                 '{"name": "add", "arguments": {"a": 1, "b": 2}, "x": 1}',  # extra key
                 '{"name": "add", "arguments": "a=1"}', "[]", "not json"]:
        assert parse_tool_call(text, [WEATHER, ADD]) is None, text


def test_auto_reply_becomes_a_tool_call_only_when_it_is_one():
    from harness.providers.embedded import read_tool_call, with_tool_prompt

    auto = GenerateConfig(tools=[WEATHER], tool_choice="auto")
    call = ModelOutput(text=' {"name": "get_weather", "arguments": {"city": "Oslo"}}\n', request_hash="ab" * 32)
    got = read_tool_call(call, auto)
    assert got.text == "" and got.finish_reason == "tool_calls"
    assert got.tool_calls == [ToolCall(id="call_" + "ab" * 8, name="get_weather", arguments={"city": "Oslo"})]
    prose = ModelOutput(text="It is sunny in Oslo.")
    assert read_tool_call(prose, auto) == prose
    assert read_tool_call(call, GenerateConfig(tools=[WEATHER], tool_choice="none")) == call
    cut = call.model_copy(update={"finish_reason": "length"})
    assert read_tool_call(cut, auto) == cut
    # the tools are described in the system message (merged into one that is there), or not at all
    shown = with_tool_prompt([{"role": "system", "content": "Be brief."}, *ask("Weather?")], auto)
    assert len(shown) == 2 and shown[0]["content"].startswith("Be brief.") and '"get_weather"' in shown[0]["content"]
    assert with_tool_prompt(ask("x"), GenerateConfig(tools=[WEATHER], tool_choice="none")) == ask("x")
    forced = with_tool_prompt(ask("x"), GenerateConfig(tools=[WEATHER, ADD], tool_choice="add"))
    assert forced[0]["role"] == "system" and '"add"' in forced[0]["content"] and "get_weather" not in forced[0]["content"]


# -- harness generate -----------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"json_schema": "missing.json"}, "--json-schema missing.json: cannot read the file"),
    ({"json_schema": "bad.json"}, "--json-schema bad.json: not valid JSON"),
    ({"json_schema": "list.json"}, "--json-schema list.json: a JSON schema is an object"),
    ({"json_schema": "invalid.json"}, "--json-schema invalid.json: invalid JSON schema"),
    ({"regex": "([a-z"}, "--regex ([a-z: regex '([a-z' does not compile"),
    ({"choice": "yes,,no"}, "--choice yes,,no: write non-empty options"),
    ({"choice": "a", "regex": "b"}, "give one of --json-schema, --choice, --regex"),
])
def test_generate_bad_constraint_flags_are_one_clear_error(tmp_path, monkeypatch, kwargs, message):
    from preft.generate import generate_once

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "invalid.json").write_text('{"type": 5}')
    with pytest.raises(HarnessError) as info:
        generate_once(model="local/smollm2-135m", prompt="hi", **kwargs)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_generate_raw_text_uses_complete_when_the_model_has_it(monkeypatch):
    """Our dispatch only (a scripted model): raw text goes to `complete`, with the constraint;
    a model without `complete` keeps the "add --chat" error."""
    import harness.providers as providers
    from preft.generate import generate_once

    seen = {}

    class Chat:
        name = "openai/scripted"

        async def generate(self, messages, config):
            seen["generate"] = (messages, config)
            return ModelOutput(text="chat", constrained_by="provider")

        async def aclose(self):
            pass

    class Raw(Chat):
        async def complete(self, prompt, config):
            seen["complete"] = (prompt, config)
            return ModelOutput(text="yes", constrained_by="provider")

    monkeypatch.setattr(providers, "load_model", lambda spec: Raw())
    got = generate_once(model="openai/scripted", prompt="Is it?", choice="yes,no", base_url="http://127.0.0.1:9/v1")
    assert got["text"] == "yes" and got["constrained_by"] == "provider"
    assert seen["complete"][0] == "Is it?" and seen["complete"][1].choice == ["yes", "no"]
    monkeypatch.setattr(providers, "load_model", lambda spec: Chat())
    with pytest.raises(HarnessError, match="add --chat"):
        generate_once(model="openai/scripted", prompt="Is it?", base_url="http://127.0.0.1:9/v1")
    got = generate_once(model="openai/scripted", prompt="Is it?", chat=True, base_url="http://127.0.0.1:9/v1")
    assert got["text"] == "chat" and seen["generate"][0] == ask("Is it?")


@pytest.mark.slow
def test_generate_local_constraints(base, tmp_path):
    from preft.generate import generate_once

    got = generate_once(model="local/smollm2-135m", prompt="Is the sky blue? Answer:", choice="yes,no", max_tokens=4)
    assert got["text"] in ("yes", "no") and got["constrained_by"] == "provider"
    assert got["finish_reason"] == "stop" and got["token_ids"][-1] in (0, 2)
    with pytest.raises(HarnessError, match=re.escape(r"--regex (a)\1: regex '(a)\\1' cannot be enforced")):
        generate_once(model="local/smollm2-135m", prompt="x", regex=r"(a)\1")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "generate", "--chat", "--prompt", "Is water wet?",
                           "--json-schema", str(path), "--max-tokens", "12", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    jsonschema.validate(json.loads(out["text"]), schema)
    assert out["constrained_by"] == "provider" and out["finish_reason"] == "stop"


# -- harness bench structured ----------------------------------------------------------------

@pytest.mark.slow
def test_bench_structured_rows(base):
    from preft.bench_structured import format_table, run_structured_bench

    result = run_structured_bench(batches=[2], max_tokens=4, repeats=1)
    rows = {r["mode"]: r for r in result["rows"]}
    assert set(rows) == {"free", "json_schema"}
    # fixed length in both modes: the catalogue schema cannot finish in 4 tokens, free ignores EOS
    assert rows["free"]["new_tokens"] == rows["json_schema"]["new_tokens"] == 8
    assert rows["json_schema"]["finish"] == ["length"] and rows["json_schema"]["mask_ms_per_token"] > 0
    assert result["compile"]["cold_s"] > result["compile"]["cached_s"] > 0
    assert result["ratio_constrained_over_free"]["2"] > 0 and "constrained / free" in format_table(result)


def test_bench_structured_bad_input_is_one_line():
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "bench", "structured", "--batches", "1,x"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.strip().startswith("error: --batches '1,x'")
    assert "Traceback" not in proc.stderr


# -- threads and OpenMP waiting ---------------------------------------------------------------

def test_engine_threads_setting(monkeypatch):
    from preft.serving import engine_threads

    monkeypatch.delenv("HARNESS_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert engine_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert engine_threads() == 3
    monkeypatch.setenv("HARNESS_THREADS", "1")
    assert engine_threads() == 1
    for bad in ("0", "two"):
        monkeypatch.setenv("HARNESS_THREADS", bad)
        with pytest.raises(ValueError, match="HARNESS_THREADS"):
            engine_threads()


# Prints OMP_WAIT_POLICY as it is when torch starts loading (libgomp reads it then, once), and
# ends the process there: what happens after is not the question.
_SPY = """
import os, sys
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            print("at torch import:", os.environ.get("OMP_WAIT_POLICY"), flush=True)
            os._exit(0)
sys.meta_path.insert(0, Spy())
import harness.cli, preft.commands, preft.generate, preft.provider, preft.vllm_provider
assert "torch" not in sys.modules, "the CLI, its PreFT commands or a provider module loaded torch"
"""


@pytest.mark.parametrize("call", [
    "import asyncio; from harness.providers.base import GenerateConfig; "
    "asyncio.run(preft.provider.LocalModel().complete('hi', GenerateConfig()))",
    "preft.generate.generate_once(model='local/smollm2-135m', prompt='hi')",
])
def test_openmp_waits_passively_before_torch_loads(call):
    """Both ways to the embedded model (the provider, `harness generate`) set OMP_WAIT_POLICY
    before torch loads; a value the user exported wins."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    for exported, want in ((None, "PASSIVE"), ("ACTIVE", "ACTIVE")):
        if exported:
            env["OMP_WAIT_POLICY"] = exported
        proc = subprocess.run([sys.executable, "-c", _SPY + call], capture_output=True, text=True, timeout=300,
                              env=env)
        assert proc.returncode == 0 and proc.stdout.strip() == f"at torch import: {want}", proc.stderr[-2000:]
