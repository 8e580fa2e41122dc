"""`harness cdwm train`: SFT of a delta world model -- the embedded model (or `--base-model`) with a
LoRA adapter (peft) that writes the `DeltaPrediction` JSON of (observation, action), trained
jointly with the learned causal sparsity mask (`causal_mask.py`) by one optimiser.

Data: a `harness cdwm collect` folder (its `dataset/`, or a `datasets.save_to_disk` folder with the
same columns). The loss is the mean token cross-entropy of the reply (`wm_format.target_parts`;
not the confidence value) plus `mask_weight` x the mask's loss on the hidden state at the prompt's
last token. `--target value / generative` trains a baseline on the same rows and budget instead
(its prompt and reply from wm_targets.py; no mask).

Checkpoints (`OUT/checkpoints/step-NNNNNN/`: the adapter in peft's format and `state.pt` with the
optimiser, the gates, the step and the configuration) are written whole and renamed into place;
rerunning the same command resumes from the newest one at its step, and the batches it then sees
are the ones an uninterrupted run would have seen (the data order is a function of seed and
step). A checkpoint made on another base model, or with other training settings, is refused,
naming its file. The result: `OUT/adapter/` (peft format, served as
`local/smollm2-135m@OUT/adapter#all-token`; the mask in `cdwm_mask.json`; `cdwm_train.json`),
`OUT/train_log.jsonl` (loss per step, validation loss at each evaluation).

Only the top `top_layers` decoder layers carry LoRA: backpropagation then stops there, which is
what makes a 135M model trainable on two CPU cores (a departure from full-depth LoRA, stated in
docs/cdwm.md).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from environments.cdwm import wm_format, wm_targets
from environments.cdwm.causal_mask import CausalGates, LearnedMask, touched_vector
from environments.cdwm.collect import TransitionRow
from environments.cdwm.deltas import Delta
from environments.cdwm.wm_records import CheckpointState, TrainMeta
from harness.environment import DIMENSIONS
from harness.errors import HarnessError, invalid

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
TRAIN_FILE = "cdwm_train.json"
# Settings that may change between a run and its resumption (they do not change what is learned).
RESUMABLE = ("steps", "checkpoint_every", "eval_every", "max_minutes", "device", "keep_checkpoints")
NEEDED_COLUMNS = ("world", "intent", "observation", "action", "action_class", "delta")
TARGETS = ("delta", *wm_targets.BASELINES)  # the baselines at equal budget: wm_targets.py


@dataclass(frozen=True)
class TrainConfig:
    data: str
    base_model: str | None = None  # None: the embedded model (its safetensors cache)
    device: str = "cpu"
    dtype: str = "float32"
    steps: int = 200
    batch_size: int = 8
    lr: float = 3e-4
    head_lr: float = 1e-3
    gate_lr: float = 0.05
    rank: int = 16
    alpha: int = 32
    top_layers: int = 8  # LoRA on the top N decoder layers (0: all)
    targets: tuple[str, ...] = PROJECTIONS
    sparsity: float = 0.02
    mask_weight: float = 1.0
    obs_chars: int = 700
    max_tokens: int = 448  # prompt + reply; longer rows are skipped (counted)
    val_rows: int = 48
    eval_every: int = 50
    checkpoint_every: int = 25
    keep_checkpoints: int = 2
    max_minutes: float = 0.0  # > 0: stop (with a checkpoint) after this much training time
    seed: int = 0
    # delta: the delta world model; value / generative: a baseline at the same budget (wm_targets.py)
    target: str = "delta"

    def learning_settings(self) -> dict[str, Any]:
        """The settings as `state.pt` and `cdwm_train.json` record them (what a resumed run must share).
        `target` is left out at its default, so checkpoints written before it existed still resume."""
        return {k: v for k, v in asdict(self).items()
                if k not in RESUMABLE and not (k == "target" and v == "delta")}


@dataclass(frozen=True)
class Batch:
    """A collated batch of examples, as tensors on the device."""

    ids: Any  # [B, T] token ids, padded
    labels: Any  # [B, T], -100 where no loss
    attn: Any  # [B, T] attention mask
    last: Any  # [B] the prompt's last position
    cls: Any  # [B] action class index
    touched: Any  # [B, dimensions] what the true delta touched


@dataclass
class Example:
    ids: list[int]
    labels: list[int]  # -100 where no loss
    prompt_len: int
    cls: int
    touched: list[float]


@dataclass
class TrainResult:
    step: int
    resumed_from: int
    val_loss_first: float | None
    val_loss_last: float | None
    seconds: float
    examples: int
    skipped: int
    adapter: Path
    log: list[dict[str, float]] = field(default_factory=list)  # train_log.jsonl's entries


# -- data -------------------------------------------------------------------------------------------


def dataset_dir(data: Path) -> Path:
    """`data` itself when it is a saved DatasetDict, else its `dataset/` (a collect folder)."""
    for candidate in (data, data / "dataset"):
        if (candidate / "dataset_dict.json").is_file():
            return candidate
    raise HarnessError(
        f"--data {data}: no dataset there (expected dataset_dict.json in it or in {data / 'dataset'}); "
        f"pass the folder `harness cdwm collect --out` wrote"
    )


def load_splits(data: Path, target: str = "delta") -> Any:
    import datasets

    datasets.disable_progress_bars()
    folder = dataset_dir(data)
    dd = datasets.load_from_disk(str(folder))
    if "train" not in dd:
        raise HarnessError(f"{folder}: no train split (splits: {', '.join(dd)}); collect with `harness cdwm collect`")
    for name, split in dd.items():
        missing = [c for c in NEEDED_COLUMNS if c not in split.column_names]
        if missing:
            raise HarnessError(
                f"{folder / name}: columns {', '.join(missing)} missing; not a `harness cdwm collect` dataset"
            )
        wm_targets.check_split(target, folder, name, split.column_names)
    return dd


def split_deltas(split: Any, folder: Path, name: str) -> list[Delta]:
    """Every row's delta, validated against the schema; a bad one is an error naming the file."""
    files = [f["filename"] for f in (split.cache_files or [])] or [str(folder / name)]
    out = []
    for i, text in enumerate(split["delta"]):
        try:
            out.append(Delta.model_validate_json(text))
        except ValidationError as exc:
            raise HarnessError(
                invalid(exc, f"{files[0]}: row {i} of split {name!r}: its delta does not match the Delta schema",
                        "re-collect it with `harness cdwm collect`")
            ) from None
    return out


