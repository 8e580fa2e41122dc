"""A suite of cells built in code: each sample is a cell (a setting and a seed, `claims.model.cell_id`),
solved by one CPU-bound computation -- a training, a simulation -- and scored from its recorded
cell alone, so `harness score` recomputes the scores without solving again. No model role is
called by the runner (`solver_roles` is empty): a cell that needs a model loads it itself.

ADV-0's claim checks (`adv0-check`) and PreFT's RL runs (`preft.rl`) are such suites. A subclass
(`CellSuite[TheirCell]`) names its cell model (`transcript_type`), lists its cells (`cells`),
solves one (`solve_cell`) and scores a recorded one (`score_cell`); it keeps its own options,
metrics and counts.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel

from harness.errors import HarnessError
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, Suite, Transcript

CellT = TypeVar("CellT", bound=BaseModel)


# A sample's data is the cell's integer coordinates besides its setting, e.g. {"seed": 3} or
# {"rank": 8, "seed": 3}.
class CellSuite(Suite[dict[str, int], CellT, dict[str, float | None]], Generic[CellT]):
    # A subclass sets `transcript_type` to CellT's class (a ClassVar cannot name a type variable): the
    # runner validates each recorded cell into it once, so scoring gets the object.
    # What the corpus refusal says is built in code ("the cells are built in code").
    built_in_code: ClassVar[str] = "cells"
    scorer_name: ClassVar[str] = "cell"
    scorer_description: ClassVar[str] = ""

    @property
    def solver_roles(self) -> tuple[str, ...]:
        return ()

    def load_samples(self, corpus: str | None) -> list[Sample]:
        if corpus is not None:
            raise HarnessError(
                f"suite {self.name}: the {self.built_in_code} are built in code; it takes no corpus ({corpus!r} given)"
            )
        return self.cells()

    @abstractmethod
    def cells(self) -> list[Sample]:
        """The run's samples, one per cell, from the options."""

    async def solve(self, sample: Sample, ctx: SampleContext) -> Transcript:
        # In a thread: a cell is CPU-bound (seconds to minutes), and the runner's per-sample timeout must still fire.
        return Transcript(output=await asyncio.to_thread(self.solve_cell, sample))

    @abstractmethod
    def solve_cell(self, sample: Sample) -> CellT:
        """Compute the cell (blocking; it runs in a worker thread)."""

    def scorers(self) -> dict[str, Scorer[CellT]]:
        return {self.scorer_name: FunctionScorer(self.scorer_name, self._score, description=self.scorer_description)}

    async def _score(self, sample: Sample, transcript: CellT, ctx: SampleContext) -> Score:
        return Score(values=self.score_cell(transcript))

    @abstractmethod
    def score_cell(self, cell: CellT) -> dict[str, float | None]:
        """The cell's scores, from the recorded cell alone."""
