"""`harness cdwm posttrain`: GRPO-style post-training of a trained delta world model (the LoRA
adapter `harness cdwm train` wrote) on the per-transition parts of CDWM's verifiable composite
reward (issue 40 item 4).

One step: for each of `rows` training transitions, sample `group_size` replies from the current
adapter at `temperature` > 0 under the grammar the agent decodes with (the transition's
class-masked `wm_format.prediction_schema`, compiled by xgrammar exactly as the local engine
compiles it: one line, strict), score each against the row's ground-truth delta, normalise the
rewards within the group (advantage = (r - mean) / (std + eps)), and take one on-policy step on

    loss = mean over replies of [ -A * mean_t log pi(y_t) + kl * mean_t KL_t(pi || pi_ref) ]

where pi is the policy's distribution at the sampling temperature *restricted to what the grammar
allowed at that position* (the sampled reply's own token masks, recorded while sampling), so the
gradient falls on the model's choices, not on the JSON's forced tokens; KL_t is the k3 estimator
exp(r) - r - 1, r = log pi_ref - log pi, against the starting (SFT) adapter, loaded beside the
policy as a second peft adapter. On-policy with one update per batch, the importance ratio is 1
and no clipping is needed (as in kernels/preft/rl.py, whose design this follows; environments may
not import preft, so the few lines of group advantages are written here again).

The reward of one reply (`reply_parts`, `reply_reward`): reward.py's per-transition components,
computed by reward.py's own `reward_components` over metrics.py's `prediction_rows` --
`delta_accuracy` (fact F1), `calibration` (1 - (confidence - correct)^2, correct = F1 >= 0.5 or
exact), `action_following` (the reply is one valid `DeltaPrediction` that its masked schema
accepts, finished before `max_new_tokens`) -- weighted as reward.py weights them and renormalised
over the parts that apply. An invalid reply scores 0 on every part. `reversibility` (the
reversible flag right, and for an irreversible row the cost within its size) is logged always and
enters the reward only with `reversibility_weight` > 0 (default 0): reward.py has no such part, and
its delta F1 counts facts only. Closed-loop task success, reward.py's fourth part, is an episode's
outcome, not a transition's: it is not in this per-step signal (docs/cdwm.md says why and how it is
measured instead).

Checkpoints and resume are wm_train's: `OUT/checkpoints/step-NNNNNN/` (the policy adapter and
`state.pt`), written whole and renamed; rerunning the same command resumes at the newest one, and
the rows and the sampling generator of a step are functions of (seed, step), so a resumed run ends
with the weights of an uninterrupted one. Output: `OUT/adapter/` (the post-trained LoRA, the
starting adapter's `cdwm_mask.json` -- the gates are not post-trained -- and `cdwm_train.json` with
a `posttrain` record), `OUT/posttrain_log.jsonl` (per step: the reward and its parts, KL, the
policy-gradient loss; `eval` entries: greedy replies' reward parts per split before and after).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
from pydantic import JsonValue

from environments.cdwm import wm_format
from environments.cdwm.causal_mask import LearnedMask
from environments.cdwm.deltas import Delta
from environments.cdwm.wm_eval import sample_rows
from environments.cdwm.wm_replies import (
    PARTS,
    Grammar,
    group_advantages,
    parse_reply,
    reply_logprobs,
    reply_parts,
    reply_reward,
    sample_replies,
)
from environments.cdwm.wm_records import TrainMeta, TrainRecord
from environments.cdwm.wm_train import (
    RESUMABLE,
    TRAIN_FILE,
    TrainConfig,
    base_fingerprint,
    batch_indices,
    checkpoints,
    dataset_dir,
    end_of_turn_id,
    load_adapter_weights,
    load_base,
    load_splits,
    read_checkpoint,
    split_deltas,
)
from harness.errors import HarnessError

LOG_FILE = "posttrain_log.jsonl"
REF = "ref"  # the peft name of the frozen starting adapter (the policy is peft's "default")


@dataclass(frozen=True)
class PosttrainConfig:
    data: str
    adapter: str  # the starting adapter: `harness cdwm train --out OUT`'s OUT/adapter
    base_model: str | None = None  # None: the embedded model (must be the adapter's base)
    device: str = "cpu"
    dtype: str = "float32"
    steps: int = 50
    rows: int = 2  # training transitions per step
    group_size: int = 4  # replies sampled per transition
    lr: float = 1e-4
    kl: float = 0.04  # weight of the KL penalty to the starting adapter
    temperature: float = 1.0
    max_new_tokens: int = 200  # as `harness cdwm evaluate` asks
    reversibility_weight: float = 0.0  # > 0: the reversibility part enters the reward too
    eval_rows: int = 10  # greedy rows per non-train split, before and after (0: none)
    eval_every: int = 0  # also evaluate every N steps (0: only before and after)
    checkpoint_every: int = 5
    keep_checkpoints: int = 2
    max_minutes: float = 0.0
    seed: int = 0

    def learning_settings(self, start_hash: str) -> dict[str, Any]:
        """What a resumed run must share, as `state.pt` records it; the starting adapter by content,
        not by path."""
        out = {k: v for k, v in asdict(self).items() if k not in RESUMABLE and k != "eval_rows"}
        out["adapter"] = start_hash
        return out


class PosttrainLogEntry(TypedDict, total=False):
    """A line of `posttrain_log.jsonl`: a step's (`rl_step`: the reward, its parts, the replies'
    mean confidence, KL, ...) or, with `eval` (the split), the mean reward parts of greedy replies
    (`evaluate_rows`). Written as JSON in the order the keys are set."""

    step: int
    eval: str
    reward: float
    delta_accuracy: float
    calibration: float
    action_following: float
    reversibility: float
    rows: float
    confidence: float | None  # None: no valid reply carried one
    kl: float
    pg_loss: float
    flat_groups: int  # groups whose replies all scored the same (no update from them)
    reply_tokens: float
    seconds: float


@dataclass
class PosttrainResult:
    step: int
    resumed_from: int
    seconds: float
    rows: int
    skipped: int
    adapter: Path
    log: list[PosttrainLogEntry] = field(default_factory=list)


# -- loading ----------------------------------------------------------------------------------------


def read_trained(adapter: Path) -> TrainRecord:
    info = adapter / TRAIN_FILE
    if not info.is_file():
        raise HarnessError(f"{info}: missing; pass the folder `harness cdwm train --out OUT` wrote as OUT/adapter")
    try:
        trained: TrainRecord = json.loads(info.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise HarnessError(f"{info}: not JSON ({exc}); re-export the adapter with `harness cdwm train`") from exc
    if not isinstance(trained, dict):  # JSON, but not an object
        raise HarnessError(f"{info}: not a JSON object; re-export the adapter with `harness cdwm train`")
    if trained.get("format") != wm_format.PROMPT_FORMAT:
        raise HarnessError(
            f"{info}: prompt format {trained.get('format')!r}, not {wm_format.PROMPT_FORMAT!r}; post-train an "
            f"adapter of this version's `harness cdwm train`"
        )
    if not (adapter / "adapter_model.safetensors").is_file():
        raise HarnessError(f"{adapter / 'adapter_model.safetensors'}: missing; not a peft adapter folder")
    return trained


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


@dataclass
class Row:
    prompt: list[int]
    schema: dict[str, JsonValue]  # the class's masked decoding schema
    truth: Delta
    key: str


def build_rows(
    split: Any, deltas: list[Delta], tokenizer: Any, mask: LearnedMask, obs_chars: int, max_tokens: int
) -> tuple[list[Row], int]:
    """The rows the agent would ask the model about: a delta the schema can hold, a prompt that
    fits, a class whose gates are not all closed (the agent gets those without a call)."""
    from harness.providers.base import GenerateConfig
    from harness.providers.embedded import chat_prompt_ids

    rows, skipped = [], 0
    for row, delta in zip(split, deltas):
        key = wm_format.class_key(row["world"], row["action_class"])
        allowed = mask.allowed(key)
        prompt = chat_prompt_ids(tokenizer, wm_format.messages(row, obs_chars), GenerateConfig())
        if not wm_format.fits(delta) or len(prompt) >= max_tokens or (allowed is not None and not allowed):
            skipped += 1
            continue
        rows.append(Row(prompt, wm_format.prediction_schema(allowed), delta, key))
    return rows, skipped


def load_policy(cfg: PosttrainConfig, adapter: Path, trained: TrainRecord) -> tuple[Any, Any, str]:
    """(peft model with the trainable policy "default" and the frozen reference, tokenizer, base
    fingerprint); an adapter made on another base model is refused, naming its file."""
    from peft import PeftModel

    model, tokenizer = load_base(
        TrainConfig(data=cfg.data, base_model=cfg.base_model, device=cfg.device, dtype=cfg.dtype)
    )
    fingerprint = base_fingerprint(model)
    if trained.get("base") != fingerprint:
        raise HarnessError(
            f"{adapter / TRAIN_FILE}: trained on {trained.get('base_name')} (fingerprint {trained.get('base')}), "
            f"not on {cfg.base_model or 'the embedded model'} ({fingerprint}); pass its base with --base-model"
        )
    peft_model = PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
    peft_model.load_adapter(str(adapter), adapter_name=REF, is_trainable=False)
    peft_model.set_adapter("default")
    return peft_model, tokenizer, fingerprint


# -- evaluation -------------------------------------------------------------------------------------


def evaluate_rows(
    peft_model: Any, tokenizer: Any, grammar: Grammar, rows: list[Row], cfg: PosttrainConfig
) -> PosttrainLogEntry:
    """Greedy replies (as the agent decodes) and their mean reward parts."""
    import torch

    peft_model.eval()
    got = {p: 0.0 for p in PARTS} | {"reward": 0.0}
    gen = torch.Generator().manual_seed(0)
    for row in rows:
        (reply,) = sample_replies(
            peft_model, tokenizer, grammar, row.prompt, row.schema, 1, 0.0, cfg.max_new_tokens, gen
        )
        parts = reply_parts(parse_reply(reply.text, reply.finished, row.schema), row.truth)
        for k, v in parts.items():
            got[k] += v
        got["reward"] += reply_reward(parts, cfg.reversibility_weight)
    peft_model.train()
    mean = {k: round(v / max(1, len(rows)), 5) for k, v in got.items()}
    return PosttrainLogEntry(
        delta_accuracy=mean["delta_accuracy"], calibration=mean["calibration"],
        action_following=mean["action_following"], reversibility=mean["reversibility"], reward=mean["reward"],
        rows=float(len(rows)),
    )


# -- checkpoints ------------------------------------------------------------------------------------


def save_checkpoint(out: Path, step: int, peft_model: Any, optimizer: Any, meta: TrainMeta, keep: int) -> None:
    import torch

    final = out / "checkpoints" / f"step-{step:06d}"
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    peft_model.save_pretrained(str(tmp / "adapter"), selected_adapters=["default"])
    torch.save({"step": step, "optimizer": optimizer.state_dict(), **meta}, tmp / "state.pt")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    for old in checkpoints(out)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def export(out: Path, peft_model: Any, start: Path, trained: TrainRecord, cfg: PosttrainConfig, step: int) -> Path:
    """`OUT/adapter`: the post-trained LoRA, the starting adapter's mask, its training record plus
    this post-training's."""
    final, tmp = out / "adapter", out / "adapter.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    peft_model.save_pretrained(str(tmp), selected_adapters=["default"])
    shutil.copy(start / "cdwm_mask.json", tmp / "cdwm_mask.json")
    record = {**trained, "posttrain": {**asdict(cfg), "step": step, "start_step": trained.get("step")}}
    (tmp / TRAIN_FILE).write_text(json.dumps(record, indent=1, sort_keys=True, default=str))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final


