"""One PreFT engine per process behind a worker thread, for callers on any thread or event loop.

`submit()` queues a `Request` and returns a `concurrent.futures.Future`; the worker admits new
requests between steps, so requests join and leave the running batch at every step (continuous
batching) instead of waiting for a batch to drain. Adapters are registered by directory on first
use, named by their resolved path plus a content hash, so an adapter rewritten in place is
reloaded instead of served stale.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import queue
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from preft.adapters import LORA_CONFIG, LORA_WEIGHTS, REFT_CONFIG, REFT_WEIGHTS, load_adapter
from preft.engine import Engine, Request

THREADS_ENV = "HARNESS_THREADS"


def engine_threads() -> int:
    """torch intra-op threads for the engine: `HARNESS_THREADS`, else `OMP_NUM_THREADS`, else the
    cores this process may run on. With OpenMP waiting passively (engine.py) one thread per core
    degrades gracefully when a neighbour keeps a core busy (kernels/README.md, measured)."""
    for name in (THREADS_ENV, "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                n = int(value)
            except ValueError:
                raise ValueError(f"{name}={value!r}: give a positive number of threads") from None
            if n < 1:
                raise ValueError(f"{name}={value!r}: give a positive number of threads")
            return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def apply_engine_threads() -> int:
    """Set the calling thread's torch threads (OpenMP keeps the count per thread, so the engine's
    worker thread sets its own) and return the count."""
    import torch

    n = engine_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


def adapter_key(path: str | Path) -> str:
    """`<resolved path>#<sha256 of its config and weights, 12 hex>`: the name the engine serves it by."""
    directory = Path(path).expanduser().resolve()
    digest = hashlib.sha256()
    for name in (LORA_CONFIG, LORA_WEIGHTS, REFT_CONFIG, REFT_WEIGHTS):
        f = directory / name
        if f.is_file():
            digest.update(name.encode())
            digest.update(f.read_bytes())
    return f"{directory}#{digest.hexdigest()[:12]}"


class EngineServer:
    def __init__(self, **engine_kwargs: Any) -> None:
        self.engine_kwargs = engine_kwargs
        self._queue: queue.Queue[tuple[Request, Future[Request]] | None] = queue.Queue()  # None: stop
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._engine: Engine | None = None
        self._futures: dict[int, Future[Request]] = {}

    def register_dir(self, path: str | Path) -> str:
        """Load the adapter at `path` into the engine (once per content) and return its name."""
        key = adapter_key(path)
        engine = self._get_engine()
        with self._lock:
            if key not in engine.loras.adapters and key not in engine.refts.adapters:
                engine.register(load_adapter(path, name=key))
        return key

    def submit(self, req: Request) -> Future[Request]:
        engine_threads()  # a bad HARNESS_THREADS is this caller's ValueError, not a dead worker
        future: Future[Request] = Future()
        self._ensure_thread()
        self._queue.put((req, future))
        return future

    def generate(self, req: Request, timeout: float | None = None) -> Request:
        return self.submit(req).result(timeout)

    def batch_sizes(self) -> list[int]:
        """Sequences in each recent step (the last 1000; for tests and diagnostics)."""
        return list(self._get_engine().stats.batch_sizes)

    def steps(self) -> int:
        """Engine steps since it started (monotone: pairs with `batch_sizes` when that is full)."""
        return self._get_engine().stats.steps

    def shutdown(self, timeout: float = 10.0) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            self._queue.put(None)
            thread.join(timeout)

    # -- worker --------------------------------------------------------------------------------

    def _get_engine(self) -> Engine:
        with self._lock:
            if self._engine is None:
                from harness.providers.embedded import load_model

                model, _ = load_model()
                self._engine = Engine(model, **self.engine_kwargs)
            return self._engine

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="preft-engine", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        apply_engine_threads()  # submit() checked the setting
        engine = self._get_engine()
        while True:
            # Block only when idle; while requests run, take whatever arrived since the last step.
            items = [self._queue.get()] if not engine.has_work() else []
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            for item in items:
                if item is None:
                    self._fail_all(RuntimeError("the PreFT engine was shut down"))
                    return
                req, future = item
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    engine.add(req)
                except Exception as exc:  # noqa: BLE001 - a bad request fails alone
                    future.set_exception(exc)
                    continue
                if req.done:
                    future.set_result(req)
                else:
                    self._futures[req.id] = future
            if not engine.has_work():
                continue
            try:
                finished = engine.step()
            except Exception as exc:  # noqa: BLE001 - fail what is in flight, keep serving
                self._fail_all(exc)
                engine = self._replace_engine(engine)
                continue
            for req in finished:
                self._futures.pop(req.id).set_result(req)

    def _replace_engine(self, old: Engine) -> Engine:
        """A fresh engine (the old one's batch state is suspect) that keeps the registered adapters."""
        with self._lock:
            self._engine = None
        engine = self._get_engine()
        for lora in old.loras.adapters.values():
            engine.register(lora)
        for reft in old.refts.adapters.values():
            engine.register(reft)
        return engine

    def _fail_all(self, exc: BaseException) -> None:
        for future in self._futures.values():
            if not future.done():
                future.set_exception(exc)
        self._futures.clear()


_SERVER: EngineServer | None = None
_SERVER_LOCK = threading.Lock()


def server() -> EngineServer:
    """The process-wide engine server (created on first use, shut down at exit)."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is None:
            _SERVER = EngineServer()
            atexit.register(_SERVER.shutdown)
        return _SERVER
