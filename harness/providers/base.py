"""The model interface every provider implements, and the errors the runner understands.

Providers only translate: a list of chat messages plus a `GenerateConfig` in, a `ModelOutput`
out. Retries, timeouts, caching and concurrency limits live in `harness.calls`, once, for every
provider; a provider signals "worth retrying" by raising `RetryableModelError`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def add(self, other: "Usage") -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.calls += other.calls


class GenerateConfig(BaseModel):
    """Sampling parameters of one call. `seed` reaches the model (per sample and epoch)."""

    temperature: float = 0.0
    max_tokens: int = 512
    top_p: float = 1.0
    seed: int | None = None
    stop: list[str] | None = None

    def merged(self, **overrides: Any) -> "GenerateConfig":
        data = self.model_dump()
        data.update({k: v for k, v in overrides.items() if v is not None})
        return GenerateConfig(**data)


class ModelOutput(BaseModel):
    text: str
    finish_reason: str = "stop"
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    request_hash: str = ""
    cached: bool = False
    attempts: int = 1


class ModelError(Exception):
    """A call failed in a way that retrying will not fix (bad request, context overflow)."""


class RetryableModelError(ModelError):
    """A call failed in a way that may pass on retry: 429, 5xx, timeout, connection error."""


@runtime_checkable
class Model(Protocol):
    """What a provider returns. `name` is the full spec string, e.g. `openai/gpt-4o`."""

    name: str

    async def generate(self, messages: list[dict[str, str]], config: GenerateConfig) -> ModelOutput:
        ...

    async def aclose(self) -> None:
        ...


def request_hash(model_name: str, messages: list[dict[str, str]], config: GenerateConfig,
                 extra: dict[str, Any] | None = None) -> str:
    """Content address of a call: the cache key. Secrets never enter it (model name and params only)."""
    payload = {
        "model": model_name,
        "messages": messages,
        "config": config.model_dump(),
        "extra": extra or {},
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