def encode(
    tokenizer: Any, row: TransitionRow, delta: Delta, cls: int, cfg: TrainConfig, end_id: int
) -> Example | None:
    from harness.providers.base import GenerateConfig
    from harness.providers.embedded import chat_prompt_ids

    if cfg.target in wm_targets.BASELINES:  # the same user message, the baseline's reply, no mask target
        baseline = wm_targets.BASELINES[cfg.target]
        prompt = chat_prompt_ids(tokenizer, baseline.messages(row, cfg.obs_chars), GenerateConfig())
        label = tokenizer(baseline.reply(row, cfg.obs_chars), add_special_tokens=False)["input_ids"] + [end_id]
        if len(prompt) + len(label) > cfg.max_tokens:
            return None
        return Example(prompt + label, [-100] * len(prompt) + label, len(prompt), cls, [0.0] * len(DIMENSIONS))
    if not wm_format.fits(delta):
        return None
    prompt = chat_prompt_ids(tokenizer, wm_format.messages(row, cfg.obs_chars), GenerateConfig())
    body, _ = wm_format.target_parts(delta)
    body_ids = tokenizer(body, add_special_tokens=False)["input_ids"]
    conf_ids = tokenizer("1", add_special_tokens=False)["input_ids"]
    close_ids = tokenizer("}", add_special_tokens=False)["input_ids"]
    reply = body_ids + conf_ids + close_ids + [end_id]
    if len(prompt) + len(reply) > cfg.max_tokens:
        return None
    labels = [-100] * len(prompt) + body_ids + [-100] * len(conf_ids) + close_ids + [end_id]
    return Example(prompt + reply, labels, len(prompt), cls, touched_vector(delta))


