"""Typed chat messages (`harness.messages`): a picture and a tool call survive validation and every
provider's wire conversion; a malformed message is one error naming its field; cache keys of runs
written before content parts are unchanged."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from harness.calls import CallPolicy, ManagedModel
from harness.loopback import flat_messages
from harness.messages import ChatMessage, MessageError, check_messages, image_part, text_part
from harness.providers.base import (
    ConstraintError,
    GenerateConfig,
    ModelError,
    ModelOutput,
    ToolSpec,
    raw_prompt_hash,
    request_hash,
)
from harness.providers.embedded import chat_prompt_ids, template_messages
from harness.providers.litellm_provider import LiteLLMModel
from harness.providers.openai_provider import chat_messages

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nnot-a-real-picture").decode()
QUESTION = "Is the arrow red?\nAnswer yes or no."
PICTURE: list[ChatMessage] = [{"role": "user", "content": [text_part(QUESTION), image_part(PNG)]}]
TOOLS: list[ChatMessage] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "call_1", "name": "weather", "arguments": {"city": "Paris"}}],
    },
    {"role": "tool", "content": "sunny, 21 C", "tool_call_id": "call_1"},
]


class Template:
    """A tokenizer stand-in: records the messages its chat template was given."""

    def __init__(self) -> None:
        self.seen: list[list[dict[str, str]]] = []

    def apply_chat_template(self, messages, add_generation_prompt, tokenize, **extra):
        self.seen.append(messages)
        return [len(messages)]


def test_a_picture_and_a_tool_call_round_trip_through_the_adapter_and_every_wire_form():
    assert check_messages(PICTURE) == PICTURE and check_messages(TOOLS) == TOOLS
    # openai (and litellm, which sends the same): an image_url data URL; calls with JSON arguments.
    (user,) = chat_messages(PICTURE)
    assert user["content"] == [
        {"type": "text", "text": QUESTION},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]
    wire = chat_messages(TOOLS)
    assert wire[:2] == TOOLS[:2]
    assert wire[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
        ],
    }
    assert wire[3] == {"role": "tool", "content": "sunny, 21 C", "tool_call_id": "call_1"}
    litellm = object.__new__(LiteLLMModel)  # request_kwargs only: no litellm import needed
    litellm.model_id, litellm.base_url = "anthropic/claude", None
    assert litellm.request_kwargs(PICTURE + TOOLS, GenerateConfig())[0]["messages"] == chat_messages(PICTURE + TOOLS)
    # the embedded model (local/ and vllm/ alike): text only, the call shown as the JSON a call reply takes
    shown = template_messages(TOOLS)
    assert shown[2] == {"role": "assistant", "content": '[{"name": "weather", "arguments": {"city": "Paris"}}]'}
    assert shown[3] == {"role": "tool", "content": "sunny, 21 C"}
    assert template_messages(PICTURE) == [{"role": "user", "content": QUESTION}]
    tokenizer = Template()
    weather = ToolSpec(name="weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})
    chat_prompt_ids(tokenizer, TOOLS, GenerateConfig(tools=[weather]))
    assert tokenizer.seen[0][0]["content"].startswith("Be brief.\n\nYou can call these tools:")
    assert tokenizer.seen[0][2] == shown[2]


def test_a_malformed_message_is_one_error_naming_the_field_and_is_never_sent():
    cases = {
        "messages[0].content[1].image: Field required": [
            {"role": "user", "content": [text_part("x"), {"type": "image"}]}
        ],
        "messages[1].tool_calls[0].name: Field required": [
            TOOLS[1],
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "arguments": {}}]},
        ],
        "messages[0].image: Extra inputs are not permitted": [{"role": "user", "content": "x", "image": PNG}],
        "messages[0].content: Input should be a valid string": [{"role": "system", "content": None}],
    }
    for expected, bad in cases.items():
        with pytest.raises(MessageError) as err:
            check_messages(bad)
        assert str(err.value).startswith(expected), str(err.value)

    class Counting:
        name, sees_images, calls = "openai/m", True, 0

        async def generate(self, messages, config):
            self.calls += 1
            return ModelOutput(text="yes")

        async def aclose(self):
            return None

    model = Counting()
    managed = ManagedModel(model, max_connections=1, policy=CallPolicy(max_retries=0))
    with pytest.raises(ConstraintError, match=r"openai/m: messages\[0\]\.role"):
        asyncio.run(managed.generate([{"role": "bot", "content": "hi"}], GenerateConfig()))  # type: ignore[list-item]
    assert model.calls == 0
    assert asyncio.run(managed.generate(PICTURE, GenerateConfig())).text == "yes" and model.calls == 1
    with pytest.raises(ModelError, match=r"messages\[0\]\.role"):  # the loopback server's HTTP input
        flat_messages([{"role": "developer", "content": "x"}])


def test_cache_keys_of_runs_written_before_content_parts_are_unchanged():
    # Computed by `request_hash` as it was before this change (commit cc63af1), when a picture rode
    # in an `image` key beside the text: the same calls must hit the same cache entries now.
    plain: list[ChatMessage] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
    ]
    assert request_hash("openai/gpt-4o-mini", plain, GenerateConfig()) == (
        "0c3a17e60c21d181cf202401e8c63bb048c5c87f7cd0f39178db4e04a9e29983"
    )
    assert request_hash("openai/gpt-4o-mini", PICTURE, GenerateConfig(max_tokens=4)) == (
        "f194c53d96efd2425b27caada7214fd59ea482ffb1f5dd0eb3c82daafef9c7c9"
    )
    # a raw-text call (`complete`: local/ and vllm/), keyed as a `prompt` turn with its adapter
    assert raw_prompt_hash(
        "local/smollm2-135m", "Once upon a time", GenerateConfig(max_tokens=8), {"adapter": "abc123"}
    ) == ("dd4b68f8ff2024a1477ad7fed8631521774ec1fba64f79ddf10de46e0873e274")
    # and the new forms a flat key could not say are keyed apart
    two = [{"role": "user", "content": [text_part(QUESTION), image_part(PNG), image_part(PNG)]}]
    keys = {request_hash("m", m, GenerateConfig()) for m in (PICTURE, two, TOOLS, TOOLS[:2])}  # type: ignore[arg-type]
    assert len(keys) == 4
    assert json.loads(json.dumps(TOOLS)) == TOOLS  # a message's JSON is the dict itself
