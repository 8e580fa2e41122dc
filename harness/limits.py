"""Adaptive concurrency per provider and key: an AIMD limit on the calls in flight.

On a rate limit (HTTP 429) the limit halves (floor 1) and new calls wait out the provider's
`Retry-After`; after `grow_after` successes it grows by one, up to the configured maximum
(`--max-connections`). One limiter serves every model that shares a provider, endpoint and key
(`limit_key`), so the assistant and the judge on one endpoint share one budget.

`LocalLimiter` is the in-process limiter (the asyncio executor; also the state a Ray actor holds,
`executors/ray_limits.py`). Both sit behind `Limiter`: `acquire` before a call, `release` after it
with its outcome, `report` for the driver. The driver (`LimitRecorder`) polls every limiter,
appends its history to `<run>/limits.jsonl`, shows the state on the progress bar and puts a
summary of each limit into the run summary (`calls[model]["limit"]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TextIO, runtime_checkable

if TYPE_CHECKING:  # types only: the limiter actor's process imports this module and nothing heavy
    from harness.records import RunSummary
    from harness.spec import ModelSpec

# How a call ended, as the limit sees it: a success grows it, a rate limit halves it, anything
# else (another error, a timeout, a cancellation) leaves it.
Outcome = Literal["ok", "rate-limited", "error"]


@dataclass
class LimitPolicy:
    max_limit: int
    grow_after: int = 8  # successes (of calls started at the current limit) before the limit grows by one
    lease_s: float = 360.0  # a slot not released after this long is taken back (its worker died)
    max_pause_s: float = 120.0  # a longer Retry-After is cut to this (the call's own retries still bound it)


@dataclass
class LimitEvent:
    at: float  # wall-clock time.time()
    limit: int
    reason: str  # start | rate-limited | recovered
    retry_after_s: float | None = None


@dataclass
class LimitReport:
    """A limiter's state for the driver, and its history from event `since` on."""

    key: str
    incarnation: str  # changes when the limiter was created again (a restarted actor): history restarts
    limit: int
    max_limit: int
    in_flight: int
    waiting_s: float  # how long new calls still wait out a Retry-After (0 = not paused)
    rate_limited: int  # 429s seen
    min_limit: int
    paused_s: float  # total time new calls were held by Retry-After pauses
    holders: int  # distinct callers (processes) that acquired a slot
    events: list[LimitEvent] = field(default_factory=list)
    n_events: int = 0  # events in the whole history (the next `since`)


@dataclass
class _Lease:
    generation: int
    started: float
    holder: str = ""


