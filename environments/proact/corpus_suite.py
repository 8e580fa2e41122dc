"""Base for the suites whose samples are the rows of a ProactBench-format corpus (one row = one
dialogue = one sample): `proact`, `proact-judge`, `proact-audit`."""

from __future__ import annotations

from typing import Any

from corpora.proactbench import load_rows
from harness.suite import Sample, Suite, SuiteOptions


class CorpusSuite(Suite):
    def __init__(self, options: SuiteOptions | None = None) -> None:
        super().__init__(options)
        self._identity: dict[str | None, dict[str, Any]] = {}

    def keep(self, row: dict[str, Any]) -> bool:
        """Which rows become samples (all, unless a suite needs something of them)."""
        return True

    def load_samples(self, corpus: str | None) -> list[Sample]:
        rows, identity = load_rows(corpus)
        self._identity[corpus] = identity
        return [Sample(id=row["unique_id_eval"], data=row) for row in rows if self.keep(row)]

    def corpus_identity(self, corpus: str | None) -> dict[str, Any]:
        if corpus not in self._identity:
            self.load_samples(corpus)
        return dict(self._identity[corpus])
