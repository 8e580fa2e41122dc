"""One adaptive limit per provider and key for a whole Ray cluster: a named actor
(`harness-limit-<hash of the key>`, namespace `harness`) that every task's model calls acquire
and release through, so N workers share one budget instead of multiplying it.

The actor is `limits.LimiterHost`: the same `LocalLimiter` the asyncio executor uses, in the
actor's own event loop (an async actor: a waiting `acquire` blocks nobody else). It lives in
`harness.limits` so that the actor's process imports only that light module. The driver creates it (get-or-create by
name: a second run on the same cluster and key shares it), so it lives as long as the driver;
`max_restarts=-1` brings it back if its node dies (fresh state: the limit starts at its maximum,
slots held then are forgotten, and the driver's recorder starts a new history). A slot held by a
task on a node that died is taken back within `SWEEP_S` (the actor asks Ray which nodes are dead);
one whose worker process died on a live node, after the lease time. Ray is imported inside
functions only.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable
from typing import Any

from harness.limits import Limiter, LimiterHost, LimitReport, Outcome

NAMESPACE = "harness"
SWEEP_S = 2.0  # how often the actor looks for slots held on dead nodes, while any slot is held


def actor_name(key: str) -> str:
    return "harness-limit-" + hashlib.sha256(key.encode()).hexdigest()[:16]


class RayLimiter:
    """A caller's end of the actor: `acquire` is one round trip, `release` is sent and not waited
    for (the slot is free as soon as the actor reads it)."""

    def __init__(self, key: str, handle: Any, node_id: str):
        self.key = key
        self.handle = handle
        self.holder = f"{node_id}:{os.getpid()}"  # the node first: the actor frees a dead node's slots

    async def acquire(self) -> int:
        return int(await self.handle.acquire.remote(self.holder))

    def release(self, lease: int, outcome: Outcome, retry_after_s: float | None = None) -> None:
        self.handle.release.remote(lease, outcome, retry_after_s)

    async def report(self, since: int) -> LimitReport:
        report: LimitReport = await self.handle.report.remote(since)
        return report


def cluster_limiter(key: str, max_limit: int, lease_s: float) -> RayLimiter:
    """Get the key's limiter actor by name, or create it (on this node if it can: the driver's)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node_id = ray.get_runtime_context().get_node_id()
    here = NodeAffinitySchedulingStrategy(node_id=node_id, soft=True)
    handle = ray.remote(ClusterLimiterHost).options(
        name=actor_name(key), namespace=NAMESPACE, get_if_exists=True, num_cpus=0, max_restarts=-1,
        max_task_retries=-1, max_concurrency=10_000, scheduling_strategy=here,
    ).remote(key, max_limit, lease_s)
    return RayLimiter(key, handle, node_id)


def dead_node_ids() -> set[str]:
    import ray

    return {node["NodeID"] for node in ray.nodes() if not node["Alive"]}  # type: ignore[no-untyped-call]


def on_nodes(node_ids: set[str]) -> Callable[[str], bool]:
    """Whether a holder (`node_id:pid`) runs on one of these nodes."""
    return lambda holder: holder.split(":", 1)[0] in node_ids


class ClusterLimiterHost(LimiterHost):
    """The actor's body on a cluster: the limiter, plus a sweep that frees the slots of tasks whose
    node died (they will never release; a retried task asks for a new slot)."""

    def __init__(self, key: str, max_limit: int, lease_s: float):
        super().__init__(key, max_limit, lease_s)
        self._sweeper: asyncio.Task[None] | None = None

    async def acquire(self, holder: str) -> int:
        if self._sweeper is None:  # started here: the actor's event loop runs only inside its methods
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())
        return await super().acquire(holder)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_S)
            if self.limiter.state.in_flight:
                self.limiter.drop_holders(on_nodes(await asyncio.to_thread(dead_node_ids)))


class RayLimits:
    """`build_models`' limiter source on a Ray worker: the cluster's actor for each key."""

    def __init__(self, lease_s: float):
        self.lease_s = lease_s
        self.by_key: dict[str, RayLimiter] = {}

    def limiter(self, key: str, max_limit: int) -> Limiter:
        if key not in self.by_key:
            self.by_key[key] = cluster_limiter(key, max_limit, self.lease_s)
        return self.by_key[key]