def end_of_turn_id(tokenizer: Any) -> int:
    from harness.providers.embedded import END_OF_TURN

    vocab = tokenizer.get_vocab()
    if END_OF_TURN in vocab:
        return int(vocab[END_OF_TURN])
    if tokenizer.eos_token_id is None:
        raise HarnessError("the base model's tokenizer has neither <|im_end|> nor an eos token: it cannot end a reply")
    return int(tokenizer.eos_token_id)


# -- the model --------------------------------------------------------------------------------------


def load_base(cfg: TrainConfig) -> tuple[Any, Any]:
    """(model, tokenizer) for training: a fresh copy (never the process's shared serving model)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.providers.embedded import ensure_converted

    path = str(ensure_converted()) if cfg.base_model is None else cfg.base_model
    if cfg.dtype not in ("float32", "bfloat16", "float16"):
        raise HarnessError(f"--dtype {cfg.dtype!r}: use float32, bfloat16 or float16")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, cfg.dtype))
    except (OSError, ValueError) as exc:
        raise HarnessError(
            f"--base-model {path}: cannot load it ({type(exc).__name__}: {str(exc)[:200]}); give a "
            f"Hugging Face model id or folder (a causal LM with a chat template)"
        ) from exc
    try:
        model.to(cfg.device)
    except (RuntimeError, AssertionError) as exc:
        raise HarnessError(f"--device {cfg.device}: {exc}") from exc
    return model, tokenizer


def base_fingerprint(model: Any) -> str:
    """Identifies a base model: its configuration and a sample of its embedding weights (rounded
    to bfloat16, so the same model loaded in float32 or bfloat16 gives the same print)."""
    import torch

    conf = {
        k: v
        for k, v in model.config.to_dict().items()
        if k not in ("_name_or_path", "transformers_version", "torch_dtype", "dtype", "use_cache")
    }
    h = hashlib.sha256(json.dumps(conf, sort_keys=True, default=str).encode())
    sample = model.get_input_embeddings().weight[:64].detach().to("cpu", torch.bfloat16).view(torch.int16)
    h.update(sample.numpy().tobytes())
    return h.hexdigest()[:16]


def wrap_lora(model: Any, cfg: TrainConfig) -> Any:
    from peft import LoraConfig, get_peft_model

    n = int(model.config.num_hidden_layers)
    layers = list(range(n)) if cfg.top_layers <= 0 else list(range(max(0, n - cfg.top_layers), n))
    lora = LoraConfig(
        r=cfg.rank,
        lora_alpha=cfg.alpha,
        lora_dropout=0.0,
        target_modules=list(cfg.targets),
        layers_to_transform=layers,
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def collate(batch: list[Example], pad_id: int, device: str) -> Batch:
    import torch

    width = max(len(e.ids) for e in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    attn = torch.zeros((len(batch), width), dtype=torch.long)
    for i, e in enumerate(batch):
        ids[i, : len(e.ids)] = torch.tensor(e.ids)
        labels[i, : len(e.labels)] = torch.tensor(e.labels)
        attn[i, : len(e.ids)] = 1
    return Batch(
        ids=ids.to(device),
        labels=labels.to(device),
        attn=attn.to(device),
        last=torch.tensor([e.prompt_len - 1 for e in batch], device=device),
        cls=torch.tensor([e.cls for e in batch], device=device),
        touched=torch.tensor([e.touched for e in batch], device=device),
    )


def forward_losses(
    peft_model: Any, gates: CausalGates, b: Batch, cfg: TrainConfig
) -> tuple[Any, Any, dict[str, float]]:
    """(LM loss, mask loss, mask parts). The LM head runs only where a label is (a reply is a few
    dozen of a batch's hundreds of tokens)."""
    import torch

    causal_lm = peft_model.get_base_model()
    hidden = causal_lm.model(input_ids=b.ids, attention_mask=b.attn).last_hidden_state
    targets = b.labels[:, 1:]
    where = targets != -100
    logits = causal_lm.lm_head(hidden[:, :-1][where])
    lm = torch.nn.functional.cross_entropy(logits.float(), targets[where])
    at_prompt_end = hidden[torch.arange(hidden.shape[0], device=hidden.device), b.last]
    mask_loss, parts = gates.loss(at_prompt_end.float(), b.cls, b.touched, cfg.sparsity)
    return lm, mask_loss, parts


def validation_loss(
    peft_model: Any, gates: CausalGates, examples: list[Example], cfg: TrainConfig, pad_id: int
) -> float:
    import torch

    if not examples:
        return float("nan")
    total, tokens = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(examples), cfg.batch_size):
            batch = examples[i : i + cfg.batch_size]
            b = collate(batch, pad_id, cfg.device)
            lm, _, _ = forward_losses(peft_model, gates, b, cfg)
            n = int((b.labels[:, 1:] != -100).sum())
            total, tokens = total + float(lm) * n, tokens + n
    return total / tokens


