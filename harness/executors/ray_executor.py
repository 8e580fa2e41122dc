"""`--executor ray`: samples run as Ray tasks on any node of a cluster; this process (the
driver) stays the only writer of the run folder.

Each task runs one chunk of work items with the asyncio loop every executor shares
(`runner.run_items`, `max_connections` samples in flight) and returns the chunk's records;
`dispatch.dispatch_chunks` journals, re-dispatches and de-duplicates. Ray itself retries a task
whose worker or node died (`max_retries`); the driver re-dispatches a chunk Ray gave up on.
Workers build their own models (no call cache: the run dir's cache is the driver's file).
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

from harness.calls import CallStats
from harness.errors import HarnessError
from harness.executors.dispatch import AttemptJournal, ChunkResult, chunk_size, cut_chunks, dispatch_chunks
from harness.executors.ray_limits import RayLimits
from harness.limits import Limiter, limit_key
from harness.processes import guard_descendants
from harness.records import RunConfig
from harness.runner import Deliver, RunPlan, WorkItem, build_models, run_items, stats_by_name
from harness.spec import ModelSpec
from harness.suite import Suite

# Ray's switch (off by default) for its raylet to kill, within seconds, every process a worker
# started, even one the worker's death orphaned; on a `ray start` cluster set it on each node.
SUBREAPER = "RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper"
RAY_TASK_RETRIES = 3  # Ray's own retries of a task whose worker or node died
DRIVER_ATTEMPTS = 3  # then the driver sends the chunk again, up to this many times


def run_chunk(suite: Suite, config: RunConfig, roles: tuple[str, ...], items: list[WorkItem]) -> ChunkResult:
    """The task body, on a worker: the chunk's samples with the run's concurrency, fresh models
    (they hold connections bound to this task's event loop), closed at the end. Their calls in
    flight count against the cluster's one limiter actor per provider+key (`ray_limits.py`)."""

    guard_descendants()  # an environment's browser or JVM must not outlive this worker (its node may die)

    async def go() -> ChunkResult:
        limits = RayLimits(lease_s(config))
        models = build_models(config, None, roles, limits=limits)
        records: list[Any] = []
        try:
            await run_items(suite, config, items, models, records.append, config.max_connections)
        finally:
            for model in {id(m): m for m in models.values()}.values():
                await model.aclose()
            limits.flush()  # the batched releases, before this event loop ends
        return ChunkResult(records=records, stats=stats_by_name(models), worker=node_id())

    return asyncio.run(go())


def lease_s(config: RunConfig) -> float:
    """How long a slot may be held before the limiter takes it back (its task died)."""
    return config.call_timeout_s + 60


def node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


def check_address(address: str, timeout_s: float = 3.0) -> None:
    """A HOST:PORT (or ray://HOST:PORT) address must answer before Ray is asked to join it (Ray
    itself would retry for a minute and then print a page of log)."""
    if address in ("auto", "local"):
        return
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise HarnessError(f"--ray-address {address!r}: write HOST:PORT (the head's GCS port, e.g. 127.0.0.1:6379), "
                           "ray://HOST:PORT or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise HarnessError(
            f"--ray-address {address}: no Ray cluster answers there ({exc.strerror or exc}); start one with "
            f"`ray start --head --port {port}` on {host}, fix the address, or drop --ray-address to run a local cluster"
        ) from exc


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None, chunk: int | None = None):
        if address is not None:
            check_address(address)  # before any planning: an unreachable cluster is bad input
        self.address = address
        self.chunk = chunk
        self._stats: dict[str, CallStats] = {}
        self._journal: AttemptJournal | None = None
        self._refs: list[Any] = []
        self._started_ray = False
        self._limiters: dict[str, Limiter] = {}
        self._replicas: list[Any] = []

    def prepare(self, plan: RunPlan) -> None:
        if plan.config.budgets:  # the meter counts calls in this process; Ray's run on other nodes
            raise HarnessError("--budget with --executor ray: a budget is enforced per call in this process; "
                               "run with --executor asyncio, or drop --budget (spend is still reported)")
        try:
            import ray
        except ImportError as exc:
            raise HarnessError("--executor ray: Ray is not installed; install the extra: pip install 'harness[ray]'") from exc
        if not ray.is_initialized():
            try:
                # log_to_driver off: the workers' output would tear through the progress bar.
                if self.address is None:
                    # A local cluster's raylet (it inherits this) kills what a dead worker left behind,
                    # grandchildren too (a browser under Playwright's driver); see docs/scale.md.
                    os.environ.setdefault(SUBREAPER, "true")
                # No dashboard on a local cluster; None (Ray's default) when joining one.
                ray.init(address=self.address, log_to_driver=False, configure_logging=False,
                         include_dashboard=False if self.address is None else None)
            except ConnectionError as exc:
                raise HarnessError(f"--ray-address {self.address}: could not join the cluster ({exc}); "
                                   "check `ray status` there") from exc
            self._started_ray = True
        # The driver creates the limiter actors (they live as long as it does); tasks get them by name.
        limits = RayLimits(lease_s(plan.config))
        for role in plan.called_roles:
            spec = ModelSpec.parse(plan.config.models[role], base_url=plan.config.endpoint(role))
            self._limiters[spec.full] = limits.limiter(limit_key(spec), plan.config.max_connections)
        # `vllm/...?replicas=N`: the driver starts and owns the replica actors (tasks find them by
        # name), leaving one CPU for the sample tasks; stopped in aclose.
        from harness.providers.ray_replicas import start_replica_sets

        self._replicas = start_replica_sets(plan.config.models[role] for role in plan.called_roles)

    def limiters(self) -> dict[str, Limiter]:
        return self._limiters

    async def run(self, plan: RunPlan, deliver: Deliver) -> None:
        import ray
        import ray.exceptions

        config = plan.config
        task = ray.remote(num_cpus=1, max_retries=RAY_TASK_RETRIES)(run_chunk)
        suite_ref, config_ref = ray.put(plan.suite), ray.put(config)
        roles = plan.called_roles

        async def submit(chunk: int, attempt: int, items: list[WorkItem]) -> ChunkResult:
            # A re-score's source records are read here, by the driver: a task on another node
            # cannot see the run folder.
            ref = task.remote(suite_ref, config_ref, roles, [item.with_source_loaded() for item in items])
            self._refs.append(ref)
            result: ChunkResult = await asyncio.wrap_future(ref.future())
            return result

        size = self.chunk or chunk_size(len(plan.todo), config.max_connections)
        self._journal = AttemptJournal(plan.folder.path / "attempts.jsonl")
        await dispatch_chunks(cut_chunks(plan.todo, size), submit, deliver, self._journal, self._stats,
                              retryable=(ray.exceptions.RayError,), max_attempts=DRIVER_ATTEMPTS)

    def call_stats(self) -> dict[str, CallStats]:
        return self._stats

    async def aclose(self) -> None:
        import ray

        if self._journal is not None:
            self._journal.close()
        for ref in self._refs:  # an interrupted run leaves no task running for nobody
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - a finished task cannot be cancelled; that is fine
                pass
        for replicas in self._replicas:
            replicas.stop()
        if self._started_ray:
            ray.shutdown()
