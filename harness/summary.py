"""A run's figures from its records in one streaming pass (`runner.summarize` builds the summary).

The records come as any iterable -- a list in memory, or `RunFolder.iter_samples()` straight from
samples.jsonl -- and give the same figures either way. What is kept per record is the suite's
choice: a suite with `metrics_accumulator()` (the `StreamingMetrics` protocol) keeps only what
its metrics need (counts, a number per unit), so a run of a million samples is summarised in
bounded memory; any other suite gets its records back as a list, sorted by (sample, epoch), and
its `metrics(records)` as before (memory then grows with the run).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pydantic import JsonValue

from harness.providers.base import Usage
from harness.records import EpochSpread, Metric, SampleRecord
from harness.suite import Suite


class MetricsAccumulator(Protocol):
    """Takes records one at a time; the figures it returns must not depend on their order (a
    bootstrap over units sorted by key, or one drawn from counts), so a run gives the same
    summary however it was scheduled or read back."""

    def add(self, record: SampleRecord) -> None: ...

    def metrics(self, seed: int) -> dict[str, Metric]: ...

    def breakdowns(self, seed: int) -> dict[str, dict[str, Metric]]: ...

    def counts(self) -> dict[str, int]: ...

    def official(self) -> dict[str, JsonValue]: ...


@runtime_checkable
class StreamingMetrics(Protocol):
    """A suite whose metrics are computed by accumulation (one accumulator per figure set)."""

    def metrics_accumulator(self) -> MetricsAccumulator: ...


class RecordList:
    """The accumulator of a suite without one: keeps the records, then calls the suite's own
    list methods on them in (sample, epoch) order -- the order a bootstrap CI depends on."""

    def __init__(self, suite: Suite):
        self.suite = suite
        self.records: list[SampleRecord] = []

    def add(self, record: SampleRecord) -> None:
        self.records.append(record)

    def _sorted(self) -> list[SampleRecord]:
        self.records.sort(key=lambda r: r.key)
        return self.records

    def metrics(self, seed: int) -> dict[str, Metric]:
        return self.suite.metrics(self._sorted(), seed=seed)

    def breakdowns(self, seed: int) -> dict[str, dict[str, Metric]]:
        return self.suite.breakdowns(self._sorted(), seed=seed)

    def counts(self) -> dict[str, int]:
        return self.suite.counts(self._sorted())

    def official(self) -> dict[str, JsonValue]:
        return self.suite.official_summary(self._sorted())


def accumulator_for(suite: Suite) -> MetricsAccumulator:
    return suite.metrics_accumulator() if isinstance(suite, StreamingMetrics) else RecordList(suite)


@dataclass
class Figures:
    """Everything of a summary that comes from the records."""

    metrics: dict[str, Metric]
    breakdowns: dict[str, dict[str, Metric]]
    epochs: dict[str, EpochSpread]
    counts: dict[str, int]
    official: dict[str, JsonValue]
    usage: dict[str, Usage] = field(default_factory=dict)


def figures(suite: Suite, records: Iterable[SampleRecord], seed: int) -> Figures:
    """One pass over the records: the run's accumulator, one per epoch (for the spread between
    epochs), token usage per role and the sample/error counts."""
    overall = accumulator_for(suite)
    per_epoch: dict[int, MetricsAccumulator] = {}
    tokens: dict[str, list[int]] = {}  # role -> prompt, completion, calls (plain ints: cheap per record)
    samples = errors = 0
    for rec in records:
        overall.add(rec)
        if rec.epoch not in per_epoch:
            per_epoch[rec.epoch] = accumulator_for(suite)
        per_epoch[rec.epoch].add(rec)
        for role, u in rec.usage.items():
            total = tokens.setdefault(role, [0, 0, 0])
            total[0] += u.prompt_tokens
            total[1] += u.completion_tokens
            total[2] += u.calls
        samples += 1
        errors += rec.status == "error"
    counts = {"samples": samples, "sample_errors": errors} | overall.counts()
    return Figures(metrics=overall.metrics(seed), breakdowns=overall.breakdowns(seed),
                   epochs=epoch_spread([per_epoch[e].metrics(seed) for e in sorted(per_epoch)]),
                   counts=counts, official=overall.official(),
                   usage={role: Usage(prompt_tokens=p, completion_tokens=c, calls=n)
                          for role, (p, c, n) in sorted(tokens.items())})


def epoch_spread(per_epoch: list[dict[str, Metric]]) -> dict[str, EpochSpread]:
    """With --epochs k: each metric per epoch, their mean and (sample) standard deviation --
    how much a score moves between repeats of the same run, beside the CI over samples."""
    if len(per_epoch) < 2:
        return {}
    out: dict[str, EpochSpread] = {}
    for name in per_epoch[0]:
        values = [m[name].value for m in per_epoch]
        present = [v for v in values if v is not None]
        mean = sum(present) / len(present) if present else None
        std = None
        if mean is not None and len(present) > 1:
            std = (sum((v - mean) ** 2 for v in present) / (len(present) - 1)) ** 0.5
        out[name] = {"values": values, "mean": mean, "std": std}
    return out
