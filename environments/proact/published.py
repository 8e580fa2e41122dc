"""The sixteen models ProactBench's release scored, as reference rows beside a user's runs
(`ProactPresenter.reference_rows`, shown by `harness leaderboard export --with-published`).

Read at run time from the folder the user names (the release's `dataset/eval/`, one
`{model}_proactivity_bench_metrics.json` per model); nothing of it is copied here. Each file is
read with the same reader as `harness proact metrics --expect`, and its `eval/proactivity_*`
figures are matched to this suite's own metric names, so a published row and a run's row line up
column for column.

May import: `harness`, `corpora`, `environments.proact`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import JsonValue

from harness.errors import HarnessError
from harness.presenter import ReferenceRow
from harness.records import Metric

SUFFIX = "_proactivity_bench_metrics.json"
PREFIX = "eval/"  # the released files' metric names are ours behind this prefix
DIALOGUES = "eval/proactivity_total_dialogues"
# The metrics files do not name their judge. The release states it twice: dataset/metadata.json
# ("The Planner and offline judge are both GPT-5.4 in the main configuration") and
# dataset/human_eval/README.md (the study "validates the GPT-5.4 offline judge").
RELEASE_JUDGE = "GPT-5.4"
HINT = (f"the release's dataset/eval/ folder, holding one {{model}}{SUFFIX} per model "
        "(ProactBench's release, e.g. shared/data/proactbench/release/dataset/eval)")


def model_name(path: Path) -> str:
    """`deepseek__deepseek-v4-flash_proactivity_bench_metrics.json` -> `deepseek/deepseek-v4-flash`:
    the release writes a provider's `/` as `__` in its file names."""
    return path.name[: -len(SUFFIX)].replace("__", "/")


def _metrics(path: Path, data: dict[str, JsonValue], names: list[str]) -> dict[str, Metric]:
    released = data.get("metrics")
    if not isinstance(released, dict):
        raise HarnessError(f"metrics file {path} has no `metrics` object: pass --published {HINT}")
    dialogues = released.get(DIALOGUES)
    n = int(dialogues) if isinstance(dialogues, (int, float)) and not isinstance(dialogues, bool) else 0
    out: dict[str, Metric] = {}
    for name in names:
        value = released.get(PREFIX + name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # Counts only in the file, not per dialogue: no bootstrap over dialogues, so no CI.
            out[name] = Metric(value=float(value), n=n)
    if not out:
        raise HarnessError(f"metrics file {path} holds none of the suite's metrics "
                           f"({PREFIX}{names[0]}, ...): is it a ProactBench metrics file?")
    return out


def published_rows(folder: Path) -> list[ReferenceRow]:
    """One row per released metrics file in `folder`, in file-name order."""
    from environments.proact.commands import _read_metrics_file
    from environments.proact.metrics import proact_metrics

    if not folder.is_dir():
        raise HarnessError(f"--published {folder}: no such folder; pass {HINT}")
    files = sorted(folder.glob("*" + SUFFIX))
    if not files:
        raise HarnessError(f"--published {folder}: no *{SUFFIX} file in it; pass {HINT}")
    names = list(proact_metrics([]))  # the suite's metric names, from the code that computes them
    rows = []
    for path in files:
        rows.append(ReferenceRow(model=model_name(path), judge=RELEASE_JUDGE, source=str(path),
                                 metrics=_metrics(path, _read_metrics_file(path), names)))
    return rows
