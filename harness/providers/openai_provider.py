"""`openai/<name>`: any OpenAI-compatible chat endpoint through the official `openai` client."""

from __future__ import annotations

import os
import time
from typing import Any, cast
from urllib.parse import urlparse

import openai
from openai.types.chat import ChatCompletionMessageParam

from harness.errors import HarnessError
from harness.spec import ModelSpec
from harness.providers.base import GenerateConfig, ModelError, ModelOutput, RetryableModelError, Usage

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
    def __init__(self, name: str, base_url: str | None = None):
        self.name = f"openai/{name}"
        self.model_id = name
        self.base_url = base_url
        # Retries are the runner's job (harness.calls), so the client's own are off.
        self.client = openai.AsyncOpenAI(
            api_key=api_key_for(base_url),
            base_url=base_url,
            max_retries=0,
            timeout=None,
        )

    async def generate(self, messages: list[dict[str, str]], config: GenerateConfig) -> ModelOutput:
        started = time.perf_counter()
        try:
            resp = await self.client.chat.completions.create(
                model=self.model_id, messages=cast("list[ChatCompletionMessageParam]", messages),
                **chat_params(config))
        except openai.OpenAIError as exc:
            raise classify_error(self.name, exc) from exc
        return to_output(self.name, resp, started)

    async def aclose(self) -> None:
        await self.client.close()


def chat_params(config: GenerateConfig) -> dict[str, Any]:
    """Sampling parameters of a chat-completions request (shared with the litellm provider)."""
    params: dict[str, Any] = {"temperature": config.temperature, "max_tokens": config.max_tokens}
    if config.top_p != 1.0:  # the API default; sending it costs request-encoding time per call
        params["top_p"] = config.top_p
    if config.seed is not None:
        params["seed"] = config.seed
    if config.stop:
        params["stop"] = config.stop
    return params


def to_output(model_name: str, resp: Any, started: float) -> ModelOutput:
    """A chat-completions response (openai's or litellm's, same shape) as a ModelOutput."""
    if not resp.choices:
        raise RetryableModelError(f"{model_name}: response had no choices")
    choice = resp.choices[0]
    usage = Usage(calls=1)
    if getattr(resp, "usage", None) is not None:
        usage.prompt_tokens = resp.usage.prompt_tokens or 0
        usage.completion_tokens = resp.usage.completion_tokens or 0
    return ModelOutput(
        text=choice.message.content or "",
        finish_reason=choice.finish_reason or "stop",
        usage=usage,
        latency_s=time.perf_counter() - started,
    )


def classify_error(model_name: str, exc: Exception) -> ModelError:
    """Map an `openai` exception (litellm's subclass them) to retryable or not."""
    status = getattr(exc, "status_code", None)
    what = f"{model_name}: {type(exc).__name__}" + (f" (HTTP {status})" if status else "")
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return RetryableModelError(what)
    if status is not None and (status >= 500 or status in (408, 409, 429)):
        return RetryableModelError(what)
    return ModelError(what)


class OpenAIProvider:
    """`openai/NAME`: any OpenAI-compatible endpoint (`--base-url`), api.openai.com by default."""

    name = "openai"

    def validate(self, spec: ModelSpec) -> None:
        api_key_for(spec.base_url)

    def create(self, spec: ModelSpec) -> OpenAIModel:
        return OpenAIModel(spec.name, spec.base_url)


PROVIDER = OpenAIProvider()
