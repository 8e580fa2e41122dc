"""`litellm/<provider>/<name>`: every other API through litellm.

Security: litellm 1.82.7 and 1.82.8 on PyPI shipped a credential stealer. The version is pinned
exactly in pyproject.toml (extra `litellm`), and the cost map is read from the package, so that
importing litellm makes no network call.
"""

from __future__ import annotations

import os
import time

import openai

from harness.errors import HarnessError
from harness.providers.base import GenerateConfig, ModelOutput, Usage
from harness.providers.openai_provider import classify_error

BANNED_VERSIONS = {"1.82.7", "1.82.8"}


def import_litellm():
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


class LiteLLMModel:
    def __init__(self, name: str, base_url: str | None = None):
        self.name = f"litellm/{name}"
        self.model_id = name
        self.base_url = base_url
        self.litellm = import_litellm()

    async def generate(self, messages: list[dict[str, str]], config: GenerateConfig) -> ModelOutput:
        lt = self.litellm
        started = time.perf_counter()
        kwargs: dict = {
            "model": self.model_id,
            "messages": messages,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
            "top_p": config.top_p,
            "num_retries": 0,
        }
        if config.seed is not None:
            kwargs["seed"] = config.seed
        if config.stop:
            kwargs["stop"] = config.stop
        if self.base_url:
            kwargs["api_base"] = self.base_url
            if self.model_id.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
                kwargs["api_key"] = "EMPTY"
        try:
            resp = await lt.acompletion(**kwargs)
        except openai.OpenAIError as exc:
            raise classify_error(self.name, exc) from exc
        choice = resp.choices[0]
        usage = Usage(calls=1)
        if getattr(resp, "usage", None):
            usage.prompt_tokens = resp.usage.prompt_tokens or 0
            usage.completion_tokens = resp.usage.completion_tokens or 0
        return ModelOutput(
            text=choice.message.content or "",
            finish_reason=choice.finish_reason or "stop",
            usage=usage,
            latency_s=time.perf_counter() - started,
        )

    async def aclose(self) -> None:
        return None
