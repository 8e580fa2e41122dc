"""Reading a baseline's adapter folder (`harness cdwm train --target value|generative`): its
`cdwm_train.json` must say the baseline's format and name transitions of the world it is asked
about. One home for the check both baselines make before the planner serves them.

May import: `harness`.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.errors import HarnessError

TRAIN_FILE = "cdwm_train.json"  # as wm_train.TRAIN_FILE (not imported: that module needs torch's helpers)


def baseline_obs_chars(directory: str | Path, world: str, fmt: str, target: str) -> int:
    """The observation length the adapter in `directory` was trained with, after checking that it is a
    `--target target` adapter (format `fmt`) trained on `world`'s transitions; one error naming the
    file and the fix otherwise."""
    path = Path(directory) / TRAIN_FILE
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{path}: not readable ({exc}); pass a `harness cdwm train --target {target}` "
                           f"adapter folder (OUT/adapter)") from None
    if meta.get("format") != fmt:
        raise HarnessError(f"{path}: format {meta.get('format')!r}, not a {target} model ({fmt}); train one "
                           f"with `harness cdwm train --target {target}`")
    if not any(str(c).startswith(f"{world}/") for c in meta.get("classes", [])):
        raise HarnessError(f"{path}: trained on no {world} transition (classes {meta.get('classes')}); train it "
                           f"on a collection with --worlds {world}")
    return int(meta.get("settings", {}).get("obs_chars", 700))
