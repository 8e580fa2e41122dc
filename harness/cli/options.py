"""The options `eval` and `score` share (`RunOptions`: how a run executes, never hashed), given to
a command as one parameter by `with_run_options`, and the help line for the role shorthands
(`harness.roles` parses them from the command's extra arguments)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, TypedDict, TypeVar

import typer
from typer.models import OptionInfo
from pydantic import BaseModel

if TYPE_CHECKING:
    from harness.spend import Budget

F = TypeVar("F", bound=Callable[..., Any])

EXTRA_ARGS = {"allow_extra_args": True, "ignore_unknown_options": True}
SHORTHAND_HELP = ("Shorthands: --judge-model SPEC (repeat for a panel), --ROLE-model SPEC for the suite's other roles "
                  "(e.g. --planner-model, --user-model, --world-model), --max-tokens N, --temperature T, "
                  "--judge-max-tokens N, --role-base-url ROLE=URL, --agent NAME, --action-format FORM. With a model under test "
                  "other than the embedded one, every graded or simulating role must be named (--allow-embedded ROLE "
                  "lets it be the embedded model).")


# ---------------------------------------------------------------- the options eval and score share
class ExecutionFields(TypedDict):
    """The `RunConfig` fields `RunOptions` sets (`RunOptions.config_fields`)."""

    max_connections: int
    call_timeout_s: float
    sample_timeout_s: float
    max_retries: int
    cache: bool
    budgets: list[Budget]
    prices_file: str | None


class RunOptions(BaseModel):
    """How a run executes: never part of its results (not hashed)."""

    run_dir: Path = Path("runs")
    max_connections: int = 8
    call_timeout: float = 600.0
    sample_timeout: float = 3600.0
    max_retries: int = 5
    cache: bool = True
    progress: bool = True
    executor: str = "asyncio"
    ray_address: Optional[str] = None
    budget: list[str] = []
    prices: Optional[Path] = None

    def config_fields(self) -> ExecutionFields:
        """The RunConfig fields these options set (execution only: never hashed)."""
        from harness.spend import parse_budgets

        return {"max_connections": self.max_connections, "call_timeout_s": self.call_timeout,
                "sample_timeout_s": self.sample_timeout, "max_retries": self.max_retries, "cache": self.cache,
                "budgets": parse_budgets(self.budget), "prices_file": str(self.prices) if self.prices else None}


def run_option_parameters() -> list[inspect.Parameter]:
    """The typer parameters of `RunOptions`, one per field (the flags users know)."""
    from harness.cli.kit import RUN_DIR

    # `typer.Option` is typed `Any` (so that it can stand as a default) and returns an OptionInfo.
    options: dict[str, OptionInfo] = {
        "run_dir": RUN_DIR,
        "max_connections": typer.Option(8, "--max-connections", min=1, help="Calls in flight per provider and key "
                                        "(shared by all workers; halves on 429, recovers)."),
        "call_timeout": typer.Option(600.0, "--call-timeout", min=0.1, help="Seconds per model call attempt."),
        "sample_timeout": typer.Option(3600.0, "--sample-timeout", min=0.1, help="Seconds per sample."),
        "max_retries": typer.Option(5, "--max-retries", min=0, help="Retries on 429/5xx/timeouts/connection errors."),
        "cache": typer.Option(True, "--cache/--no-cache", help="Read and write the model-call cache."),
        "progress": typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
        "executor": typer.Option("asyncio", "--executor", help="Where samples run: asyncio (this process) or ray "
                                 "(Ray tasks on a cluster; the `ray` extra)."),
        "ray_address": typer.Option(None, "--ray-address", help="With --executor ray: the cluster's HOST:PORT "
                                    "(default: start a local one)."),
        "budget": typer.Option([], "--budget", help="ROLE=AMOUNT: stop the run cleanly when ROLE (judge: the whole "
                               "panel) has spent AMOUNT (5usd, $5, 200000tokens); repeatable; --resume with a "
                               "higher cap continues, paid calls come from the cache."),
        "prices": typer.Option(None, "--prices", help="JSON file of $ per million tokens per model spec, for models "
                               "without a list price (e.g. a self-hosted endpoint)."),
    }
    types = {name: field.annotation for name, field in RunOptions.model_fields.items()}
    return [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=types[name])
            for name, default in options.items()]


def with_run_options(command: F) -> F:
    """Give a command the shared `RunOptions` flags: they reach it as one `run: RunOptions`."""
    signature = inspect.signature(command)
    own = [p for name, p in signature.parameters.items() if name != "run"]
    extra = run_option_parameters()

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        shared = {p.name: kwargs.pop(p.name) for p in extra if p.name in kwargs}
        return command(*args, run=RunOptions(**shared), **kwargs)

    del wrapper.__wrapped__  # typer must read the signature below, not the command's own
    wrapper.command = command  # type: ignore[attr-defined]  # the command's own parameters, for tests
    wrapper.__signature__ = signature.replace(parameters=[*own, *extra])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in [*own, *extra]} | {"return": None}
    return wrapper  # type: ignore[return-value]