# -- the loop ---------------------------------------------------------------------------------------


def posttrain(
    cfg: PosttrainConfig,
    out: Path,
    *,
    on_step: Callable[[PosttrainLogEntry], None] | None = None,
    stop_after: int | None = None,
) -> PosttrainResult:
    """Post-train (or resume) into `out`. `stop_after` ends the session after that many steps of it
    without a final export, as a kill would (tests)."""
    import torch

    if cfg.temperature <= 0:
        raise HarnessError(f"--temperature {cfg.temperature}: sampling needs a temperature > 0")
    if cfg.group_size < 2:
        raise HarnessError(f"--group-size {cfg.group_size}: a group needs at least 2 replies to compare")
    start_time = time.perf_counter()
    torch.manual_seed(cfg.seed)
    start = Path(cfg.adapter)
    if start.resolve() == (out / "adapter").resolve():
        raise HarnessError(f"--adapter {start} is --out's own adapter/; copy the starting adapter elsewhere first")
    trained = read_trained(start)
    mask = LearnedMask.load(start)
    data = Path(cfg.data)
    folder = dataset_dir(data)
    dd = load_splits(data)
    keys = {wm_format.class_key(w, c) for w, c in zip(dd["train"]["world"], dd["train"]["action_class"])}
    classes = [str(c) for c in trained.get("classes", [])]
    if not keys & set(classes):
        raise HarnessError(
            f"{start / TRAIN_FILE}: trained for action classes {', '.join(classes[:6])} ..., none of which is in "
            f"{folder} ({', '.join(sorted(keys)[:6])} ...): an adapter of another world; post-train it on the "
            f"transitions it was trained on"
        )
    peft_model, tokenizer, fingerprint = load_policy(cfg, start, trained)
    settings = trained.get("settings", {})
    obs_chars, max_tokens = int(settings.get("obs_chars", 700)), int(settings.get("max_tokens", 448))
    rows, skipped = build_rows(
        dd["train"], split_deltas(dd["train"], folder, "train"), tokenizer, mask, obs_chars, max_tokens
    )
    if not rows:
        raise HarnessError(f"{folder}: no training row the model would be asked about (all masked or too long)")
    eval_sets: dict[str, list[Row]] = {}
    if cfg.eval_rows > 0:
        for name in dd:
            if name == "train":
                continue
            split = dd[name]
            picked = sample_rows(split, cfg.eval_rows * 2, cfg.seed)
            deltas = split_deltas(split, folder, name)
            got, _ = build_rows(
                split.select(picked), [deltas[i] for i in picked], tokenizer, mask, obs_chars, max_tokens
            )
            eval_sets[name] = got[: cfg.eval_rows]
    grammar = Grammar(peft_model, tokenizer)
    end_id = end_of_turn_id(tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else end_id
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    meta = TrainMeta(
        base=fingerprint,
        base_name=trained.get("base_name"),
        format=wm_format.PROMPT_FORMAT,
        settings=cfg.learning_settings(file_hash(start / "adapter_model.safetensors")),
        classes=classes,
    )
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / LOG_FILE
    step = resumed = 0
    found = checkpoints(out)
    if found:
        state = read_checkpoint(found[-1], meta)
        load_adapter_weights(peft_model, found[-1] / "adapter")
        optimizer.load_state_dict(state["optimizer"])
        step = resumed = int(state["step"])
    log: list[PosttrainLogEntry] = (
        [json.loads(line) for line in log_path.read_text().splitlines()] if log_path.is_file() else []
    )
    log = [e for e in log if e["step"] <= step]

    def write_log() -> None:
        log_path.write_text("".join(json.dumps(e) + "\n" for e in log))

    def evaluate_all() -> None:
        for name, chosen in eval_sets.items():
            log.append({"step": step, "eval": name, **evaluate_rows(peft_model, tokenizer, grammar, chosen, cfg)})
            if on_step:
                on_step(log[-1])
        write_log()

    if step == 0:
        log = []  # a session killed before its first checkpoint starts over, evaluation included
        evaluate_all()
    elapsed0 = max((e.get("seconds", 0.0) for e in log), default=0.0)
    session_start, session_steps = time.perf_counter(), 0
    peft_model.train()
    while step < cfg.steps:
        if cfg.max_minutes > 0 and elapsed0 + time.perf_counter() - session_start > cfg.max_minutes * 60:
            break
        if stop_after is not None and session_steps >= stop_after:
            return PosttrainResult(step, resumed, time.perf_counter() - start_time, len(rows), skipped, out, log)
        entry = rl_step(peft_model, tokenizer, grammar, optimizer, params, rows, step, cfg, pad_id)
        step, session_steps = step + 1, session_steps + 1
        entry = {"step": step, **entry, "seconds": round(elapsed0 + time.perf_counter() - session_start, 2)}
        log.append(entry)
        if on_step:
            on_step(entry)
        if cfg.eval_every > 0 and step % cfg.eval_every == 0 and step < cfg.steps:
            evaluate_all()
        if step % cfg.checkpoint_every == 0 or step == cfg.steps:
            write_log()
            save_checkpoint(out, step, peft_model, optimizer, meta, cfg.keep_checkpoints)
    if not any(e.get("eval") and e["step"] == step for e in log) and step > 0:
        evaluate_all()
    write_log()
    if not checkpoints(out) or checkpoints(out)[-1].name != f"step-{step:06d}":
        save_checkpoint(out, step, peft_model, optimizer, meta, cfg.keep_checkpoints)
    adapter = export(out, peft_model, start, trained, cfg, step)
    return PosttrainResult(step, resumed, time.perf_counter() - start_time, len(rows), skipped, adapter, log)


def rl_step(
    peft_model: Any,
    tokenizer: Any,
    grammar: Grammar,
    optimizer: Any,
    params: list[Any],
    rows: list[Row],
    step: int,
    cfg: PosttrainConfig,
    pad_id: int,
) -> PosttrainLogEntry:
    """One GRPO step over `cfg.rows` transitions (chosen by (seed, step), like wm_train's batches);
    returns the step's log entry (without step and seconds)."""
    import torch

    gen = torch.Generator().manual_seed(int(np.random.default_rng([cfg.seed, step, 3]).integers(2**62)))
    picked = batch_indices(step, len(rows), cfg.rows, cfg.seed)
    sums = {p: 0.0 for p in PARTS}
    rewards_all: list[float] = []
    kl_sum = pg_sum = conf_sum = 0.0
    conf_n = tokens = flat = 0
    optimizer.zero_grad(set_to_none=True)
    for i in picked:
        row = rows[i]
        peft_model.eval()
        replies = sample_replies(
            peft_model, tokenizer, grammar, row.prompt, row.schema, cfg.group_size, cfg.temperature,
            cfg.max_new_tokens, gen,
        )  # fmt: skip
        rewards = []
        for r in replies:
            pred = parse_reply(r.text, r.finished, row.schema)
            parts = reply_parts(pred, row.truth)
            for k, v in parts.items():
                sums[k] += v
            rewards.append(reply_reward(parts, cfg.reversibility_weight))
            tokens += len(r.tokens)
            if pred is not None and pred.confidence is not None:
                conf_sum, conf_n = conf_sum + pred.confidence, conf_n + 1
        rewards_all += rewards
        adv = group_advantages(rewards)
        if not any(adv):
            flat += 1  # the group agrees: no signal (and no update from this row)
            continue
        peft_model.train()
        with torch.no_grad():
            peft_model.set_adapter(REF, inference_mode=True)
            ref_logp, _ = reply_logprobs(peft_model, grammar, row.prompt, replies, cfg.temperature, pad_id)
            peft_model.set_adapter("default")
        logp, owner = reply_logprobs(peft_model, grammar, row.prompt, replies, cfg.temperature, pad_id)
        # per reply: the mean over all its tokens (GRPO's 1/|o|); forced tokens add 0 to both sums
        lengths = torch.tensor([len(r.tokens) for r in replies], dtype=logp.dtype, device=logp.device)
        log_ratio = ref_logp - logp
        per_token_kl = torch.exp(log_ratio) - log_ratio - 1.0
        kl = torch.zeros_like(lengths).index_add(0, owner, per_token_kl) / lengths
        mean_logp = torch.zeros_like(lengths).index_add(0, owner, logp) / lengths
        a = torch.tensor(adv, device=logp.device)
        pg = -(a * mean_logp).mean()
        loss = (pg + cfg.kl * kl.mean()) / len(picked)
        loss.backward()
        kl_sum, pg_sum = kl_sum + float(kl.mean().detach()), pg_sum + float(pg.detach())
    updated = len(picked) - flat
    if updated:
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    n = len(rewards_all)
    return PosttrainLogEntry(
        reward=round(float(np.mean(rewards_all)), 5),
        delta_accuracy=round(sums["delta_accuracy"] / n, 5),
        calibration=round(sums["calibration"] / n, 5),
        action_following=round(sums["action_following"] / n, 5),
        reversibility=round(sums["reversibility"] / n, 5),
        confidence=round(conf_sum / conf_n, 4) if conf_n else None,
        kl=round(kl_sum / updated, 6) if updated else 0.0,
        pg_loss=round(pg_sum / updated, 6) if updated else 0.0,
        flat_groups=flat,
        reply_tokens=round(tokens / n, 1),
    )


def eval_table(log: list[PosttrainLogEntry]) -> str:
    """Before / after per split, from the log's `eval` entries."""
    evals = [e for e in log if e.get("eval")]
    if not evals:
        return ""
    first, last = min(e["step"] for e in evals), max(e["step"] for e in evals)
    lines = [
        "| split | step | rows | reward | delta accuracy | calibration | action following | reversibility |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in evals:
        if e["step"] in (first, last):
            lines.append(
                f"| {e['eval']} | {e['step']} | {e['rows']:.0f} | {e['reward']:.3f} | {e['delta_accuracy']:.3f} | "
                f"{e['calibration']:.3f} | {e['action_following']:.3f} | {e['reversibility']:.3f} |"
            )
    return "\n".join(lines)
