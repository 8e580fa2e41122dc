"""Every model call goes through here: concurrency limit, cache, timeout, retries with backoff.

Providers stay thin; this is the one place where the policy for talking to a model lives.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

from harness.cache import CallCache
from harness.limits import Limiter, LimitPolicy, LocalLimiter
from harness.messages import ChatMessage, MessageError, check_messages, has_images
from harness.providers.base import (
    ConstraintError,
    GenerateConfig,
    Model,
    ModelError,
    ModelOutput,
    RetryableModelError,
    check_constraint,
    request_hash,
)


@dataclass
class CallPolicy:
    timeout_s: float = 300.0
    max_retries: int = 5
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Exponential backoff with full jitter (attempt counts from 1)."""
        cap = min(self.backoff_max_s, self.backoff_base_s * (2 ** (attempt - 1)))
        return rng.uniform(0.0, cap)


@dataclass
class CallStats:
    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    errors_by_kind: dict[str, int] = field(default_factory=dict)

    def count_error(self, exc: BaseException) -> None:
        kind = type(exc).__name__
        self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + 1

    def add(self, other: CallStats) -> None:
        """Add another process's counts (a Ray task's) to these."""
        self.calls += other.calls
        self.cache_hits += other.cache_hits
        self.retries += other.retries
        self.failures += other.failures
        for kind, n in other.errors_by_kind.items():
            self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + n


class ManagedModel:
    """A provider model plus the run's policy. One per distinct model spec in a run, so the
    concurrency limit is per model even when several roles share it."""

    def __init__(self, model: Model, *, max_connections: int, policy: CallPolicy,
                 cache: CallCache | None = None, rng_seed: int = 0, limiter: Limiter | None = None):
        self.model = model
        self.name = model.name
        self.policy = policy
        self.cache = cache
        self.stats = CallStats()
        # The calls in flight: the provider+key's adaptive limit (shared with every model on the
        # same key, and across a Ray cluster), or this model's own when none is given.
        self.limiter: Limiter = limiter or LocalLimiter(self.name, LimitPolicy(max_limit=max_connections))
        self._rng = random.Random(rng_seed)

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        check_constraint(config)  # a bad schema, regex or tool is the caller's error: never sent, never retried
        try:  # every provider's input, checked once here: a malformed message is the caller's error too
            check_messages(messages, f"{self.name}: messages")
        except MessageError as exc:
            raise ConstraintError(str(exc)) from None
        if has_images(messages) and not getattr(self.model, "sees_images", False):
            raise ConstraintError(f"{self.name} cannot be shown a picture: a vision judge needs an openai/ model "
                                  "that takes image input")
        if config.output == "image" and not getattr(self.model, "draws_images", False):
            raise ConstraintError(f"{self.name} has no images endpoint: a picture needs an openai/ model whose "
                                  "--base-url serves /v1/images/generations")
        key = request_hash(self.name, messages, config)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                return hit
        attempt = 0
        while True:
            attempt += 1
            lease = await self.limiter.acquire()  # waits out a Retry-After pause and the limit
            started = time.perf_counter()
            try:
                self.stats.calls += 1
                # asyncio.timeout, not wait_for: no extra task per call (measurable at 500 calls/s).
                async with asyncio.timeout(self.policy.timeout_s):
                    out = await self.model.generate(messages, config)
            except (RetryableModelError, asyncio.TimeoutError) as exc:
                rate_limited = isinstance(exc, RetryableModelError) and exc.rate_limited
                retry_after = exc.retry_after_s if isinstance(exc, RetryableModelError) else None
                self.limiter.release(lease, "rate-limited" if rate_limited else "error", retry_after)
                self.stats.count_error(exc)
                if attempt > self.policy.max_retries:
                    self.stats.failures += 1
                    reason = f"timed out after {self.policy.timeout_s:g}s" if isinstance(exc, asyncio.TimeoutError) else str(exc)
                    raise ModelError(f"{self.name}: gave up after {attempt} attempts: {reason}") from exc
                self.stats.retries += 1
                # A rate limit's Retry-After is the limiter's pause (every new call waits it out);
                # another error's is this call's own least wait.
                wait = self.policy.delay(attempt, self._rng)
                if retry_after and not rate_limited:
                    wait = max(wait, min(retry_after, self.policy.backoff_max_s))
                await asyncio.sleep(wait)
                continue
            except ModelError as exc:
                self.limiter.release(lease, "error")
                self.stats.count_error(exc)
                self.stats.failures += 1
                raise
            except BaseException:  # cancelled (the sample's time limit, Ctrl-C): give the slot back
                self.limiter.release(lease, "error")
                raise
            self.limiter.release(lease, "ok")
            # The provider's output object is fresh and ours: set fields in place (no copy per call).
            out.request_hash = key
            out.attempts = attempt
            out.latency_s = out.latency_s or (time.perf_counter() - started)
            if self.cache is not None:
                self.cache.put(key, self.name, out)
            return out

    async def aclose(self) -> None:
        await self.model.aclose()
