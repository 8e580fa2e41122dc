"""What a trained world model's checkpoint and exported adapter record on disk (`state.pt`,
`cdwm_train.json`), shared by SFT (`wm_train`) and post-training (`wm_posttrain`). TypedDicts: the files
stay the plain JSON / torch dicts they always were.

May import: nothing of the project.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class TrainMeta(TypedDict):
    """What a checkpoint's `state.pt` (beside its step and weights) and the exported
    `cdwm_train.json` record: the base model, the prompt format, the settings, the action classes."""

    base: str  # base_fingerprint of the base model
    base_name: str | None
    format: str  # the prompt format (wm_format.PROMPT_FORMAT or value_model.VALUE_FORMAT)
    settings: dict[str, Any]  # learning_settings(), as recorded
    classes: list[str]


class CheckpointState(TrainMeta):
    """A checkpoint's `state.pt` as `torch.load` reads it back."""

    step: int
    optimizer: Any  # torch's optimiser state dict
    gates: NotRequired[Any]  # CausalGates' state dict (post-training's checkpoints have none)


class TrainRecord(TrainMeta):
    """The adapter's `cdwm_train.json` as `export` writes it (a post-trained adapter's adds a
    `posttrain` record)."""

    step: int
