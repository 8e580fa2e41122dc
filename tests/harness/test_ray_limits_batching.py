"""The worker's end of the cluster limiter (`ray_limits.RayLimiter`) batches its messages to the
actor: calls waiting together share one `acquire_many`, successes go back together, a rate limit
at once. The actor's body is the real `LimiterHost`; only Ray's transport is replaced by a stand-in
that runs each method as a task in the same loop (the test is about our batching, not Ray)."""

import asyncio

import pytest

from harness.executors.ray_limits import RELEASE_DELAY_S, RayLimiter
from harness.limits import LimiterHost


class Method:
    """`handle.NAME.remote(...)`: counted, and run as a task like a message to an async actor."""

    def __init__(self, fn, log: list[str], name: str):
        self.fn, self.log, self.name = fn, log, name

    def remote(self, *args):
        self.log.append(self.name)
        return asyncio.get_running_loop().create_task(self.fn(*args))


class LoopbackHandle:
    def __init__(self, host: LimiterHost):
        self.log: list[str] = []
        for name in ("acquire_many", "release_many", "report"):
            setattr(self, name, Method(getattr(host, name), self.log, name))


def limiter(max_limit: int) -> tuple[RayLimiter, LimiterHost, LoopbackHandle]:
    host = LimiterHost("k", max_limit, lease_s=60.0)
    handle = LoopbackHandle(host)
    return RayLimiter("k", handle, "node"), host, handle


async def settle() -> None:
    await asyncio.sleep(RELEASE_DELAY_S * 4)


def test_calls_waiting_together_share_one_round_trip_and_the_limit_holds():
    async def go():
        ray_limiter, host, handle = limiter(4)
        acquiring = [asyncio.create_task(ray_limiter.acquire()) for _ in range(10)]
        await asyncio.sleep(0.01)
        got = [t.result() for t in acquiring if t.done()]
        assert len(got) == 4 and len(set(got)) == 4  # the actor's limit, not the callers', decides
        assert host.limiter.state.in_flight == 4
        assert handle.log.count("acquire_many") <= 2  # not one message per call
        for lease in got:
            ray_limiter.release(lease, "ok")
        assert handle.log.count("release_many") == 0  # successes wait to go together
        await settle()
        assert handle.log.count("release_many") == 1
        # The freed slots reach the waiters, four of them, and no more than the limit is out.
        second = [t.result() for t in acquiring[4:] if t.done()]
        assert len(second) == 4 and host.limiter.state.in_flight == 4
        for lease in second:
            ray_limiter.release(lease, "ok")
        await settle()
        last = await asyncio.wait_for(asyncio.gather(*acquiring[8:]), 1.0)
        for lease in last:
            ray_limiter.release(lease, "ok")
        ray_limiter.flush()
        await settle()
        assert host.limiter.state.in_flight == 0
        assert len({t.result() for t in acquiring}) == 10  # every call had its own lease
        assert handle.log.count("acquire_many") <= 4 and handle.log.count("release_many") <= 3

    asyncio.run(go())


def test_a_rate_limit_is_sent_at_once_and_halves_the_limit():
    async def go():
        ray_limiter, host, handle = limiter(8)
        leases = [await ray_limiter.acquire() for _ in range(2)]
        ray_limiter.release(leases[0], "ok")
        ray_limiter.release(leases[1], "rate-limited", 0.0)
        assert handle.log.count("release_many") == 1  # the success went with it, no waiting
        await asyncio.sleep(0)
        assert host.limiter.state.limit == 4 and host.limiter.state.in_flight == 0

    asyncio.run(go())


def test_a_cancelled_call_leaves_no_slot_behind():
    async def go():
        ray_limiter, host, _ = limiter(1)
        first = await ray_limiter.acquire()
        waiting = asyncio.create_task(ray_limiter.acquire())
        await asyncio.sleep(0.01)
        waiting.cancel()
        ray_limiter.release(first, "ok")
        ray_limiter.flush()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await settle()
        assert host.limiter.state.in_flight == 0  # the lease that came for it went straight back
        assert await asyncio.wait_for(ray_limiter.acquire(), 1.0) > first

    asyncio.run(go())


def test_an_actor_failure_reaches_every_waiting_call():
    async def go():
        ray_limiter, _, handle = limiter(2)

        async def broken(holder, n):
            raise RuntimeError("actor died")

        handle.acquire_many = Method(broken, handle.log, "acquire_many")
        calls = [asyncio.create_task(ray_limiter.acquire()) for _ in range(3)]
        results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 1.0)
        assert all(isinstance(r, RuntimeError) for r in results)

    asyncio.run(go())
