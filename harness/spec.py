"""Model specs: `provider/name` strings plus per-role options."""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib.metadata import entry_points

from pydantic import BaseModel

from harness.errors import HarnessError

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
                f"{DEFAULT_MODEL} or openai/gpt-4o-mini (providers: {', '.join(provider_names())})"
            )
        provider, name = match["provider"], match["name"]
        if provider not in provider_names():
            raise HarnessError(
                f"{flag} {text!r}: unknown provider {provider!r}; use one of {', '.join(provider_names())}"
            )
        return cls(provider=provider, name=name, base_url=base_url)


def provider_names() -> tuple[str, ...]:
    """The installed providers (entry-point group `harness.providers`), without importing them."""
    return tuple(sorted(ep.name for ep in entry_points(group="harness.providers")))


def judge_panel(specs: list[str]) -> dict[str, str]:
    """`--judge-model a --judge-model b` as roles: {"judge": a, "judge_2": b}."""
    return {("judge" if i == 0 else f"judge_{i + 1}"): spec for i, spec in enumerate(specs)}


def panel_roles(roles: Iterable[str]) -> list[str]:
    """The judge panel's roles among `roles`, in order: `judge`, `judge_2`, `judge_3`, ..."""
    members = [r for r in roles if r == "judge" or (r.startswith("judge_") and r[6:].isdigit())]
    return sorted(members, key=lambda r: 1 if r == "judge" else int(r[6:]))
