"""Model specs: `provider/name` strings plus per-role options."""

from __future__ import annotations

import re

from pydantic import BaseModel

from harness.errors import HarnessError

PROVIDERS = ("local", "openai", "litellm", "vllm")
DEFAULT_MODEL = "local/smollm2-135m"
_SPEC = re.compile(r"^(?P<provider>[a-z0-9_-]+)/(?P<name>\S+)$")


class ModelSpec(BaseModel):
    """A model named by `provider/name`, e.g. `openai/gpt-4o`, `litellm/anthropic/claude-x`."""

    provider: str
    name: str
    base_url: str | None = None

    @property
    def full(self) -> str:
        return f"{self.provider}/{self.name}"

    @classmethod
    def parse(cls, text: str, *, base_url: str | None = None, flag: str = "--model") -> "ModelSpec":
        match = _SPEC.match(text.strip())
        if not match:
            raise HarnessError(
                f"{flag} {text!r} is not a model spec: write provider/name, e.g. "
                f"{DEFAULT_MODEL} or openai/gpt-4o-mini (providers: {', '.join(PROVIDERS)})"
            )
        provider, name = match["provider"], match["name"]
        if provider not in PROVIDERS:
            raise HarnessError(
                f"{flag} {text!r}: unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}"
            )
        if provider == "litellm" and "/" not in name:
            raise HarnessError(
                f"{flag} {text!r}: litellm specs are litellm/<provider>/<name>, e.g. litellm/anthropic/claude-3-5-haiku"
            )
        return cls(provider=provider, name=name, base_url=base_url)
