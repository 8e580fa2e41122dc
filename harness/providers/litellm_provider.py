"""`litellm/<provider>/<name>`: every other API through litellm.

Security: litellm 1.82.7 and 1.82.8 on PyPI shipped a credential stealer. The version is pinned
exactly in pyproject.toml (extra `litellm`), and the cost map is read from the package, so that
importing litellm makes no network call.

A JSON schema and tools go as OpenAI's `response_format`, `tools` and `tool_choice` (litellm passes
them through or translates them for the backend); a choice set or regex has no portable field, so
the reply's form is left to the caller's re-ask path (`constrained_by="reask"`).
"""

from __future__ import annotations

import os
import time
from typing import Any, Required, TypedDict

import openai
from openai.types.chat import ChatCompletionMessageParam

from harness.errors import HarnessError
from harness.messages import ChatMessage
from harness.spec import ModelSpec
from harness.providers.base import ConstraintPath, GenerateConfig, ModelOutput
from harness.providers.openai_provider import (
    ChatParams,
    ConstraintParams,
    chat_messages,
    chat_params,
    classify_error,
    openai_constraint_fields,
    to_output,
)

BANNED_VERSIONS = {"1.82.7", "1.82.8"}


def import_litellm() -> Any:  # the litellm module (not analysed by mypy: see pyproject.toml)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_TELEMETRY", "False")
    try:
        import litellm
    except ImportError as exc:
        raise HarnessError("litellm/... models need litellm: run `pip install -e '.[litellm]'`") from exc
    from importlib.metadata import version

    if version("litellm") in BANNED_VERSIONS:
        raise HarnessError(
            f"litellm {version('litellm')} is a compromised release: reinstall with `pip install -e '.[litellm]'`"
        )
    litellm.telemetry = False
    return litellm


class Endpoint(TypedDict, total=False):
    """Where litellm sends a request, when it is not the provider's own API."""

    api_base: str
    api_key: str


class LiteLLMRequest(ChatParams, ConstraintParams, Endpoint, total=False):
    """`litellm.acompletion`'s arguments: OpenAI's request fields, and where to send it."""

    model: Required[str]
    messages: Required[list[ChatCompletionMessageParam]]
    num_retries: Required[int]  # 0: retries are the runner's (harness.calls)


class LiteLLMModel:
    def __init__(self, name: str, base_url: str | None = None):
        self.name = f"litellm/{name}"
        self.model_id = name
        self.base_url = base_url
        self.litellm = import_litellm()

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        started = time.perf_counter()
        kwargs, path = self.request_kwargs(messages, config)
        try:
            resp = await self.litellm.acompletion(**kwargs)
        except openai.OpenAIError as exc:
            raise classify_error(self.name, exc) from exc
        return to_output(self.name, resp, started, path)

    def request_kwargs(self, messages: list[ChatMessage],
                       config: GenerateConfig) -> tuple[LiteLLMRequest, ConstraintPath]:
        """`litellm.acompletion`'s arguments for this call, and which path holds the reply's form."""
        kwargs: LiteLLMRequest = {"model": self.model_id, "messages": chat_messages(messages), "num_retries": 0,
                                  **chat_params(config), **openai_constraint_fields(config), **self.endpoint()}
        if not config.constrained:
            return kwargs, "none"
        return kwargs, "reask" if config.choice is not None or config.regex is not None else "provider"

    def endpoint(self) -> Endpoint:
        """A `base_url`'s endpoint; an OpenAI-compatible one without an OPENAI_API_KEY gets a dummy key."""
        if not self.base_url:
            return {}
        if self.model_id.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            return {"api_base": self.base_url, "api_key": "EMPTY"}
        return {"api_base": self.base_url}

    async def aclose(self) -> None:
        return None


class LiteLLMProvider:
    """`litellm/PROVIDER/NAME`: any model litellm reaches (pinned: see DESIGN.md, Security)."""

    name = "litellm"

    def validate(self, spec: ModelSpec) -> None:
        if "/" not in spec.name:
            raise HarnessError(f"{spec.full!r}: litellm specs are litellm/<provider>/<name>, "
                               "e.g. litellm/anthropic/claude-3-5-haiku")

    def create(self, spec: ModelSpec) -> LiteLLMModel:
        return LiteLLMModel(spec.name, spec.base_url)


PROVIDER = LiteLLMProvider()
