"""torch's gradient-mode decorators with their types kept.

mypy reads torch as `Any` here (pyproject.toml skips analysing it: it was most of a cold run), so
`@torch.no_grad()` would make every function it decorates untyped. These two wrap the same context
managers and tell mypy the function keeps its signature."""

from __future__ import annotations

from typing import Any, Callable, TypeVar, cast

import torch

F = TypeVar("F", bound=Callable[..., Any])


def no_grad(fn: F) -> F:
    """`@torch.no_grad()`."""
    return cast(F, torch.no_grad()(fn))


def inference_mode(fn: F) -> F:
    """`@torch.inference_mode()`."""
    return cast(F, torch.inference_mode()(fn))
