"""Executors: what runs a plan's work items. The driver (`runner.execute`) owns the run folder
and hands every executor one `deliver` callback; an executor only decides where samples run.

`asyncio` (the default, `runner.AsyncioExecutor`) runs them in this process; `ray`
(`ray_executor.py`) as Ray tasks on any node of a cluster. The interface (`Executor`, `Deliver`)
lives in `runner.py` so that the runner imports nothing from here. Importing this package imports
no Ray: `make_executor("ray", ...)` does, and only then.
"""

from __future__ import annotations

from harness.errors import HarnessError
from harness.runner import AsyncioExecutor, Deliver, Executor

__all__ = ["EXECUTORS", "AsyncioExecutor", "Deliver", "Executor", "make_executor"]

EXECUTORS = ("asyncio", "ray")


def make_executor(name: str, *, ray_address: str | None = None) -> Executor:
    """The executor `--executor NAME` asks for (an unreachable --ray-address fails here, before
    anything is planned)."""
    if name not in EXECUTORS:
        raise HarnessError(f"--executor {name!r}: unknown executor; use one of {', '.join(EXECUTORS)}")
    if ray_address is not None and name != "ray":
        raise HarnessError(f"--ray-address {ray_address}: goes with --executor ray (add it, or drop --ray-address)")
    if name == "ray":
        from harness.executors.ray_executor import RayExecutor

        return RayExecutor(address=ray_address)
    return AsyncioExecutor()
