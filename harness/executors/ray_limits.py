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


RELEASE_DELAY_S = 0.005  # successes wait this long to share one message to the actor
RELEASE_BATCH = 64  # ... or until this many are waiting


class RayLimiter:
    """A caller's end of the actor. Every call still takes its own lease from the actor and hands
    it back with its outcome (the AIMD arithmetic is the actor's, call by call), but the messages
    are batched: the calls of this process that wait at the same time share one `acquire_many`
    round trip, and successes go back together after at most `RELEASE_DELAY_S` (a rate limit or
    an error at once, so a back-off is never delayed). One round trip per call used to halve the
    Ray executor's throughput on the loopback benchmark (docs/scale.md). `flush` before the
    process's event loop ends."""

    def __init__(self, key: str, handle: Any, node_id: str):
        self.key = key
        self.handle = handle
        self.holder = f"{node_id}:{os.getpid()}"  # the node first: the actor frees a dead node's slots
        self._wanting: list[asyncio.Future[int]] = []
        self._asking: asyncio.Task[None] | None = None
        self._released: list[tuple[int, Outcome, float | None]] = []
        self._flush_timer: asyncio.TimerHandle | None = None

    async def acquire(self) -> int:
        loop = asyncio.get_running_loop()
        want: asyncio.Future[int] = loop.create_future()
        self._wanting.append(want)
        if self._asking is None or self._asking.done():
            self._asking = loop.create_task(self._ask())
        try:
            return await want
        except asyncio.CancelledError:
            if want.done() and not want.cancelled():  # the lease came as the call was cancelled
                self.release(want.result(), "error")
            raise

    async def _ask(self) -> None:
        """While calls wait: one round trip for as many leases as are waited for."""
        try:
            while waiting := [w for w in self._wanting if not w.done()]:
                self._wanting = waiting
                for lease in await self.handle.acquire_many.remote(self.holder, len(waiting)):
                    self._hand_out(int(lease))
        except Exception as exc:  # noqa: BLE001 - every waiting call gets the actor's failure, none hangs
            for w in self._wanting:
                if not w.done():
                    w.set_exception(exc)
            self._wanting = []

    def _hand_out(self, lease: int) -> None:
        while self._wanting:
            want = self._wanting.pop(0)
            if not want.done():
                want.set_result(lease)
                return
        self.release(lease, "error")  # its caller was cancelled meanwhile: the slot goes straight back

    def release(self, lease: int, outcome: Outcome, retry_after_s: float | None = None) -> None:
        self._released.append((lease, outcome, retry_after_s))
        if outcome != "ok" or len(self._released) >= RELEASE_BATCH:
            self.flush()
            return
        if self._flush_timer is None:
            try:
                self._flush_timer = asyncio.get_running_loop().call_later(RELEASE_DELAY_S, self.flush)
            except RuntimeError:  # no event loop here: nothing would flush later
                self.flush()

    def flush(self) -> None:
        """Send the releases not sent yet (not waited for: the slots are free once the actor reads them)."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if self._released:
            batch, self._released = self._released, []
            self.handle.release_many.remote(batch)

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
        self._start_sweeper()
        return await super().acquire(holder)

    async def acquire_many(self, holder: str, n: int) -> list[int]:
        self._start_sweeper()
        return await super().acquire_many(holder, n)

    def _start_sweeper(self) -> None:
        if self._sweeper is None:  # started here: the actor's event loop runs only inside its methods
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

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

    def flush(self) -> None:
        for limiter in self.by_key.values():
            limiter.flush()
