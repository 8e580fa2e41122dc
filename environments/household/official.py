"""ALFWorld's official text games, when `ALFWORLD_DATA` points at the downloaded data: the splits
as ALFWorld's `AlfredTWEnv` collects them, unchanged.

    train          $ALFWORLD_DATA/json_2.1.1/train         (ALFWorld's "train")
    valid_seen     $ALFWORLD_DATA/json_2.1.1/valid_seen    ("eval_in_distribution")
    valid_unseen   $ALFWORLD_DATA/json_2.1.1/valid_unseen  ("eval_out_of_distribution")

A game is a trial folder holding `traj_data.json` and `game.tw-pddl`; like ALFWorld we skip
`movable` and `Sliced` trials, task types outside the six, games without a `game.tw-pddl` and
games not marked solvable. Unlike its `os.walk` order, games are sorted by path, so a split has one
order on every machine.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from environments.household import USER_ALFWORLD_DATA
from environments.household.generator import TASK_TYPES
from environments.household.task import OfficialTask

SPLITS = ("train", "valid_seen", "valid_unseen")
DEFAULT_SPLIT = "valid_unseen"
_TASK_LINE = re.compile(r"Your task is to: ([^\"\\]*)")


class OfficialDataError(ValueError):
    pass


def data_root() -> Path | None:
    """The official data folder the user named in ALFWORLD_DATA, or None. alfworld's own default
    cache folder counts as unset while it holds no data: importing alfworld sets the variable to
    it, in this process and in every process started from it."""
    value = USER_ALFWORLD_DATA or os.environ.get("ALFWORLD_DATA")
    if not value:
        return None
    root = Path(os.path.expandvars(value)).expanduser()
    if not (root / "json_2.1.1").is_dir():
        if root.resolve() == Path("~/.cache/alfworld").expanduser().resolve():
            return None
        raise OfficialDataError(f"ALFWORLD_DATA={value}: no json_2.1.1 folder there; point it at the folder "
                                "`alfworld-download` filled, or unset it to run the generated tasks")
    return root


def official_tasks(root: Path, split: str = DEFAULT_SPLIT) -> list[OfficialTask]:
    if split not in SPLITS:
        raise OfficialDataError(f"split {split!r}: unknown; choose one of {', '.join(SPLITS)}")
    split_dir = root / "json_2.1.1" / split
    if not split_dir.is_dir():
        raise OfficialDataError(f"{split_dir}: missing; the official data has {', '.join(SPLITS)}")
    tasks = []
    for traj in sorted(split_dir.rglob("traj_data.json")):
        trial = traj.parent
        rel = trial.relative_to(split_dir).as_posix()
        if "movable" in rel or "Sliced" in rel:
            continue
        game = trial / "game.tw-pddl"
        if not game.is_file():
            continue
        task_type = json.loads(traj.read_text()).get("task_type")
        if task_type not in TASK_TYPES:
            continue
        if not json.loads(game.read_text()).get("solvable"):
            continue
        tasks.append(OfficialTask(task_id=f"{split}/{rel}", task_type=task_type, game_file=str(game),
                                  required_irreversible=[], split=split))
    if not tasks:
        raise OfficialDataError(f"{split_dir}: no playable games (trial folders with traj_data.json and a solvable "
                                "game.tw-pddl)")
    return tasks


def intent_of_game(game_file: str) -> str:
    """The task sentence ALFWorld wrote into the game's grammar ("put a clean apple in fridge")."""
    grammar = json.loads(Path(game_file).read_text()).get("grammar", "")
    match = _TASK_LINE.search(grammar)
    return match.group(1).strip().rstrip(".") if match else "UNKNOWN GOAL"
