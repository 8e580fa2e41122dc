"""Cost of a run's token usage, per role, where a price is known: one place, used while a run
runs (its spend and `--budget`: harness/spend.py) and after (the leaderboard's cost columns).

Prices come from (first match wins):
1. a `--prices FILE` JSON object (`eval`, `score` and `leaderboard export` take it), `{"<model spec>": {"input_per_mtok": 2.5, "output_per_mtok": 10}}`
   (US dollars per million tokens) -- for endpoints whose owner bills you their own rates;
2. the price table litellm ships inside its package (read as a file, without importing litellm,
   so nothing reaches the network), for `litellm/<provider>/<name>` models and for `openai/<name>`
   models called at OpenAI itself (no `--base-url`).

A model served on your own endpoint (`openai/x` with a base URL, `local/`, `vllm/`) has no list
price: its cost stays empty rather than a made-up zero.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from harness.errors import HarnessError
from harness.providers.base import Usage

LITELLM_TABLE = "model_prices_and_context_window_backup.json"


@dataclass(frozen=True)
class Price:
    input_per_token: float
    output_per_token: float
    source: str

    def cost(self, usage: Usage) -> float:
        return usage.prompt_tokens * self.input_per_token + usage.completion_tokens * self.output_per_token


@lru_cache(maxsize=1)
def _litellm_table() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")  # locates the package without running its __init__
    if spec is None or spec.origin is None:
        return {}
    path = Path(spec.origin).parent / LITELLM_TABLE
    try:
        # json.loads gives Any: litellm's table is one object, model name -> prices.
        return cast(dict[str, Any], json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def load_price_file(path: Path | None) -> dict[str, Price]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HarnessError(f"--prices {path}: no such file; write a JSON object "
                           '{"provider/model": {"input_per_mtok": 2.5, "output_per_mtok": 10}}') from None
    except ValueError as exc:
        raise HarnessError(f"--prices {path}: not valid JSON ({exc}); fix the file") from None
    if not isinstance(data, dict):
        raise HarnessError(f"--prices {path}: expected a JSON object keyed by model spec")
    out: dict[str, Price] = {}
    for spec, entry in data.items():
        try:
            out[spec] = Price(float(entry["input_per_mtok"]) / 1e6, float(entry["output_per_mtok"]) / 1e6, str(path))
        except (TypeError, KeyError, ValueError):
            raise HarnessError(f"--prices {path}: entry {spec!r} needs numbers input_per_mtok and output_per_mtok "
                               "(dollars per million tokens)") from None
    return out


def _from_table(key: str, provider: str | None) -> Price | None:
    entry = _litellm_table().get(key)
    if not isinstance(entry, dict) or "input_cost_per_token" not in entry:
        return None
    if provider and entry.get("litellm_provider") not in (None, provider):
        return None
    return Price(float(entry["input_cost_per_token"]), float(entry.get("output_cost_per_token", 0.0)),
                 "litellm price table")


def price_for(spec: str, *, base_url: str | None, overrides: dict[str, Price]) -> Price | None:
    """The price of one model spec as it was called in a run, or None when none is known."""
    if spec in overrides:
        return overrides[spec]
    provider, _, name = spec.partition("/")
    if provider == "litellm":
        sub, _, bare = name.partition("/")
        if base_url:  # litellm pointed at a custom endpoint: not the list price
            return None
        return _from_table(name, None) or (_from_table(bare, sub) if bare else None)
    if provider == "openai" and not base_url:
        return _from_table(name, "openai")
    return None


def role_costs(models: dict[str, str], usage: dict[str, Usage], *, base_url: str | None,
               overrides: dict[str, Price]) -> dict[str, float | None]:
    """Dollars per role for one run; None for a role whose model has no known price."""
    out: dict[str, float | None] = {}
    for role, used in usage.items():
        if used.prompt_tokens == 0 and used.completion_tokens == 0:
            out[role] = 0.0  # every call answered from the cache: nothing billed, whatever the price
            continue
        spec = models.get(role)
        price = price_for(spec, base_url=base_url, overrides=overrides) if spec else None
        out[role] = price.cost(used) if price else None
    return out
