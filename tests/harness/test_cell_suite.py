"""`harness.cell_suite.CellSuite`: the shared base of suites whose cells are built in code (ADV-0's
claim checks, PreFT's RL runs) refuses a corpus, solves a cell off the event loop, and scores the
recorded cell (its JSON dump, validated once into the subclass's model by the runner)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from pydantic import BaseModel

from harness.cell_suite import CellSuite
from harness.errors import HarnessError
from harness.records import Metric, SampleRecord
from harness.runner import score_transcript
from harness.suite import RecordMismatch, Sample, SampleContext, SuiteOptions


class Square(BaseModel):
    seed: int
    value: int
    thread: str


class SquareSuite(CellSuite[Square]):
    name = "test.square"
    version = "0.0.1"
    headline_metric = "value"
    transcript_type = Square
    built_in_code = "squares"

    def cells(self) -> list[Sample]:
        return [Sample(id=f"sq/seed{s:03d}", data={"seed": s}) for s in range(3)]

    def solve_cell(self, sample: Sample) -> Square:
        seed = int(sample.data["seed"])
        return Square(seed=seed, value=seed * seed, thread=threading.current_thread().name)

    def score_cell(self, cell: Square) -> dict[str, float | None]:
        return {"value": float(cell.value), "odd": float(cell.seed % 2)}

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        return {}


def test_a_cell_suite_refuses_a_corpus_and_calls_no_model():
    suite = SquareSuite(SuiteOptions())
    assert suite.solver_roles == () and suite.roles == ()
    assert [s.id for s in suite.load_samples(None)] == ["sq/seed000", "sq/seed001", "sq/seed002"]
    with pytest.raises(HarnessError, match="the squares are built in code; it takes no corpus"):
        suite.load_samples("corpus.jsonl")


def test_a_cell_is_solved_in_a_worker_thread_and_scored_from_its_dump():
    suite = SquareSuite(SuiteOptions())
    sample = suite.load_samples(None)[2]
    ctx = SampleContext({}, seed=0, overrides={})
    outcome = asyncio.run(suite.run_sample(sample, ctx))
    assert outcome.output["value"] == 4 and outcome.output["thread"] != threading.main_thread().name
    assert outcome.scores == {"value": 4.0, "odd": 0.0}
    # A re-score reads the recorded dump through the cell model (the suite's transcript type): a dump
    # the model rejects is that sample's named error, not a silent score.
    assert suite.scorer(None).name == "cell" and SquareSuite.transcript_type is Square
    assert suite.read_transcript(outcome.output) == Square(seed=2, value=4, thread=outcome.output["thread"])
    scores, errors = asyncio.run(score_transcript(suite, suite.scorer(None), sample, {"seed": 2}, ctx, 10.0))
    assert scores == {} and [e.kind for e in errors] == ["record"] and "test.square" in errors[0].message
    with pytest.raises(RecordMismatch, match="value"):
        suite.read_transcript({"seed": 2})
