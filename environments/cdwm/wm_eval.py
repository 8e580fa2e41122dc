"""`harness cdwm evaluate`: a delta world model on a collected dataset's splits -- delta F1,
reversibility, validity and calibration of its predictions (asked through the harness's model
providers, decoded under `wm_format.prediction_schema`, so exactly as a suite would ask it), and
the precision / recall of action masks (a learned one, the world's hand-written table, none)
against the dimensions each class touches in the split.

The model is any spec: `local/smollm2-135m` (the base model, before training),
`local/smollm2-135m@OUT/adapter#all-token` (after: `harness cdwm train` trains all-token LoRA), or
`vllm/<model>@ADAPTER#all-token` on a GPU. With `--mask OUT/adapter` the learned mask removes
masked dimensions from each prediction's grammar.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import numpy as np

from environments.cdwm import wm_format
from environments.cdwm.causal_mask import LearnedMask, mask_scores
from environments.cdwm.collect import TransitionRow
from environments.cdwm.deltas import Delta, DeltaPrediction, delta_f1
from harness.environment import DIMENSIONS, touched
from environments.cdwm.metrics import CORRECT_F1, _ece_bins, ece
from environments.cdwm.wm_train import TRAIN_FILE, dataset_dir, load_splits, split_deltas
from harness.errors import HarnessError

# The hand-written tables, named by string: the world folders import `cdwm`, never the reverse.
HAND_TABLES = {
    "household": "environments.household.mask:HOUSEHOLD_MASK",
    "minigrid": "environments.procgen.suite:GRID_MASK",
    "web": "environments.web.actions:WEB_MASK",
}


# One action class of a split (`class_table`); functional form: `class` is a keyword.
ClassRow = TypedDict("ClassRow", {
    "class": str,  # world/class
    "rows": int,
    "touched": dict[str, int],  # dimension -> rows that touched it
    "learned": str,  # what the learned gates allow, short ("" without a learned mask)
    "gates": dict[str, float] | None,  # the learned gate values (None: no mask, or a class never trained)
    "hand": str,  # what the world's hand-written table allows, short
})


class ReplyExample(TypedDict):
    """A row's action and the start of the model's reply, shown as an example."""

    action: str
    reply: str


class SplitReport(TypedDict):
    """One split of `evaluate`'s report."""

    mask: dict[str, dict[str, float]]  # none / hand-written / learned -> `mask_scores`
    classes: list[ClassRow]
    unseen_classes: NotRequired[list[str]]  # with a learned mask: classes it never trained on
    predictions: NotRequired[dict[str, float]]  # with a model: `prediction_scores`
    examples: NotRequired[list[ReplyExample]]


class EvalReport(TypedDict):
    """`harness cdwm evaluate`'s report (printed by `format_report`, written as is by --json)."""

    model: str | None
    mask: str | None
    splits: dict[str, SplitReport]


def hand_table(world: str) -> Any | None:
    ref = HAND_TABLES.get(world)
    if ref is None:
        return None
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def sample_rows(split: Any, n: int, seed: int) -> list[int]:
    order = np.random.default_rng([seed, 7]).permutation(len(split))
    return [int(i) for i in order[:n]] if n > 0 else [int(i) for i in order]


def check_adapter_base(spec: str) -> None:
    """An adapter trained on another base model than the one the spec serves: one error naming
    its file (the local engine would otherwise load mismatched weights or fail obscurely)."""
    from harness.providers.embedded import parse_adapter_name

    provider, _, name = spec.partition("/")
    if provider != "local" or "@" not in name:
        return
    _, directory, _ = parse_adapter_name(name)
    info = directory / TRAIN_FILE if directory else None
    if info is None or not info.is_file():
        return
    from environments.cdwm.wm_train import base_fingerprint
    from harness.providers.embedded import load_model

    trained = json.loads(info.read_text())
    model, _ = load_model()
    if trained.get("base") != base_fingerprint(model):
        raise HarnessError(
            f"{info}: this adapter was trained on {trained.get('base_name')} (fingerprint "
            f"{trained.get('base')}), not on the embedded model that {spec} serves; evaluate it on "
            f"its own base (e.g. vllm/<that model>@{directory}#all-token)"
        )


