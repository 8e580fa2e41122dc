"""Base for the suites whose samples are the rows of a ProactBench-format corpus (one row = one
dialogue = one sample): `proact`, `proact-judge`, `proact-audit`. A sample's data is the row as
its typed `CorpusRow`, read once when the corpus is loaded."""

from __future__ import annotations

from pydantic import JsonValue
from typing_extensions import TypeVar

from corpora.proact_types import CorpusRow
from corpora.proactbench import load_typed_rows
from harness.suite import Sample, Suite, SuiteOptions

TranscriptT = TypeVar("TranscriptT")
ScoresT = TypeVar("ScoresT")


class CorpusSuite(Suite[CorpusRow, TranscriptT, ScoresT]):
    def __init__(self, options: SuiteOptions | None = None) -> None:
        super().__init__(options)
        self._identity: dict[str | None, dict[str, JsonValue]] = {}

    def keep(self, row: CorpusRow) -> bool:
        """Which rows become samples (all, unless a suite needs something of them)."""
        return True

    def load_samples(self, corpus: str | None) -> list[Sample[CorpusRow]]:
        rows, identity = load_typed_rows(corpus)  # checked and typed row by row (file:line errors)
        self._identity[corpus] = identity
        return [Sample(id=row.unique_id_eval, data=row) for row in rows if self.keep(row)]

    def corpus_identity(self, corpus: str | None) -> dict[str, JsonValue]:
        if corpus not in self._identity:
            self.load_samples(corpus)
        return dict(self._identity[corpus])
