"""One cell of an ADV-0 claim check: one arm at one seed, as a run of the suite `adv0-check` records
it (`check_suite.py`) and the check's judge reads it back (`checks.py`). A cell holds what the
verdict needs and nothing it can recompute: the episodes the arm played (whole `EpisodeResult`s,
by role: evaluation, held-out, normal traffic), per-unit numbers (the toy checks' per-context
values), counts (training rollouts) and short texts (C9's lessons). A check's verdict pools its
arm's cells in seed order, so it is a pure function of the records.

The seed of a cell is a replicate: its own training seed and its own evaluation seeds (seed 0 is
the check as it always ran, so a check at its default size -- one seed per arm, three for C7 --
plays exactly the episodes it played before it ran as cells).

May import: pydantic, numpy, `harness`, `environments.adv0.sim.scenario`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

import numpy as np
from pydantic import BaseModel, Field

from environments.adv0.sim.scenario import EpisodeResult
from harness.errors import HarnessError

# The arms whose cells a check runs, the method first (each arm one run of `adv0-check`). C9 is one
# arm: both of its conditions drive the same trained driver on the same attacker draws (with the
# memory, then without), so splitting them would train the driver twice -- every step a model call --
# and lose the pairing.
ARMS: dict[str, tuple[str, ...]] = {
    "C1": ("adv0",),
    "C2": ("adv0",),
    "C3": ("adv0", "random", "scripted", "cat"),
    "C4": ("adv0", "random", "scripted", "cat"),
    "C5": ("adv0", "sage"),
    "C6": ("adv0-trained", "normally-trained"),
    "C7": ("adv0-trained", "normally-trained"),
    "C8": ("iterated", "frozen"),
    "C9": ("with-and-without-reflections",),
}
# Seeds (cells per arm) at a check's default size: C6's and C7's training seeds; one elsewhere.
DEFAULT_SEEDS = {"C6": 1, "C7": 3}
MAX_SEED = 200  # `LoopConfig.seed`'s bound: seed s plays evaluation seeds s * 10^7 + ...


class CheckFlags(TypedDict, total=False):
    """A check's size flags, as `checks.run_check` and `harness adv0 check` take them (None or
    absent: the check's default size). A plain dict because cells and judges take them as keywords."""

    episodes: int | None
    seeds: int | None  # contexts, or C6/C7's training seeds (the cells themselves)
    family: str | None
    model: str | None  # C9's driver
    rounds: int | None
    dqn_steps: int | None  # C7
    dqn_checkpoint: str | None  # C7


class SizedFlags(CheckFlags, total=False):
    """The flags a finding ran at (its `overrides`): the check's and the cells per arm."""

    replicates: int | None


class Cell(BaseModel):
    check: str
    arm: str
    seed: int
    episodes: dict[str, list[EpisodeResult]] = Field(default_factory=dict, description="role -> the episodes played")
    values: dict[str, list[float]] = Field(default_factory=dict, description="per-unit numbers (per context)")
    counts: dict[str, int] = Field(default_factory=dict)
    stats: dict[str, float | None] = Field(default_factory=dict, description="one number each (None: undefined)")
    texts: dict[str, list[str]] = Field(default_factory=dict)


def pooled_episodes(cells: Sequence[Cell], role: str) -> list[EpisodeResult]:
    return [r for c in sorted(cells, key=lambda c: c.seed) for r in c.episodes.get(role, [])]


def pooled_values(cells: Sequence[Cell], name: str) -> np.ndarray:
    return np.array([v for c in sorted(cells, key=lambda c: c.seed) for v in c.values.get(name, [])], dtype=float)


def pooled_count(cells: Sequence[Cell], name: str) -> int:
    return sum(c.counts.get(name, 0) for c in cells)


def mean_stat(cells: Sequence[Cell], name: str) -> float | None:
    found = [v for c in cells if (v := c.stats.get(name)) is not None]
    return float(np.mean(found)) if found else None


def arm_cells(check: str, cells: Mapping[str, Sequence[Cell]]) -> dict[str, list[Cell]]:
    """The cells of each of the check's arms, checked: every arm there, the same seeds in each."""
    seeds: set[int] | None = None
    out = {}
    for arm in ARMS[check]:
        found = sorted(cells.get(arm, []), key=lambda c: c.seed)
        if not found:
            raise HarnessError(
                f"claim adv0.{check}: no cell of arm {arm!r}; run `harness adv0 check {check}` or give that arm's run"
            )
        have = {c.seed for c in found}
        if len(have) != len(found):
            raise HarnessError(f"claim adv0.{check}: arm {arm!r} has a seed twice; give each arm's run once")
        if seeds is not None and have != seeds:
            raise HarnessError(
                f"claim adv0.{check}: arm {arm!r} has seeds {sorted(have)}, the others {sorted(seeds)}: "
                "the arms are compared on the same seeds; resume the unfinished run"
            )
        seeds = have
        out[arm] = found
    return out