async def predict_rows(
    spec: str,
    rows: list[TransitionRow],
    allowed: list[frozenset[str] | None],
    obs_chars: int,
    max_tokens: int,
    concurrency: int,
) -> list[tuple[Delta | None, str]]:
    from harness.providers import load_model
    from harness.providers.base import GenerateConfig
    from harness.spec import ModelSpec

    model = load_model(ModelSpec.parse(spec))
    gate = asyncio.Semaphore(concurrency)

    async def one(row: TransitionRow, ok: frozenset[str] | None) -> tuple[Delta | None, str]:
        config = GenerateConfig(temperature=0.0, max_tokens=max_tokens, json_schema=wm_format.prediction_schema(ok))
        async with gate:
            out = await model.generate(wm_format.messages(row, obs_chars), config)
        try:
            return DeltaPrediction.model_validate_json(out.text).to_delta(), out.text
        except ValueError:
            return None, out.text

    try:
        return await asyncio.gather(*(one(r, a) for r, a in zip(rows, allowed)))
    finally:
        await model.aclose()


def prediction_scores(preds: list[Delta | None], truth: list[Delta]) -> dict[str, float]:
    f1s, exact, rev, irr_hit, irr_n, valid = [], [], [], 0, 0, 0
    conf_rows: list[tuple[float, float]] = []  # (confidence, correct)
    for p, t in zip(preds, truth):
        if p is None:
            f1s.append(0.0)
            exact.append(0.0)
            rev.append(0.0)
            conf_rows.append((0.0, 0.0))
        else:
            valid += 1
            f1 = delta_f1(p, t)["f1"]
            f1s.append(f1)
            ok = p.facts() == t.facts() and p.reversible == t.reversible
            exact.append(float(ok))
            rev.append(float(p.reversible == t.reversible))
            conf = float(p.confidence or 0.0)
            conf_rows.append((conf, float(ok or f1 >= CORRECT_F1)))
        if not t.reversible:
            irr_n += 1
            irr_hit += int(p is not None and not p.reversible)
    n = max(1, len(truth))
    return {
        "rows": float(len(truth)),
        "valid": valid / n,
        "delta_f1": float(np.mean(f1s)) if f1s else 0.0,
        "exact": float(np.mean(exact)) if exact else 0.0,
        "reversible_acc": float(np.mean(rev)) if rev else 0.0,
        "irreversible_recall": irr_hit / irr_n if irr_n else float("nan"),
        "irreversible_rows": float(irr_n),
        "ece": ece(_ece_bins(conf_rows)) or 0.0,
    }


def evaluate(
    data: Path,
    spec: str | None,
    mask_dir: Path | None,
    splits: list[str] | None = None,
    rows: int = 40,
    seed: int = 0,
    obs_chars: int = 700,
    max_tokens: int = 200,
    concurrency: int = 16,
) -> EvalReport:
    """Per split: prediction scores (when `spec` is given) and mask scores for the learned mask (with
    `mask_dir`), each world's hand-written table and no mask."""
    folder = dataset_dir(data)
    dd = load_splits(data)
    names = splits or list(dd)
    unknown = [s for s in names if s not in dd]
    if unknown:
        raise HarnessError(f"--splits: {', '.join(unknown)} not in {folder} (it has {', '.join(dd)})")
    learned = LearnedMask.load(mask_dir) if mask_dir is not None else None
    if learned is not None:
        seen = {
            wm_format.class_key(w, c) for name in names for w, c in zip(dd[name]["world"], dd[name]["action_class"])
        }
        if not seen & set(learned.gates):
            raise HarnessError(
                f"{mask_dir}/cdwm_mask.json: trained for action classes {', '.join(sorted(learned.gates)[:6])} "
                f"..., none of which is in {folder} ({', '.join(sorted(seen)[:6])} ...): an adapter of "
                f"another world; pass the adapter trained on this world's transitions"
            )
    if spec:
        check_adapter_base(spec)
    report = EvalReport(model=spec, mask=str(mask_dir) if mask_dir else None, splits={})
    for name in names:
        split = dd[name]
        deltas = split_deltas(split, folder, name)
        keys = [wm_format.class_key(w, c) for w, c in zip(split["world"], split["action_class"])]
        every = list(zip(keys, deltas))
        masks: dict[str, dict[str, frozenset[str] | None]] = {"none": {}}
        hand: dict[str, frozenset[str] | None] = {}
        for key in set(keys):
            world, _, cls = key.partition("/")
            table = hand_table(world)
            hand[key] = table.allowed(cls) if table is not None else None
        masks["hand-written"] = hand
        if learned is not None:
            masks["learned"] = {k: learned.allowed(k) for k in set(keys)}
        entry = SplitReport(
            mask={m: mask_scores(t, every) for m, t in masks.items()},
            classes=class_table(keys, deltas, learned),
        )
        if learned is not None:
            entry["unseen_classes"] = sorted({k for k in keys if learned.allowed(k) is None})
        if spec:
            picked = sample_rows(split, rows, seed)
            chosen: list[TransitionRow] = [split[i] for i in picked]
            ok = [learned.allowed(keys[i]) if learned is not None else None for i in picked]
            out = asyncio.run(predict_rows(spec, chosen, ok, obs_chars, max_tokens, concurrency))
            entry["predictions"] = prediction_scores([p for p, _ in out], [deltas[i] for i in picked])
            entry["examples"] = [
                ReplyExample(action=chosen[j]["action"], reply=out[j][1][:300]) for j in range(min(3, len(out)))
            ]
        report["splits"][name] = entry
    return report