class AIMDLimit:
    """The limit's arithmetic, no IO and no clock of its own (`now` is monotonic seconds)."""

    def __init__(self, key: str, policy: LimitPolicy, now: float):
        if policy.max_limit < 1:
            raise ValueError(f"limit {key}: max_limit must be >= 1, got {policy.max_limit}")
        self.key, self.policy = key, policy
        self.limit = self.min_limit = policy.max_limit
        self.paused_until = now
        self.paused_s = 0.0
        self.generation = 0  # bumped at each back-off: calls started before it do not back off again
        self.successes = 0
        self.rate_limited = 0
        self.leases: dict[int, _Lease] = {}
        self.next_lease = 0
        self.holders: set[str] = set()
        self.history = [LimitEvent(time.time(), self.limit, "start")]

    @property
    def in_flight(self) -> int:
        return len(self.leases)

    def try_acquire(self, now: float, holder: str = "") -> int | None:
        """A lease id, or None when the call must wait (paused, or the limit is reached)."""
        if now < self.paused_until:
            return None
        if len(self.leases) >= self.limit:
            self._expire(now)
            if len(self.leases) >= self.limit:
                return None
        self.next_lease += 1
        self.leases[self.next_lease] = _Lease(self.generation, now, holder)
        self.holders.add(holder)
        return self.next_lease

    def wake_in(self, now: float) -> float | None:
        """Seconds until waiting calls should look again without a release: a pause ends or the
        oldest lease expires (its holder may be dead and never release). None: only a release."""
        times = [self.paused_until - now] if now < self.paused_until else []
        if self.leases:
            times.append(min(lease.started for lease in self.leases.values()) + self.policy.lease_s - now)
        return max(0.0, min(times)) if times else None

    def drop_holders(self, dead: Callable[[str], bool]) -> int:
        """Take back the slots of holders known to be dead (a killed node's tasks); how many."""
        gone = [lid for lid, lease in self.leases.items() if lease.holder and dead(lease.holder)]
        for lid in gone:
            del self.leases[lid]
        return len(gone)

    def release(self, lease: int, outcome: Outcome, now: float, retry_after_s: float | None = None) -> None:
        held = self.leases.pop(lease, None)
        if held is None:  # expired, or from before a restart: its outcome is stale
            return
        if outcome == "ok":
            if held.generation == self.generation:
                self.successes += 1
                if self.successes >= self.policy.grow_after and self.limit < self.policy.max_limit:
                    self.limit += 1
                    self.successes = 0
                    self.history.append(LimitEvent(time.time(), self.limit, "recovered"))
        elif outcome == "rate-limited":
            self.rate_limited += 1
            if retry_after_s:
                until = now + min(retry_after_s, self.policy.max_pause_s)
                if until > self.paused_until:
                    self.paused_s += until - max(now, self.paused_until)
                    self.paused_until = until
            if held.generation == self.generation:  # once per congestion event, not once per call in it
                self.generation += 1
                self.successes = 0
                self.limit = max(1, self.limit // 2)
                self.min_limit = min(self.min_limit, self.limit)
                self.history.append(LimitEvent(time.time(), self.limit, "rate-limited", retry_after_s))

    def _expire(self, now: float) -> None:
        stale = [lid for lid, lease in self.leases.items() if now - lease.started > self.policy.lease_s]
        for lid in stale:
            del self.leases[lid]

    def report(self, now: float, since: int, incarnation: str) -> LimitReport:
        return LimitReport(
            key=self.key, incarnation=incarnation, limit=self.limit, max_limit=self.policy.max_limit,
            in_flight=self.in_flight, waiting_s=max(0.0, self.paused_until - now), rate_limited=self.rate_limited,
            min_limit=self.min_limit, paused_s=self.paused_s, holders=len(self.holders),
            events=self.history[since:], n_events=len(self.history))


class Limiter(Protocol):
    """One budget of calls in flight. `acquire` waits for a slot; `release` (never blocks) gives it
    back with the call's outcome; `report` is the driver's view."""

    key: str

    async def acquire(self) -> int: ...

    def release(self, lease: int, outcome: Outcome, retry_after_s: float | None = None) -> None: ...

    async def report(self, since: int) -> LimitReport: ...


class LocalLimiter:
    """The limit in this process's event loop: waiters queue in order and are woken when a slot
    frees, the limit grows or a pause ends."""

    def __init__(self, key: str, policy: LimitPolicy, holder: str = ""):
        self.key = key
        self.state = AIMDLimit(key, policy, time.monotonic())
        self.holder = holder
        self.incarnation = f"{id(self):x}-{time.time():.6f}"
        self._waiters: list[asyncio.Future[None]] = []

    async def acquire(self, holder: str | None = None) -> int:
        who = self.holder if holder is None else holder
        while True:
            lease = self.state.try_acquire(time.monotonic(), who)
            if lease is not None:
                return lease
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            wake_in = self.state.wake_in(time.monotonic())
            try:
                if wake_in is not None:  # a pause ends or a lease expires with no release to wake us
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(wake_in):
                            await waiter
                else:
                    await waiter
            except BaseException:
                self._wake()  # a wake-up this waiter got and will not use goes to the next one
                raise
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def release(self, lease: int, outcome: Outcome, retry_after_s: float | None = None) -> None:
        self.state.release(lease, outcome, time.monotonic(), retry_after_s)
        self._wake()

    def has_waiters(self) -> bool:
        return any(not w.done() for w in self._waiters)

    def drop_holders(self, dead: Callable[[str], bool]) -> int:
        dropped = self.state.drop_holders(dead)
        if dropped:
            self._wake()
        return dropped

    def _wake(self) -> None:
        free = self.state.limit - self.state.in_flight
        while free > 0 and self._waiters:
            waiter = self._waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                free -= 1

    async def report(self, since: int) -> LimitReport:
        return self.state.report(time.monotonic(), since, self.incarnation)


class LimiterHost:
    """The body of the cluster's limiter actor (`executors/ray_limits.py`; no Ray here). All methods
    async: Ray runs them in the actor's one event loop."""

    def __init__(self, key: str, max_limit: int, lease_s: float):
        self.limiter = LocalLimiter(key, LimitPolicy(max_limit=max_limit, lease_s=lease_s))
        # Lease ids from a random start: a release from before a restart never frees a new lease.
        self.limiter.state.next_lease = random.getrandbits(48)

    async def acquire(self, holder: str) -> int:
        return await self.limiter.acquire(holder)

    async def acquire_many(self, holder: str, n: int) -> list[int]:
        """One lease, waited for, then up to `n - 1` more that are free at once and wanted by no
        other holder waiting here: a worker's burst of calls costs one round trip, not n."""
        leases = [await self.limiter.acquire(holder)]
        while len(leases) < n and not self.limiter.has_waiters():
            lease = self.limiter.state.try_acquire(time.monotonic(), holder)
            if lease is None:
                break
            leases.append(lease)
        return leases

    async def release(self, lease: int, outcome: Outcome, retry_after_s: float | None) -> None:
        self.limiter.release(lease, outcome, retry_after_s)

    async def release_many(self, released: list[tuple[int, Outcome, float | None]]) -> None:
        for lease, outcome, retry_after_s in released:
            self.limiter.release(lease, outcome, retry_after_s)

    async def report(self, since: int) -> LimitReport:
        return await self.limiter.report(since)


class LocalLimits:
    """The in-process limiters of one run, one per limit key (the asyncio executor's)."""

    def __init__(self, lease_s: float = LimitPolicy.lease_s):
        self.lease_s = lease_s
        self.by_key: dict[str, LocalLimiter] = {}

    def limiter(self, key: str, max_limit: int) -> Limiter:
        if key not in self.by_key:
            self.by_key[key] = LocalLimiter(key, LimitPolicy(max_limit=max_limit, lease_s=self.lease_s))
        return self.by_key[key]


class LimiterSource(Protocol):
    """Where `build_models` gets each model's limiter (in-process, or a cluster's actors)."""

    def limiter(self, key: str, max_limit: int) -> Limiter: ...


def limit_key(spec: ModelSpec) -> str:
    """The budget a model's calls count against: its provider's own key (provider, endpoint and
    API key: `openai_provider.limit_key`) where the provider has one, else the model spec."""
    from harness.providers import get_provider

    own = getattr(get_provider(spec.provider), "limit_key", None)
    if callable(own):
        return str(own(spec))
    return f"{spec.full}@{spec.base_url or ''}"


@runtime_checkable
class HasLimiters(Protocol):
    """An executor whose model calls go through limiters: model name -> its limiter."""

    def limiters(self) -> dict[str, Limiter]: ...


def describe(reports: list[LimitReport]) -> str:
    """The progress bar's words for the limits: a pause first, then a limit below its maximum."""
    paused = [r for r in reports if r.waiting_s > 0]
    if paused:
        r = max(paused, key=lambda r: r.waiting_s)
        return f"rate-limited, waiting {r.waiting_s:.0f}s, limit {r.limit}"
    low = [r for r in reports if r.limit < r.max_limit]
    if low:
        r = min(low, key=lambda r: r.limit)
        return f"limit {r.limit}/{r.max_limit}"
    return ""


Show = Callable[[str], None]  # the progress bar's `show_limits`


class LimitRecorder:
    """The driver's side: polls the executor's limiters while the run goes, appends each new
    history event to `limits.jsonl` (one line: at, key, limit, reason, retry_after_s), shows the
    state on the progress bar, and adds each limit's figures to the summary."""

    def __init__(self, path: Path, every_s: float = 0.5):
        self.path = path
        self.every_s = every_s
        self._limiters: dict[str, Limiter] = {}  # model name -> limiter
        self._seen: dict[str, tuple[str, int]] = {}  # key -> (incarnation, events written)
        self._last: dict[str, LimitReport] = {}
        self._fh: TextIO | None = None

    async def watch(self, executor: object, work: Awaitable[None], show: Show | None = None) -> None:
        """Run `work` (the executor's run) while polling; `show(text)` gets the progress words."""
        self._limiters = executor.limiters() if isinstance(executor, HasLimiters) else {}
        if not self._limiters:
            await work
            return
        poller = asyncio.create_task(self._poll_forever(show))
        try:
            await work
        finally:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await poller
        with contextlib.suppress(Exception):  # the history so far is on disk already
            await self.poll(show)

    async def _poll_forever(self, show: Show | None) -> None:
        while True:
            try:
                await self.poll(show)
            except Exception:  # noqa: BLE001 - a limiter that does not answer now may answer next time
                pass
            await asyncio.sleep(self.every_s)

    async def poll(self, show: Show | None = None) -> None:
        unique = {lim.key: lim for lim in self._limiters.values()}
        for key, limiter in unique.items():
            incarnation, written = self._seen.get(key, ("", 0))
            report = await limiter.report(written)
            if report.incarnation != incarnation and incarnation:  # recreated: its history starts again
                report = await limiter.report(0)
                written = 0
            self._write(key, report.events)
            self._seen[key] = (report.incarnation, written + len(report.events))
            self._last[key] = report
        if show is not None:
            show(describe(list(self._last.values())))

    def _write(self, key: str, events: list[LimitEvent]) -> None:
        if not events:
            return
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")
        for event in events:
            self._fh.write(json.dumps({"key": key} | asdict(event)) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def add_to(self, summary: RunSummary) -> None:
        """Each model's limit figures under `summary.calls[model]["limit"]`."""
        for name, limiter in self._limiters.items():
            report = self._last.get(limiter.key)
            if report is None or name not in summary.calls:
                continue
            summary.calls[name]["limit"] = {
                "key": report.key, "max": report.max_limit, "final": report.limit, "min": report.min_limit,
                "rate_limited": report.rate_limited, "paused_s": round(report.paused_s, 3),
                "holders": report.holders, "changes": self._seen[limiter.key][1] - 1}
