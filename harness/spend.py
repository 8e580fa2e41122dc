"""What a run pays, per role, while it runs; and the caps that stop it (`--budget ROLE=AMOUNT`).

Spend is counted per model call as it returns (a call answered from the cache costs nothing) and
priced with `harness.prices` (one price table for the run and the leaderboard). A budget names a
role or a role family (`judge` caps the whole panel: judge, judge_2, ...) and an amount in US
dollars (`5usd`, `$5`, `0.5usd`) or tokens (`200000tokens`, prompt + completion).

When a capped role has spent its budget, the next call of any role raises `BudgetReached`: no new
sample starts, a sample in flight stops at its next call and is not recorded, and the run ends
`interrupted` with the reason in its manifest. Every call it paid for is in the call cache, so
`--resume` with a raised budget answers them again from there: nothing recorded is lost and nothing
is paid twice. Calls already in flight when the cap was reached finish and are counted, so a run
can end above its cap by at most those calls (at most `--max-connections` per model).

The meter counts calls in this process (the asyncio executor). `--executor ray` runs calls on other
nodes, so a budget with it is refused before the run; its spend is read from the records afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from harness.errors import HarnessError
from harness.prices import Price
from harness.providers.base import Usage
from harness.spec import panel_roles

AMOUNT = re.compile(r"^\s*(?:\$\s*(?P<dollars>\d+(?:\.\d+)?)|(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[A-Za-z]+))\s*$")
UNITS = {"usd": "usd", "dollars": "usd", "tokens": "tokens", "tok": "tokens", "ktokens": "ktokens",
         "mtokens": "mtokens"}


class Budget(BaseModel):
    """One cap: a role (or role family) and an amount in dollars or tokens (exactly one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str
    usd: float | None = Field(None, gt=0)
    tokens: int | None = Field(None, gt=0)

    def text(self) -> str:
        return f"{self.role}=${self.usd:g}" if self.usd is not None else f"{self.role}={self.tokens}tokens"


def parse_budget(item: str) -> Budget:
    """`judge=5usd`, `judge=$5`, `assistant=200000tokens` (also `200ktokens`); one clear error otherwise."""
    role, sep, amount = item.partition("=")
    match = AMOUNT.match(amount) if sep and role.strip() else None
    unit = UNITS.get((match.group("unit") or "").lower()) if match and match.group("unit") else None
    if match is None or (match.group("unit") and unit is None):
        raise HarnessError(f"--budget {item!r}: write ROLE=AMOUNT with AMOUNT in usd or tokens, "
                           "e.g. --budget judge=5usd or --budget assistant=200000tokens")
    role = role.strip()
    if match.group("dollars") is not None:
        return Budget(role=role, usd=float(match.group("dollars")))
    number = float(match.group("number"))
    if unit == "usd":
        return Budget(role=role, usd=number)
    scale = {"tokens": 1, "ktokens": 1_000, "mtokens": 1_000_000}[unit or "tokens"]
    return Budget(role=role, tokens=int(number * scale))


def parse_budgets(items: Sequence[str]) -> list[Budget]:
    budgets = [parse_budget(i) for i in items]
    roles = [b.role for b in budgets]
    twice = sorted({r for r in roles if roles.count(r) > 1})
    if twice:
        raise HarnessError(f"--budget {twice[0]}=...: given twice; give one cap per role")
    return budgets


def members(key: str, roles: Sequence[str]) -> list[str]:
    """The roles a budget key covers: the role itself, or a whole judge panel for `judge`."""
    if key == "judge":
        return panel_roles(roles)
    return [key] if key in roles else []


def check_budgets(budgets: Sequence[Budget], roles: Sequence[str], prices: Mapping[str, Price | None]) -> None:
    """Bad input before anything runs: a budget for a role the run does not call, or in dollars for
    a role whose model has no known price."""
    for b in budgets:
        covered = members(b.role, roles)
        if not covered:
            raise HarnessError(f"--budget {b.text()}: this run calls no role {b.role!r} (roles: {', '.join(roles)})")
        unpriced = [r for r in covered if prices.get(r) is None]
        if b.usd is not None and unpriced:
            raise HarnessError(f"--budget {b.text()}: the {unpriced[0]} model has no known price (a self-hosted "
                               "endpoint, or not in litellm's table): give --prices FILE with its rates, or cap it "
                               f"in tokens (--budget {b.role}=200000tokens)")


class BudgetReached(BaseException):
    """Raised at a model call once a cap is reached. A BaseException, as cancellation is: a suite's
    own `except Exception` around its calls (recording a judge's failure as a score) must not turn
    a stop into a recorded result."""


class RoleSpend(BaseModel):
    """What one role paid: tokens and calls not answered from the cache, and their cost (None: no
    known price)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    usd: float | None = None


class SpendMeter:
    """The run's spend so far, per role (carried over from the sessions before a resume), and its
    caps. One per run, in the driver; `SampleContext.generate` calls `check` before a call and
    `charge` after."""

    def __init__(self, budgets: Sequence[Budget], prices: Mapping[str, Price | None],
                 spent: Mapping[str, Usage] | None = None):
        self.budgets = list(budgets)
        self.prices = dict(prices)
        self.spent: dict[str, Usage] = {r: u.model_copy() for r, u in (spent or {}).items()}
        self.stop_reason: str | None = None

    def charge(self, role: str, usage: Usage) -> None:
        self.spent.setdefault(role, Usage()).add(usage)

    def check(self, role: str) -> None:
        """Raise BudgetReached once any cap is reached (for every role: the run stops as a whole)."""
        if self.stop_reason is None:
            for b in self.budgets:
                over = self._over(b)
                if over:
                    self.stop_reason = over
                    break
        if self.stop_reason is not None:
            raise BudgetReached(self.stop_reason)

    def _over(self, b: Budget) -> str | None:
        roles = members(b.role, list(self.spent))
        if b.tokens is not None:
            used = sum(self.spent[r].prompt_tokens + self.spent[r].completion_tokens for r in roles)
            return f"budget {b.text()} reached: {used} tokens spent" if used >= b.tokens else None
        cost = sum(self.cost(r) or 0.0 for r in roles)
        return f"budget {b.text()} reached: ${cost:.4f} spent" if b.usd is not None and cost >= b.usd else None

    def cost(self, role: str) -> float | None:
        used, price = self.spent.get(role), self.prices.get(role)
        if used is None or (used.prompt_tokens == 0 and used.completion_tokens == 0):
            return 0.0
        return price.cost(used) if price else None

    def table(self) -> dict[str, RoleSpend]:
        return {r: RoleSpend(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens, calls=u.calls,
                             usd=self.cost(r)) for r, u in sorted(self.spent.items())}

    def describe(self) -> str:
        """The progress bar's live line: dollars where priced, tokens otherwise, and the caps."""
        parts = []
        for role, s in self.table().items():
            tokens = s.prompt_tokens + s.completion_tokens
            parts.append(f"{role} ${s.usd:.4f}" if s.usd is not None and s.usd > 0 else f"{role} {tokens:,} tok")
        caps = f" (caps: {', '.join(b.text() for b in self.budgets)})" if self.budgets else ""
        return ("spend: " + ", ".join(parts) + caps) if parts else ""
