"""Tiny fixtures for the delta world model's tests: a synthetic world whose causal structure is
known, as a `harness cdwm collect`-shaped dataset, and a tiny random Llama (the embedded model's
tokenizer, 2 layers of width 64) saved as a `--base-model` folder."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from pydantic import JsonValue

from environments.cdwm.collect import TransitionRow
from harness.environment import Delta

# The synthetic world: which dimensions each action class touches (and how often).
TRUE_STRUCTURE = {
    "make": {"created"},
    "paint": {"attributes"},
    "burn": {"attributes", "irreversible"},
    "move": {"relations_added", "relations_removed"},
    "look": set(),
}


def synthetic_delta(cls: str, thing: str, colour: str, place: str, rng: random.Random) -> Delta:
    d: dict[str, JsonValue] = {}
    if cls == "make":
        d["created"] = [f"{thing}:{rng.randrange(9)}"]
    elif cls == "paint":
        d["attributes"] = [{"entity": thing, "attribute": "colour", "before": "grey", "after": colour}]
    elif cls == "burn":
        d["attributes"] = [{"entity": thing, "attribute": "burnt", "before": False, "after": True}]
        d["reversible"], d["irreversible_cost"] = False, 5.0
    elif cls == "move":
        d["relations_added"] = [{"subject": thing, "relation": "in", "object": place}]
        d["relations_removed"] = [{"subject": thing, "relation": "in", "object": "hall"}]
    return Delta.model_validate(d)


def synthetic_rows(n: int, seed: int, split: str) -> list[TransitionRow]:
    rng = random.Random(f"{seed}:{split}")
    rows: list[TransitionRow] = []
    for i in range(n):
        cls = rng.choice(sorted(TRUE_STRUCTURE))
        thing, colour, place = (
            rng.choice(["cup", "box", "vase"]),
            rng.choice(["red", "blue"]),
            rng.choice(["attic", "yard"]),
        )
        action = {
            "make": f"make {thing}",
            "paint": f"paint {thing} {colour}",
            "burn": f"burn {thing}",
            "move": f"move {thing} to {place}",
            "look": "look",
        }[cls]
        delta = synthetic_delta(cls, thing, colour, place, rng)
        rows.append(
            {
                "world": "toy",
                "split": split,
                "task_type": "t",
                "task": "{}",
                "perturbation": "",
                "episode": f"{split}/{i}",
                "step": 0,
                "intent": "tidy the house",
                "observation": f"You are in the hall. A {thing} is here.",
                "admissible": [action],
                "action": action,
                "action_class": cls,
                "source": "plan",
                "valid": True,
                "delta": delta.model_dump_json(),
                "facts": [],
                "reversible": delta.reversible,
                "irreversible_cost": delta.irreversible_cost,
                "done": False,
                "won": False,
            }
        )
    return rows


def write_dataset(
    folder: Path,
    train: int = 48,
    validation: int = 16,
    seed: int = 0,
    rows: dict[str, list[TransitionRow]] | None = None,
) -> Path:
    import datasets

    from environments.cdwm.collect import COLUMNS, features

    datasets.disable_progress_bars()
    rows = rows or {
        "train": synthetic_rows(train, seed, "train"),
        "validation": synthetic_rows(validation, seed, "validation"),
    }
    dd = datasets.DatasetDict(
        {
            s: datasets.Dataset.from_list([{c: r[c] for c in COLUMNS} for r in rs], features=features())
            for s, rs in rows.items()
        }
    )
    dd.save_to_disk(str(folder / "dataset"))
    return folder


def tiny_base(folder: Path, seed: int = 0, width: int = 64) -> Path:
    """A 2-layer random Llama over the embedded model's tokenizer, saved as a model folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.providers.embedded import ensure_converted

    source = ensure_converted()
    torch.manual_seed(seed)
    config = LlamaConfig(
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=49152,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
    )
    LlamaForCausalLM(config).save_pretrained(str(folder))
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (source / name).is_file():
            shutil.copy(source / name, folder / name)
    return folder
