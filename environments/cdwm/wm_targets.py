"""What `harness cdwm train --target T` trains besides the delta world model: the baselines at equal
budget, each a prompt and a reply text per collected transition (no mask is learned for them).

- `value` (value_model.py): a good / neutral / bad label;
- `generative` (generative_model.py): the next observation's text.

`wm_train.py` asks this module for a baseline's rows, columns and format, so that adding one more is
a module with `row_messages`, a reply, its columns and its format, and one entry here.

May import: `harness`, `agents`, `environments.cdwm`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from environments.cdwm import generative_model, value_model
from environments.cdwm.collect import TransitionRow
from harness.errors import HarnessError
from harness.messages import ChatMessage


@dataclass(frozen=True)
class Baseline:
    format: str  # cdwm_train.json's `format`: the planner arm refuses an adapter of another
    columns: tuple[str, ...]  # the dataset columns its rows need beyond the delta model's
    messages: Callable[[TransitionRow, int], list[ChatMessage]]  # (row, obs_chars) -> the prompt
    reply: Callable[[TransitionRow, int], str]  # (row, obs_chars) -> the text it is trained to write
    check: Callable[[Path, str, list[str]], None] | None = None  # (folder, split, columns): refuse old data


BASELINES = {
    "value": Baseline(value_model.VALUE_FORMAT, value_model.NEEDED_COLUMNS, value_model.row_messages,
                      lambda row, _chars: value_model.goodness(row)),
    "generative": Baseline(generative_model.GENERATIVE_FORMAT, generative_model.NEEDED_COLUMNS,
                           generative_model.row_messages, generative_model.target, generative_model.check_columns),
}


def check_split(target: str, folder: Path, split: str, columns: list[str]) -> None:
    """A split the target cannot train on is refused, naming it and the fix."""
    baseline = BASELINES.get(target)
    if baseline is None:
        return
    if baseline.check is not None:
        baseline.check(folder, split, columns)
    missing = [c for c in baseline.columns if c not in columns]
    if missing:
        raise HarnessError(f"{folder / split}: columns {', '.join(missing)} missing for --target {target}; collect "
                           f"the data again with `harness cdwm collect`")