def short(dims: frozenset[str] | set[str] | None) -> str:
    if dims is None:
        return "(all: unmasked)"
    names = {
        "created": "cre",
        "deleted": "del",
        "attributes": "attr",
        "relations_added": "rel+",
        "relations_removed": "rel-",
        "irreversible": "irr",
    }
    return " ".join(names[d] for d in DIMENSIONS if d in dims) or "-"


def class_table(keys: list[str], deltas: list[Delta], learned: LearnedMask | None) -> list[ClassRow]:
    """Per action class of a split: rows, the dimensions its rows touch (with counts), what the
    learned gates allow (and their values) and what the world's hand-written table allows."""
    out: list[ClassRow] = []
    for key in sorted(set(keys)):
        mine = [d for k, d in zip(keys, deltas) if k == key]
        counts = {dim: sum(dim in touched(d) for d in mine) for dim in DIMENSIONS}
        world, _, cls = key.partition("/")
        table = hand_table(world)
        out.append(
            {
                "class": key,
                "rows": len(mine),
                "touched": {d: n for d, n in counts.items() if n},
                "learned": short(learned.allowed(key)) if learned else "",
                "gates": learned.gates.get(key) if learned else None,
                "hand": short(table.allowed(cls)) if table is not None else "(no table)",
            }
        )
    return out


def format_report(report: EvalReport) -> str:
    lines = [
        f"model: {report['model'] or '(none: masks only)'}; mask: {report['mask'] or '(none)'}",
        "",
        "| split | rows | valid | delta F1 | exact | reversible acc | irreversible recall | ECE |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, e in report["splits"].items():
        p = e.get("predictions")
        if p:
            lines.append(
                f"| {name} | {p['rows']:.0f} | {p['valid']:.2f} | {p['delta_f1']:.3f} | {p['exact']:.3f} | "
                f"{p['reversible_acc']:.3f} | {p['irreversible_recall']:.2f} ({p['irreversible_rows']:.0f}) | {p['ece']:.3f} |"
            )
    lines += ["", "| split | mask | precision | recall | fact recall |", "|---|---|---|---|---|"]
    for name, e in report["splits"].items():
        for m, s in e["mask"].items():
            lines.append(f"| {name} | {m} | {s['precision']:.3f} | {s['recall']:.3f} | {s['fact_recall']:.3f} |")
        if e.get("unseen_classes"):
            lines.append(f"| {name} | (classes never trained, left unmasked: {', '.join(e['unseen_classes'])}) | | | |")
    for name, e in report["splits"].items():
        lines += [
            "",
            f"Classes in {name}: rows, dimensions touched (rows), learned mask (gates), hand-written table",
            "",
            "| class | rows | touched | learned | hand-written |",
            "|---|---|---|---|---|",
        ]
        for c in e["classes"]:
            touched_text = " ".join(f"{short({d})}:{n}" for d, n in c["touched"].items()) or "-"
            gates = " ".join(f"{v:.2f}" for v in c["gates"].values()) if c["gates"] else ""
            lines.append(
                f"| {c['class']} | {c['rows']} | {touched_text} | {c['learned']} {('(' + gates + ')') if gates else ''} "
                f"| {c['hand']} |"
            )
    return "\n".join(lines)
