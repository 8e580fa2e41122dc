"""The driver's side of a distributed run, with no Ray in it: work cut into chunks, an attempt
journal line written before each chunk is dispatched, failed chunks dispatched again (bounded),
and every returned record handed to `deliver`, which drops a (sample, epoch) already recorded.

Exactly-once comes from the records, not from the engine: an engine may run a chunk twice (a
retry after a node died, a straggler's late answer); the second copy of a record is dropped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from harness.calls import CallStats
from harness.errors import HarnessError
from harness.records import SampleRecord, now_iso
from harness.runner import Deliver, WorkItem


@dataclass
class ChunkResult:
    """What one chunk's task sends back: its records and its model-call counts."""

    records: list[SampleRecord]
    stats: dict[str, CallStats] = field(default_factory=dict)
    worker: str = ""  # where it ran (a Ray node id), for the journal


# chunk id, attempt, items -> the chunk's result (raises one of `retryable` when its node died)
Submit = Callable[[int, int, list[WorkItem]], Awaitable[ChunkResult]]


def cut_chunks(items: list[WorkItem], size: int) -> list[list[WorkItem]]:
    return [items[i:i + size] for i in range(0, len(items), max(1, size))]


def chunk_size(n_items: int, concurrency: int, min_chunks: int = 16) -> int:
    """Big enough to keep `concurrency` samples in flight inside a task, small enough that there
    are at least `min_chunks` chunks to spread over nodes (and a lost node loses little work)."""
    return max(1, min(2 * concurrency, -(-n_items // min_chunks)))


def unit_id(item: WorkItem) -> str:
    """A work unit's stable id: the same sample and epoch give the same id in every run and resume."""
    return f"{item.sample.id}#{item.epoch}"


class AttemptJournal:
    """`attempts.jsonl` in the run folder: one line per dispatch (written before the chunk is
    sent), per failure and per finished chunk (how many records were new, how many duplicates).
    Written by the driver only; the records, not this journal, say what is finished."""

    def __init__(self, path: Path):
        self.path = path
        self._fh: TextIO | None = None

    def write(self, event: str, chunk: int, attempt: int, **fields: object) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")
        line = {"event": event, "chunk": chunk, "attempt": attempt, "at": now_iso()} | fields
        self._fh.write(json.dumps(line) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


async def dispatch_chunks(chunks: list[list[WorkItem]], submit: Submit, deliver: Deliver, journal: AttemptJournal,
                          stats: dict[str, CallStats], *, retryable: tuple[type[BaseException], ...],
                          max_attempts: int = 3) -> None:
    """Send every chunk, collect every record; a chunk that fails with a `retryable` error is
    sent again (a new attempt, journalled) up to `max_attempts`, then the run stops resumable."""
    pending: dict[asyncio.Future[ChunkResult], tuple[int, int]] = {}

    def send(chunk: int, attempt: int) -> None:
        items = chunks[chunk]
        journal.write("dispatch", chunk, attempt, units=[unit_id(i) for i in items])
        pending[asyncio.ensure_future(submit(chunk, attempt, items))] = (chunk, attempt)

    for chunk in range(len(chunks)):
        send(chunk, 1)
    try:
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                chunk, attempt = pending.pop(fut)
                try:
                    result = fut.result()
                except retryable as exc:
                    journal.write("failed", chunk, attempt, error=f"{type(exc).__name__}: {exc}"[:500])
                    if attempt >= max_attempts:
                        first = unit_id(chunks[chunk][0])
                        raise HarnessError(
                            f"chunk {chunk} (from sample {first}) failed {attempt} times, last: {type(exc).__name__}: "
                            f"{str(exc)[:200]}; what finished is saved: resume the run once the cluster is healthy"
                        ) from exc
                    send(chunk, attempt + 1)
                    continue
                new = sum(deliver(record) for record in result.records)
                for name, counts in result.stats.items():
                    stats.setdefault(name, CallStats()).add(counts)
                journal.write("finished", chunk, attempt, new=new, duplicates=len(result.records) - new,
                              worker=result.worker)
    finally:
        for fut in pending:
            fut.cancel()
