"""The adaptive limit's arithmetic (AIMD), the in-process limiter, Retry-After parsing and the
progress bar's words: exact invariants, no server, no Ray."""

import asyncio
import io
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone

from rich.console import Console

from harness.limits import AIMDLimit, LimitPolicy, LocalLimiter, describe
from harness.progress import RunProgress
from harness.providers.base import RetryableModelError
from harness.providers.openai_provider import retry_after


def test_a_rate_limit_halves_once_per_congestion_event_and_successes_grow_it_back():
    limit = AIMDLimit("k", LimitPolicy(max_limit=8, grow_after=2), now=0.0)
    leases = [limit.try_acquire(0.0) for _ in range(8)]
    assert None not in leases and limit.try_acquire(0.0) is None  # the limit is reached
    # All eight were in flight when the provider said 429: one back-off, not eight.
    for lease in leases[:3]:
        limit.release(lease, "rate-limited", now=1.0, retry_after_s=2.0)
    assert limit.limit == 4 and limit.rate_limited == 3
    assert limit.try_acquire(2.9) is None  # paused until 3.0, whatever the limit
    for lease in leases[3:]:
        limit.release(lease, "ok", now=3.0)  # old generation: no growth from them
    assert limit.limit == 4
    new = [limit.try_acquire(3.0) for _ in range(4)]
    assert None not in new and limit.try_acquire(3.0) is None
    limit.release(new[0], "rate-limited", now=3.5)  # a new congestion event: halve again
    assert limit.limit == 2
    limit.release(new[1], "rate-limited", now=3.6)
    assert limit.limit == 2  # same event
    for lease in new[2:]:
        limit.release(lease, "ok", now=4.0)  # started before the last back-off: no growth
    assert limit.limit == 2
    for _ in range(2 * 6):  # grow_after successes per step, back to the maximum and no further
        limit.release(limit.try_acquire(5.0), "ok", now=5.0)
    assert limit.limit == 8 and limit.min_limit == 2
    assert [e.reason for e in limit.history] == ["start", "rate-limited", "rate-limited"] + ["recovered"] * 6
    assert [e.limit for e in limit.history] == [8, 4, 2, 3, 4, 5, 6, 7, 8]
    assert limit.paused_s == 2.0  # only the first 429 asked for a pause


def test_the_limit_never_goes_below_one_and_a_lost_slot_is_taken_back():
    limit = AIMDLimit("k", LimitPolicy(max_limit=2, lease_s=10.0), now=0.0)
    for t in range(4):
        limit.release(limit.try_acquire(float(t)), "rate-limited", now=float(t))
    assert limit.limit == 1 and limit.min_limit == 1
    assert limit.try_acquire(5.0) is not None  # held by a worker that died
    assert limit.try_acquire(6.0) is None
    assert limit.try_acquire(16.0) is not None  # its lease ran out: the slot comes back
    limit.release(999, "rate-limited", now=17.0)  # an unknown (expired) lease changes nothing
    assert limit.limit == 1 and limit.rate_limited == 4


def test_local_limiter_holds_calls_at_the_limit_and_through_a_pause():
    async def go():
        limiter = LocalLimiter("k", LimitPolicy(max_limit=2, grow_after=100))
        in_flight = peak = 0

        async def call(i):
            nonlocal in_flight, peak
            lease = await limiter.acquire()
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            limiter.release(lease, "rate-limited" if i == 0 else "ok", 0.3 if i == 0 else None)

        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.gather(*(call(i) for i in range(6)))
        report = await limiter.report(0)
        return peak, loop.time() - t0, report

    peak, took, report = asyncio.run(go())
    assert peak == 2 and report.limit == 1 and report.in_flight == 0
    assert took >= 0.3  # the calls after the 429 waited out its Retry-After
    assert [e.reason for e in report.events] == ["start", "rate-limited"] and report.events[1].retry_after_s == 0.3


def test_retry_after_headers_and_the_error_fields():
    assert retry_after({"retry-after-ms": "250", "retry-after": "1"}) == 0.25
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({}) is None and retry_after({"retry-after": "soon"}) is None
    later = datetime.now(timezone.utc) + timedelta(seconds=30)
    assert 25 < retry_after({"retry-after": format_datetime(later, usegmt=True)}) <= 30
    import pickle

    err = pickle.loads(pickle.dumps(RetryableModelError("x", rate_limited=True, retry_after_s=1.5)))
    assert (str(err), err.rate_limited, err.retry_after_s) == ("x", True, 1.5)


def test_the_progress_bar_says_rate_limited_instead_of_looking_hung():
    async def report(waiting, limit):
        limiter = LocalLimiter("k", LimitPolicy(max_limit=8))
        limiter.state.limit = limit
        limiter.state.paused_until += waiting
        return await limiter.report(0)

    paused, low = asyncio.run(report(12.2, 4)), asyncio.run(report(0, 3))
    assert describe([low, paused]) == "rate-limited, waiting 12s, limit 4"
    assert describe([low]) == "limit 3/8" and describe([]) == ""
    out = io.StringIO()
    with RunProgress("demo", 10, 0, console=Console(file=out, width=200, force_terminal=False)) as progress:
        progress.show_limits(describe([paused]))
        progress.advance(False)
    assert "rate-limited, waiting 12s, limit 4" in out.getvalue()


def test_slots_of_dead_holders_come_back_and_waiters_wake_without_a_release():
    # A waiter whose only hope is an expiring lease (its holder died and never releases) must not
    # wait forever: it looks again when the oldest lease expires.
    async def expiry() -> float:
        limiter = LocalLimiter("k", LimitPolicy(max_limit=1, lease_s=0.2))
        await limiter.acquire("gone:1")
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(limiter.acquire("alive:2"), timeout=5)
        return asyncio.get_running_loop().time() - started

    assert 0.15 < asyncio.run(expiry()) < 4

    # Slots held on a dead node are taken back at once, and the waiter gets one.
    async def dropped() -> tuple[int, int]:
        limiter = LocalLimiter("k", LimitPolicy(max_limit=2, lease_s=3600))
        await limiter.acquire("n1:1")
        await limiter.acquire("n2:7")
        waiting = asyncio.ensure_future(limiter.acquire("n2:8"))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        freed = limiter.drop_holders(lambda holder: holder.startswith("n1:"))
        await asyncio.wait_for(waiting, timeout=1)
        return freed, limiter.state.in_flight

    assert asyncio.run(dropped()) == (1, 2)
    state = AIMDLimit("k", LimitPolicy(max_limit=2, lease_s=10.0), now=0.0)
    assert state.wake_in(0.0) is None  # nothing held, no pause: only a release can help
    state.try_acquire(1.0, "a:1")
    assert state.wake_in(4.0) == 7.0
