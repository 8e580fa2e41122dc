"""One embedded model, one prompt: `local/smollm2-135m` (the PreFT engine) and `vllm/smollm2-135m`
build the same prompt token ids for the same messages and tools (`harness.providers.embedded`).

No engine runs: the local provider's `_run` is replaced to capture the ids it would submit, and the
vLLM provider's prompt builder is a plain function of the tokenizer (vLLM need not be installed).
The shared prompt is the one `local/` sent before it was shared, and its cache keys are unchanged.
"""

from __future__ import annotations

import asyncio

import pytest

from harness.providers.base import GenerateConfig, ToolSpec, request_hash

WEATHER = ToolSpec(name="get_weather", description="The weather in a city",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
ADD = ToolSpec(name="add", description="Add",
               parameters={"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                           "required": ["a", "b"]})
MESSAGES = {"user": [{"role": "user", "content": "Weather in Oslo?"}],
            "system": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}]}
CONFIGS = {"plain": GenerateConfig(max_tokens=8), "auto": GenerateConfig(tools=[WEATHER, ADD]),
           "required": GenerateConfig(tools=[WEATHER, ADD], tool_choice="required"),
           "named": GenerateConfig(tools=[WEATHER, ADD], tool_choice="add"),
           "none": GenerateConfig(tools=[WEATHER, ADD], tool_choice="none")}


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from harness.providers.embedded import ensure_converted

    return AutoTokenizer.from_pretrained(str(ensure_converted()))


def local_prompt_ids(tokenizer, messages, config, monkeypatch) -> list[int]:
    """The ids `local/smollm2-135m` would submit to its engine (tokenizer only, no weights)."""
    from preft import provider

    seen: dict = {}

    async def tokenizer_only():
        return None, tokenizer

    async def capture(self, ids, config, key, started):
        seen["ids"] = ids

    monkeypatch.setattr(provider, "_load", tokenizer_only)
    monkeypatch.setattr(provider.LocalModel, "_run", capture)
    asyncio.run(provider.LocalModel().generate(messages, config))
    return seen["ids"]


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("messages", sorted(MESSAGES))
def test_local_and_vllm_send_the_same_prompt(tokenizer, monkeypatch, messages, config):
    from preft.vllm_provider import chat_prompt

    msgs, cfg = MESSAGES[messages], CONFIGS[config]
    vllm_ids, native = chat_prompt(tokenizer, msgs, cfg)
    assert not native  # SmolLM2's template renders no tools: the embedded protocol, not vLLM's parser
    assert vllm_ids == local_prompt_ids(tokenizer, msgs, cfg, monkeypatch)


def test_the_shared_prompt_is_the_one_local_sent_before(tokenizer):
    """Written out from the local provider before the prompt moved into `embedded`; `local/` calls
    keep their cache keys (the model name, the messages as given and the config)."""
    from harness.providers.embedded import MODEL_NAME, chat_prompt_ids

    text = tokenizer.decode(chat_prompt_ids(tokenizer, MESSAGES["system"], CONFIGS["auto"]))
    assert text == (
        '<|im_start|>system\nBe brief.\n\nYou can call these tools:\n'
        '{"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", '
        '"properties": {"city": {"type": "string"}}, "required": ["city"]}}\n'
        '{"name": "add", "description": "Add", "parameters": {"type": "object", "properties": {"a": {"type": '
        '"integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}\n'
        'To call a tool, reply with only a JSON object: {"name": <tool name>, "arguments": {...}}.\n'
        'If no tool is needed, answer in plain text.<|im_end|>\n<|im_start|>user\nWeather?<|im_end|>\n'
        '<|im_start|>assistant\n')
    assert MODEL_NAME == "local/smollm2-135m"
    assert request_hash(MODEL_NAME, MESSAGES["user"], CONFIGS["plain"]) == \
        "a81a77f2d9288191560db6ad2d0f2115e24d5712f916699e3f3e46b503f17cf6"
    assert request_hash(MODEL_NAME, MESSAGES["system"], CONFIGS["auto"]) == \
        "35248921bad19f215874848b6e831c02e119f3f0a1e5658c16c84aae7fff2a72"
