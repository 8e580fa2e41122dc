"""Model replicas as Ray actors: N engines of one model, each request sent to the least-loaded one
(`harness.replicas.LeastLoaded`, as for `openai/` models with several base URLs). Used by
`vllm/<model>?replicas=N` (`preft.vllm_provider`); nothing here is vLLM's own: an engine is any `Model`
an `make_engine(index)` factory builds inside the actor (the tests script one). A provider offers
replicas through its optional `replica_engines(spec)` hook: the count and that factory.

The switch is part of the model spec, so it reaches every process that builds the model (the
driver, and each Ray task under `--executor ray`) with no other plumbing, and it can be given per
role (`--role judge='vllm/m?replicas=2'`). `?replicas=auto` asks for one replica per GPU of the cluster.

Placement: each replica is one Ray actor (`ReplicaHost`) owning one engine, whose `generate` /
`complete` take the provider's messages/prompt and `GenerateConfig` and return its `ModelOutput`.
It asks for `num_gpus=1` when the cluster reports GPUs, else `REPLICA_CPUS` CPUs. What the replicas
ask for (plus `spare_cpus` for the run's own tasks) is checked against `ray.available_resources()`
and each node's size before any actor is created: a cluster without it is one `HarnessError`
naming the request and the fix, never an actor waiting forever for resources. Startup is waited
for (bounded by `STARTUP_S`) before the run begins, so an engine that cannot start is also one
error before anything is recorded.

Names: `harness-replica-<job id>-<hash of the spec>-<i>` in namespace `harness`, so every worker
process of the run (same Ray job) finds the same set by name, and two runs never share engines.
The driver starts and owns them (the asyncio executor: on building the model; the Ray executor:
in `prepare`, `start_replica_sets`); a Ray task only attaches. The owner shuts each
engine down and kills its actor at the end of the run (a non-detached actor dies with its owner anyway).

A replica whose actor died: the call in flight fails with `RetryableModelError`, the router
leaves that replica out for the rest of the run (`max_restarts=0`: an engine is not restarted), and
the call's retry (`harness.calls`) goes to another replica. Ray is imported inside functions only.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict

from harness.errors import HarnessError
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig, Model, ModelError, ModelOutput, RetryableModelError
from harness.replicas import LeastLoaded
from harness.spec import ModelSpec

NAMESPACE = "harness"
REPLICA_CPUS = 1.0  # a CPU-build replica's Ray CPU request (the engine's threads are vLLM's to set)
STARTUP_S = float(os.environ.get("HARNESS_REPLICA_STARTUP_S", "900"))  # engine load + warm-up, each replica
STOP_S = 30.0  # an engine's own shutdown, before its actor is killed outright
_OPTION = re.compile(r"^(?P<name>.+)\?replicas=(?P<count>[^?&]*)$")


def split_replicas(name: str, provider: str = "vllm") -> tuple[str, int | str | None]:
    """`smollm2-135m?replicas=2` -> ("smollm2-135m", 2); `...?replicas=auto` -> (..., "auto");
    no option -> (name, None). A bad count is one clear error naming the spec."""
    if "?" not in name:
        return name, None
    match = _OPTION.match(name)
    if match is None:
        raise HarnessError(f"{provider}/{name}: the only spec option is ?replicas=N "
                           f"(e.g. {provider}/smollm2-135m?replicas=2)")
    count = match["count"]
    if count == "auto":
        return match["name"], "auto"
    if not count.isdigit() or int(count) < 1:
        raise HarnessError(f"{provider}/{name}: replicas={count!r}: give a whole number >= 1, or auto (one per GPU)")
    return match["name"], int(count)


def actor_names(spec: str, count: int, job_id: str) -> list[str]:
    digest = hashlib.sha256(spec.encode()).hexdigest()[:12]
    return [f"harness-replica-{job_id}-{digest}-{i}" for i in range(count)]


# ---------------------------------------------------------------- placement (pure: unit-testable)

def placement(spec: str, count: int, total: Mapping[str, float], available: Mapping[str, float],
              node_sizes: Iterable[Mapping[str, float]], spare_cpus: float = 0.0) -> dict[str, float]:
    """The Ray options of one replica (`num_gpus`/`num_cpus`); `HarnessError` when the cluster
    cannot hold `count` of them beside `spare_cpus` CPUs for the run's own tasks."""
    gpus = total.get("GPU", 0.0) > 0
    unit, each = ("GPU", 1.0) if gpus else ("CPU", REPLICA_CPUS)
    options = {"num_gpus": 1.0, "num_cpus": 0.0} if gpus else {"num_cpus": REPLICA_CPUS}
    free = available.get(unit, 0.0) - (0.0 if gpus else spare_cpus)
    per_node = sum(int(node.get(unit, 0.0) // each) for node in node_sizes)  # one replica never spans nodes
    fits = min(int(free // each), per_node)
    cpus_short = gpus and available.get("CPU", 0.0) < spare_cpus
    if count <= fits and not cpus_short:
        return options
    why = "one each" if gpus else f"{each:g} each; the cluster reports no GPUs"
    spare = f" plus {spare_cpus:g} CPU for the run's sample tasks" if spare_cpus else ""
    have = (f"{available.get(unit, 0.0):g} {unit}s free ({total.get(unit, 0.0):g} in all)"
            + (f", {available.get('CPU', 0.0):g} CPUs free" if gpus and spare_cpus else "")
            + (f", and its nodes' sizes hold only {per_node} (one replica never spans nodes)"
               if per_node < free // each else ""))
    short = "CPU" if count <= fits else unit  # GPUs enough, CPUs for the tasks not: a node with CPUs helps
    fix = f"ask for at most {fits} (?replicas={fits}), or " if 1 <= fits < count else ""
    raise HarnessError(
        f"{spec}: {count} replicas ask for {count * each:g} {unit}s ({why}){spare}, but the Ray cluster has "
        f"{have}: {fix}add nodes with {short}s to the cluster (`ray start --address HEAD:PORT` on another machine)")


def resolve_count(spec: str, count: int | str, total: Mapping[str, float]) -> int:
    if count != "auto":
        return int(count)
    gpus = int(total.get("GPU", 0.0))
    if gpus < 1:
        raise HarnessError(f"{spec}: replicas=auto puts one replica on each GPU, and this Ray cluster reports none: "
                           "give a count instead (?replicas=2)")
    return gpus


# ---------------------------------------------------------------- the actor

class ReplicaInfo(TypedDict):
    """Where a replica runs and how much it served (`ReplicaHost.info`)."""

    index: int
    pid: int
    children: list[int]  # the engine's own processes (vLLM's engine core)
    served: int
    node: str  # the Ray node id


class ReplicaStarted(ReplicaInfo):
    """`ReplicaHost.start`'s answer: its info and its engine's startup time."""

    startup_s: float


class ReplicaHost:
    """The actor's body: one engine and the count of requests it served. Its methods are
    coroutines (an async actor), so the engine batches every request sent to the replica."""

    def __init__(self, make_engine: Callable[[int], Model], index: int):
        self.index = index
        self.engine = make_engine(index)
        self.served = 0

    async def start(self) -> ReplicaStarted:
        """Start the engine now (not on the first request) and say where it runs."""
        started = time.perf_counter()
        start = getattr(self.engine, "start", None)
        if start is not None:
            await start()
        return {**self.info(), "startup_s": time.perf_counter() - started}

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        self.served += 1
        return await self.engine.generate(messages, config)

    async def complete(self, prompt: str, config: GenerateConfig) -> ModelOutput:
        self.served += 1
        complete = getattr(self.engine, "complete", None)
        if complete is None:
            raise ModelError(f"{self.engine.name}: this engine has no raw-text complete")
        out: ModelOutput = await complete(prompt, config)
        return out

    def info(self) -> ReplicaInfo:
        import psutil
        import ray

        children = [p.pid for p in psutil.Process().children(recursive=True)]
        return {"index": self.index, "pid": os.getpid(), "children": children, "served": self.served,
                "node": ray.get_runtime_context().get_node_id()}

    async def shutdown(self) -> None:
        await self.engine.aclose()


# ---------------------------------------------------------------- the set of actors

class ReplicaSet:
    """The named actors of one spec in one Ray job; `owned` when this process started them."""

    def __init__(self, spec: str, handles: list[Any], *, owned: bool, started: list[ReplicaStarted] | None = None,
                 startup_s: float = 0.0):
        self.spec = spec
        self.handles = handles
        self.owned = owned
        self.started = started or []  # each replica's start() answer: pid, node, its engine's startup time
        self.startup_s = startup_s  # wall time from creating the actors to all engines ready

    @classmethod
    def start(cls, spec: str, count: int | str, make_engine: Callable[[int], Model], *,
              spare_cpus: float = 0.0, startup_s: float = STARTUP_S) -> "ReplicaSet":
        """Check the cluster's resources, create the actors, wait until every engine is ready."""
        import ray

        total = ray.cluster_resources()  # type: ignore[no-untyped-call]
        n = resolve_count(spec, count, total)
        nodes = [node["Resources"] for node in ray.nodes() if node["Alive"]]  # type: ignore[no-untyped-call]
        options = placement(spec, n, total, ray.available_resources(), nodes, spare_cpus)  # type: ignore[no-untyped-call]
        began = time.perf_counter()
        actor: Any = ray.remote(ReplicaHost)
        handles: list[Any] = [actor.options(name=name, namespace=NAMESPACE, max_restarts=0, max_concurrency=1000,
                                            **options).remote(make_engine, i)
                              for i, name in enumerate(actor_names(spec, n, job_id()))]
        replicas = cls(spec, handles, owned=True)
        try:
            replicas.started = ray.get([h.start.remote() for h in handles], timeout=startup_s)
        except ray.exceptions.GetTimeoutError:
            replicas.stop()
            raise HarnessError(f"{spec}: the {n} replicas were not ready within {startup_s:g} s (see `ray status`; "
                               "raise HARNESS_REPLICA_STARTUP_S for a large model)") from None
        except ray.exceptions.RayError as exc:
            replicas.stop()
            cause = exc.cause if isinstance(exc, ray.exceptions.RayTaskError) else exc
            raise HarnessError(f"{spec}: a replica's engine did not start: {type(cause).__name__}: "
                               f"{str(cause).strip().splitlines()[-1] if str(cause).strip() else ''}") from None
        replicas.startup_s = time.perf_counter() - began
        return replicas

    @classmethod
    def attach(cls, spec: str, count: int | str) -> "ReplicaSet | None":
        """The set the driver started, by name (None when none of them exists); replicas whose
        actor has died are absent."""
        import ray

        n = resolve_count(spec, count, ray.cluster_resources())  # type: ignore[no-untyped-call]
        handles = []
        for name in actor_names(spec, n, job_id()):
            try:
                handles.append(ray.get_actor(name, namespace=NAMESPACE))
            except ValueError:  # that replica died (its name is free again)
                continue
        return cls(spec, handles, owned=False) if handles else None

    def served(self) -> list[int]:
        """Requests each replica has served (asks the live actors; a dead one counts -1)."""
        import ray

        counts = []
        for handle in self.handles:
            try:
                counts.append(int(ray.get(handle.info.remote(), timeout=STOP_S)["served"]))
            except ray.exceptions.RayError:
                counts.append(-1)
        return counts

    def stop(self) -> None:
        """Shut every engine down, then kill its actor (also one that does not answer)."""
        import ray

        for handle in self.handles:
            try:
                ray.get(handle.shutdown.remote(), timeout=STOP_S)
            except Exception:  # noqa: BLE001 - a dead or stuck replica is killed below all the same
                pass
            try:
                ray.kill(handle)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.handles = []


def job_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_job_id())


def in_ray_task() -> bool:
    import ray

    return bool(ray.get_runtime_context().worker.mode == ray.WORKER_MODE)


def ensure_ray() -> bool:
    """Join the Ray cluster this process belongs to, or start a local one (True: started here)."""
    import ray

    if ray.is_initialized():
        return False
    # As the Ray executor does for its local cluster: a dead worker's children are killed too.
    os.environ.setdefault("RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper", "true")
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    return True


# ---------------------------------------------------------------- the model the run calls

class ReplicatedModel:
    """A `Model` over a `ReplicaSet`: each request to the least-loaded live replica of this
    process's router. Closing it stops the replicas only if this process started them."""

    def __init__(self, name: str, replicas: ReplicaSet, *, started_ray: bool = False):
        self.name = name
        self.replicas = replicas
        self.router: LeastLoaded[Any] = LeastLoaded(replicas.handles)
        self._started_ray = started_ray

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        return await self._call("generate", messages, config)

    async def complete(self, prompt: str, config: GenerateConfig) -> ModelOutput:
        return await self._call("complete", prompt, config)

    async def _call(self, method: str, *args: Any) -> ModelOutput:
        import ray

        if self.router.all_gone:
            raise ModelError(f"{self.name}: every replica has died (see `ray status` and the Ray logs); "
                             "start the run again (--resume) to start new ones")
        with self.router.use() as (i, handle):
            ref = getattr(handle, method).remote(*args)
            try:
                out: ModelOutput = await ref
            except asyncio.CancelledError:
                ray.cancel(ref)  # the engine stops generating for nobody (a call timeout, Ctrl-C)
                raise
            except ray.exceptions.ActorDiedError as exc:
                self.router.mark_down(i, math.inf)
                raise RetryableModelError(f"{self.name}: replica {i} died ({exc.__class__.__name__}); "
                                          "it is left out and the retry goes to another replica") from None
            except ray.exceptions.RayActorError as exc:  # unavailable for now (its node is unreachable)
                self.router.mark_down(i)
                raise RetryableModelError(f"{self.name}: replica {i} is unavailable ({exc.__class__.__name__})") from None
            except ray.exceptions.RayTaskError as exc:
                raise _own_error(exc) from None
        return out

    async def aclose(self) -> None:
        import ray

        if self.replicas.owned:
            self.replicas.stop()
        if self._started_ray and ray.is_initialized():
            ray.shutdown()


def _own_error(exc: Any) -> BaseException:
    """The engine's own error (a ModelError, a ConstraintError), not Ray's wrapper around it."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, ModelError):
        return cause
    return ModelError(f"replica failed: {type(cause or exc).__name__}: {cause or exc}")


def replicated(spec: str, count: int | str, make_engine: Callable[[int], Model]) -> ReplicatedModel:
    """The model of `<spec>?replicas=N`: a Ray task attaches to the set its driver started; the
    driver attaches to the set its executor started, or starts (and will stop) one itself."""
    started_ray = ensure_ray()
    try:
        replicas = ReplicaSet.attach(spec, count)
        if replicas is None:
            if in_ray_task():
                raise HarnessError(f"{spec}: no replica of this run is alive (the driver starts them; "
                                   "see `ray status`)")
            replicas = ReplicaSet.start(spec, count, make_engine)
    except BaseException:
        if started_ray:
            import ray

            ray.shutdown()
        raise
    return ReplicatedModel(spec, replicas, started_ray=started_ray)


def start_replica_sets(specs: Iterable[str], spare_cpus: float = 1.0) -> list[ReplicaSet]:
    """The Ray executor's driver: start (and own) the replicas of every spec whose provider's
    `replica_engines(spec)` asks for them (`vllm/...?replicas=N`) before any task runs, leaving
    `spare_cpus` for the sample tasks. Ray must be initialised."""
    from harness.providers import get_provider

    started: list[ReplicaSet] = []
    try:
        for text in dict.fromkeys(specs):
            spec = ModelSpec.parse(text)
            hook = getattr(get_provider(spec.provider), "replica_engines", None)
            wanted = hook(spec) if hook is not None else None
            if wanted is not None:
                count, make_engine = wanted
                started.append(ReplicaSet.start(spec.full, count, make_engine, spare_cpus=spare_cpus))
    except BaseException:
        for replicas in started:
            replicas.stop()
        raise
    return started