# -- checkpoints ------------------------------------------------------------------------------------


def checkpoints(out: Path) -> list[Path]:
    folder = out / "checkpoints"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("step-*") if (p / "state.pt").is_file() and not p.name.endswith(".tmp"))


def save_checkpoint(
    out: Path, step: int, peft_model: Any, gates: CausalGates, optimizer: Any, meta: TrainMeta, keep: int
) -> Path:
    import torch

    final = out / "checkpoints" / f"step-{step:06d}"
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    peft_model.save_pretrained(str(tmp / "adapter"))
    torch.save(
        {"step": step, "optimizer": optimizer.state_dict(), "gates": gates.state_dict(), **meta}, tmp / "state.pt"
    )
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    for old in checkpoints(out)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def read_checkpoint(path: Path, meta: TrainMeta) -> CheckpointState:
    """The state in a checkpoint folder, refused (naming its file) when it was made on another base
    model, in another prompt format or with other training settings."""
    import torch

    state_file = path / "state.pt"
    try:
        state = torch.load(state_file, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds for a bad file
        raise HarnessError(
            f"{state_file}: not a readable checkpoint ({type(exc).__name__}); delete that folder "
            f"to resume from the one before"
        ) from exc
    if state.get("base") != meta["base"]:
        raise HarnessError(
            f"{state_file}: made on another base model ({state.get('base_name')}, fingerprint "
            f"{state.get('base')}) than this run's ({meta['base_name']}, {meta['base']}): resume with "
            f"--base-model {state.get('base_name')} or choose another --out"
        )
    if state.get("format") != meta["format"]:
        raise HarnessError(
            f"{state_file}: prompt format {state.get('format')!r}, not {meta['format']!r}; choose another --out"
        )
    if state.get("settings") != meta["settings"]:
        theirs, ours = state.get("settings") or {}, meta["settings"]
        diff = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
        raise HarnessError(
            f"{state_file}: made with other training settings ({', '.join(diff)}); resume with the same "
            f"options (only {', '.join(RESUMABLE)} may change) or choose another --out"
        )
    if state.get("classes") != meta["classes"]:
        raise HarnessError(f"{state_file}: trained for other action classes than --data's; choose another --out")
    checked: CheckpointState = state
    return checked


def load_adapter_weights(peft_model: Any, adapter_dir: Path) -> None:
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    set_peft_model_state_dict(peft_model, load_file(str(adapter_dir / "adapter_model.safetensors")))


# -- the loop ---------------------------------------------------------------------------------------


def batch_indices(step: int, n: int, batch_size: int, seed: int) -> list[int]:
    """Which training examples step `step` sees: epoch e's order is a seeded permutation, so the
    batches depend only on (seed, step) -- a resumed run sees what an uninterrupted one would."""
    out = []
    for pos in range(step * batch_size, (step + 1) * batch_size):
        epoch, at = divmod(pos, n)
        out.append(int(np.random.default_rng([seed, epoch]).permutation(n)[at]))
    return out


def train(
    cfg: TrainConfig,
    out: Path,
    *,
    on_step: Callable[[dict[str, float]], None] | None = None,
    stop_after: int | None = None,
) -> TrainResult:
    """Train (or resume) into `out`. `stop_after` ends the session after that many steps of it
    without a final export, as a kill would (tests)."""
    import torch

    if cfg.target not in TARGETS:
        raise HarnessError(f"--target {cfg.target!r}: choose one of {', '.join(TARGETS)}")
    start = time.perf_counter()
    torch.manual_seed(cfg.seed)
    data = Path(cfg.data)
    folder = dataset_dir(data)
    dd = load_splits(data, cfg.target)
    train_split = dd["train"]
    train_deltas = split_deltas(train_split, folder, "train")
    classes = sorted({wm_format.class_key(w, c) for w, c in zip(train_split["world"], train_split["action_class"])})
    model, tokenizer = load_base(cfg)
    base_name = cfg.base_model or "local/smollm2-135m"
    meta = TrainMeta(
        base=base_fingerprint(model),
        base_name=base_name,
        format=wm_targets.BASELINES[cfg.target].format if cfg.target != "delta" else wm_format.PROMPT_FORMAT,
        settings=cfg.learning_settings(),
        classes=classes,
    )
    end_id = end_of_turn_id(tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else end_id
    index = {c: i for i, c in enumerate(classes)}
    examples, skipped = [], 0
    for row, delta in zip(train_split, train_deltas):
        ex = encode(tokenizer, row, delta, index[wm_format.class_key(row["world"], row["action_class"])], cfg, end_id)
        if ex is None:
            skipped += 1
        else:
            examples.append(ex)
    if not examples:
        raise HarnessError(f"{folder}: no training row fits --max-tokens {cfg.max_tokens}; raise it")
    val_examples: list[Example] = []
    if "validation" in dd:
        val = dd["validation"]
        deltas = split_deltas(val, folder, "validation")
        order = np.random.default_rng([cfg.seed, 1]).permutation(len(val))[: cfg.val_rows * 2]
        for i in order:
            row = val[int(i)]
            ex = encode(
                tokenizer,
                row,
                deltas[int(i)],
                index.get(wm_format.class_key(row["world"], row["action_class"]), 0),
                cfg,
                end_id,
            )
            if ex is not None and len(val_examples) < cfg.val_rows:
                val_examples.append(ex)

    peft_model = wrap_lora(model, cfg)
    gates = CausalGates(classes, int(model.config.hidden_size)).to(cfg.device)
    lora_params = [p for p in peft_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        [
            {"params": lora_params, "lr": cfg.lr, "weight_decay": 0.0},
            {"params": list(gates.head.parameters()), "lr": cfg.head_lr, "weight_decay": 0.0},
            {"params": [gates.logits], "lr": cfg.gate_lr, "weight_decay": 0.0},
        ]
    )
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "train_log.jsonl"
    step = resumed = 0
    found = checkpoints(out)
    if found:
        state = read_checkpoint(found[-1], meta)
        load_adapter_weights(peft_model, found[-1] / "adapter")
        gates.load_state_dict(state["gates"])
        optimizer.load_state_dict(state["optimizer"])
        step = resumed = int(state["step"])
    log: list[dict[str, float]] = (
        [json.loads(line) for line in log_path.read_text().splitlines()] if log_path.is_file() else []
    )
    log = [e for e in log if e["step"] <= step]  # entries past the checkpoint were lost with the kill

    def write_log() -> None:
        log_path.write_text("".join(json.dumps(e) + "\n" for e in log))

    if step == 0:
        log.append(
            {
                "step": 0,
                "val_loss": round(validation_loss(peft_model, gates, val_examples, cfg, pad_id), 5),
                "seconds": 0.0,
            }
        )
        write_log()
    elapsed0 = log[-1].get("seconds", 0.0) if log else 0.0
    session_start, session_steps = time.perf_counter(), 0
    peft_model.train()
    mask_weight = cfg.mask_weight if cfg.target == "delta" else 0.0  # a baseline learns no mask
    while step < cfg.steps:
        if cfg.max_minutes > 0 and elapsed0 + time.perf_counter() - session_start > cfg.max_minutes * 60:
            break
        if stop_after is not None and session_steps >= stop_after:
            return TrainResult(step, resumed, None, None, time.perf_counter() - start, len(examples), skipped, out)
        batch = [examples[i] for i in batch_indices(step, len(examples), cfg.batch_size, cfg.seed)]
        b = collate(batch, pad_id, cfg.device)
        lm, mask_loss, parts = forward_losses(peft_model, gates, b, cfg)
        loss = lm + mask_weight * mask_loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(lora_params, 1.0)
        optimizer.step()
        step, session_steps = step + 1, session_steps + 1
        entry: dict[str, float] = {
            "step": step,
            "loss": round(float(loss.detach()), 5),
            "lm_loss": round(float(lm.detach()), 5),
            **{k: round(v, 5) for k, v in parts.items()},
            "seconds": round(elapsed0 + time.perf_counter() - session_start, 2),
        }
        if step % cfg.eval_every == 0 or step == cfg.steps:
            entry["val_loss"] = round(validation_loss(peft_model, gates, val_examples, cfg, pad_id), 5)
        log.append(entry)
        if on_step:
            on_step(entry)
        if step % cfg.checkpoint_every == 0 or step == cfg.steps:
            write_log()
            save_checkpoint(out, step, peft_model, gates, optimizer, meta, cfg.keep_checkpoints)
    if "val_loss" not in log[-1]:
        log[-1]["val_loss"] = round(validation_loss(peft_model, gates, val_examples, cfg, pad_id), 5)
    write_log()
    if not checkpoints(out) or checkpoints(out)[-1].name != f"step-{step:06d}":
        save_checkpoint(out, step, peft_model, gates, optimizer, meta, cfg.keep_checkpoints)
    adapter = export(out, peft_model, gates, meta, step)
    vals = [e["val_loss"] for e in log if "val_loss" in e and not math.isnan(e["val_loss"])]
    return TrainResult(
        step,
        resumed,
        vals[0] if vals else None,
        vals[-1] if vals else None,
        time.perf_counter() - start,
        len(examples),
        skipped,
        adapter,
        log,
    )


def export(out: Path, peft_model: Any, gates: CausalGates, meta: TrainMeta, step: int) -> Path:
    """`OUT/adapter`: the LoRA in peft's format, the learned mask, and what it was trained on."""
    final = out / "adapter"
    tmp = out / "adapter.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    peft_model.save_pretrained(str(tmp))
    LearnedMask(gates.table()).save(tmp, extra={"base": meta["base"], "base_name": meta["base_name"]})
    (tmp / TRAIN_FILE).write_text(
        json.dumps(
            {
                "base": meta["base"],
                "base_name": meta["base_name"],
                "format": meta["format"],
                "classes": meta["classes"],
                "settings": meta["settings"],
                "step": step,
            },
            indent=1,
            sort_keys=True,
        )
    )
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final


def with_overrides(cfg: TrainConfig, **kw: Any) -> TrainConfig:
    return replace(cfg, **{k: v for k, v in kw.items() if v is not None})
