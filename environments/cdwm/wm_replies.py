"""A world-model reply for post-training (`wm_posttrain.py`): its reward against the row's ground
truth (reward.py's per-transition parts) and its sampling under the grammar the agent decodes with,
with the per-position masks that make its log-probabilities those of the grammar-restricted policy."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jsonschema
import numpy as np
from pydantic import JsonValue

from environments.cdwm.deltas import Delta, DeltaPrediction
from environments.cdwm.episode import EpisodeScores
from environments.cdwm.metrics import prediction_row
from environments.cdwm.reward import WEIGHTS, reward_components

if TYPE_CHECKING:  # imported where used: xgrammar loads native code
    from xgrammar import CompiledGrammar

PARTS = ("delta_accuracy", "calibration", "action_following", "reversibility")


@dataclass
class Sampled:
    tokens: list[int]  # the reply's tokens, the stop token included when it finished
    choices: list[int]  # positions where the grammar allowed more than one token
    bitmasks: Any  # int32 [len(choices), words]: what it allowed there
    text: str
    finished: bool


# -- the reward of one reply --------------------------------------------------------------------------


def parse_reply(text: str, finished: bool, schema: dict[str, JsonValue]) -> Delta | None:
    """The prediction, or None when the reply is not one valid `DeltaPrediction` that the (masked)
    schema accepts, or was cut at max_new_tokens."""
    if not finished:
        return None
    try:
        value = json.loads(text)
        jsonschema.validate(value, schema)
        return DeltaPrediction.model_validate(value).to_delta()
    except (ValueError, jsonschema.ValidationError):
        return None


def reversibility(pred: Delta, truth: Delta) -> float:
    """1 when the reversible flag is right and, for an irreversible row, the predicted cost is
    exact; the cost's relative error (capped at 1) is taken off."""
    if pred.reversible != truth.reversible:
        return 0.0
    if truth.reversible:
        return 1.0
    scale = max(abs(truth.irreversible_cost), 1.0)
    return 1.0 - min(1.0, abs(pred.irreversible_cost - truth.irreversible_cost) / scale)


def reply_parts(pred: Delta | None, truth: Delta) -> dict[str, float]:
    """reward.py's per-transition components of one reply, plus `reversibility`; 0 everywhere for
    an invalid reply."""
    if pred is None:
        return {p: 0.0 for p in PARTS}
    parts = reward_components(EpisodeScores(predictions=[prediction_row(pred, truth)], policy_replies=1))
    parts.pop("success")  # an episode's outcome: not a transition's
    parts["reversibility"] = reversibility(pred, truth)
    return {p: float(parts[p]) for p in PARTS}


def reply_reward(parts: dict[str, float], reversibility_weight: float = 0.0) -> float:
    """reward.py's weights over the per-transition parts, renormalised (success is not one)."""
    weights = {k: WEIGHTS[k] for k in PARTS if k in WEIGHTS}
    if reversibility_weight > 0:
        weights["reversibility"] = reversibility_weight
    return sum(w * parts[k] for k, w in weights.items()) / sum(weights.values())


def group_advantages(rewards: list[float], eps: float = 1e-6) -> list[float]:
    """(r - mean) / (std + eps) within one group; all zero when the group agrees."""
    r = np.asarray(rewards, dtype=float)
    std = float(r.std())
    if std < 1e-9:
        return [0.0] * len(rewards)
    return [float(x) for x in (r - r.mean()) / (std + eps)]


# -- sampling under the grammar ------------------------------------------------------------------------


_TOKENIZER_INFO: dict[tuple[str, int, int, frozenset[int]], Any] = {}


class Grammar:
    """The engine's output grammar for this tokenizer: xgrammar over the schema with the local
    engine's settings (any_whitespace=False, strict_mode; stop = the engine's stop ids; special
    tokens other than the stops banned; logits width = the model's output rows)."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        import torch
        import xgrammar as xgr

        from harness.providers.embedded import stop_token_ids

        self.xgr = xgr
        self.width = int(model.get_output_embeddings().weight.shape[0])
        self.stops = stop_token_ids(model, tokenizer)
        self.pad = min(self.stops)  # fed to a finished reply's row while the others go on
        key = (str(getattr(tokenizer, "name_or_path", "")), len(tokenizer), self.width, self.stops)
        if key not in _TOKENIZER_INFO:  # ~1 s for a 49k vocabulary: once per process and tokenizer
            _TOKENIZER_INFO[key] = xgr.TokenizerInfo.from_huggingface(
                tokenizer, vocab_size=self.width, stop_token_ids=sorted(self.stops)
            )
        info = _TOKENIZER_INFO[key]
        self.compiler = xgr.GrammarCompiler(info, max_threads=2, cache_enabled=True)
        special = set(getattr(tokenizer, "all_special_ids", []) or []) - set(self.stops)
        self.banned = torch.tensor(sorted(i for i in special if 0 <= i < self.width), dtype=torch.long)
        self._compiled: dict[str, CompiledGrammar] = {}  # schema JSON -> its grammar

    def matcher(self, schema: dict[str, JsonValue]) -> Any:
        key = json.dumps(schema, separators=(",", ":"))
        if key not in self._compiled:
            self._compiled[key] = self.compiler.compile_json_schema(key, any_whitespace=False, strict_mode=True)
        return self.xgr.GrammarMatcher(self._compiled[key])

    def allowed(self, bitmasks: Any) -> Any:
        """[N, words] int32 bitmasks -> [N, width] bool: token t is bit t % 32 of word t // 32, less
        the banned special tokens (what the engine's mask allows)."""
        import torch

        bits = np.unpackbits(bitmasks.numpy().view(np.uint8), axis=-1, bitorder="little")[:, : self.width]
        out = torch.from_numpy(bits.astype(bool))
        if self.banned.numel():
            out[:, self.banned] = False
        return out

    def additive(self, bitmasks: Any) -> Any:
        """[N, words] bitmasks -> [N, width] additive masks (0 allowed, -inf not)."""
        import torch

        return torch.zeros((bitmasks.shape[0], self.width)).masked_fill(~self.allowed(bitmasks), float("-inf"))


def pick(logits: Any, temperature: float, generator: Any) -> int:
    """One token from a masked logits row: the only allowed one (the grammar's forced tokens, most of
    a reply), the best one at temperature 0, else a draw among the allowed ones."""
    import torch

    allowed = torch.isfinite(logits).nonzero()[:, 0]
    if allowed.numel() == 1 or temperature <= 0:
        return int(allowed[0]) if allowed.numel() == 1 else int(logits.argmax())
    probs = torch.softmax(logits[allowed] / temperature, -1)
    return int(allowed[torch.multinomial(probs, 1, generator=generator)[0]])


def sample_replies(
    model: Any,
    tokenizer: Any,
    grammar: Grammar,
    prompt: list[int],
    schema: dict[str, JsonValue],
    n: int,
    temperature: float,
    max_new: int,
    generator: Any,
) -> list[Sampled]:
    """`n` replies to one prompt under the grammar, KV-cached; temperature 0 is greedy. A run of
    tokens the grammar forces (most of the JSON's frame) is taken without asking the model and fed
    to it in one forward pass; the tokens and their draws are those of one-token-at-a-time decoding
    (a forced token consumes no randomness)."""
    import torch

    matchers = [grammar.matcher(schema) for _ in range(n)]
    device = next(model.parameters()).device
    tokens: list[list[int]] = [[] for _ in range(n)]
    masks: list[list[Any]] = [[] for _ in range(n)]
    choices: list[list[int]] = [[] for _ in range(n)]
    queue: list[list[int]] = [[] for _ in range(n)]  # chosen, not yet fed to the model
    done = [False] * n

    def advance(i: int, logits: Any) -> None:
        """Row i's next token from the model's logits, then every token the grammar forces after it."""
        while not done[i]:
            bitmask = grammar.xgr.allocate_token_bitmask(1, grammar.width)
            matchers[i].fill_next_token_bitmask(bitmask, 0)
            allowed = grammar.allowed(bitmask)[0]
            only = allowed.nonzero()[:, 0]
            if only.numel() == 1:
                tok = int(only[0])
            elif logits is None:
                return  # a choice: the model must see the tokens so far
            else:
                tok = pick(logits.masked_fill(~allowed, float("-inf")), temperature, generator)
                choices[i].append(len(tokens[i]))
                masks[i].append(bitmask[0])
            logits = None
            tokens[i].append(tok)
            queue[i].append(tok)
            matchers[i].accept_token(tok)
            done[i] = bool(matchers[i].is_terminated()) or len(tokens[i]) >= max_new

    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt] * n, device=device), use_cache=True, logits_to_keep=1)
        last = out.logits[:, -1, : grammar.width].float().cpu()
        for i in range(n):
            advance(i, last[i])
        while not all(done):
            need = [i for i in range(n) if not done[i]]
            k = min(len(queue[i]) for i in need)
            block = torch.full((n, k), grammar.pad, dtype=torch.long)
            for i in need:
                block[i] = torch.tensor(queue[i][:k])
                queue[i] = queue[i][k:]
            out = model(input_ids=block.to(device), cache=out.cache, use_cache=True, logits_to_keep=1)
            last = out.logits[:, -1, : grammar.width].float().cpu()
            for i in need:
                if not queue[i]:
                    advance(i, last[i])
    replies = []
    for i in range(n):
        finished = bool(matchers[i].is_terminated())
        body = tokens[i][:-1] if finished else tokens[i]
        stacked = torch.stack(masks[i]) if masks[i] else torch.zeros((0, 0), dtype=torch.int32)
        text = tokenizer.decode(body, skip_special_tokens=False)
        replies.append(Sampled(tokens[i], choices[i], stacked, text, finished))
    return replies


def reply_logprobs(
    peft_model: Any, grammar: Grammar, prompt: list[int], replies: list[Sampled], temperature: float, pad_id: int
) -> tuple[Any, Any]:
    """Log-probs, under the active adapter at `temperature` and within what the grammar allowed, of
    each reply's chosen tokens at its choice positions: (logp [M], owner [M], the reply of each).
    A forced token's log-prob is 0 (and its KL too), so only the choices are computed."""
    import torch

    device = next(peft_model.parameters()).device
    width = max(len(r.tokens) for r in replies)
    n, p = len(replies), len(prompt)
    ids = torch.full((n, p + width), pad_id, dtype=torch.long)
    for i, r in enumerate(replies):
        ids[i, :p] = torch.tensor(prompt)
        ids[i, p : p + len(r.tokens)] = torch.tensor(r.tokens)
    owner = torch.tensor([i for i, r in enumerate(replies) for _ in r.choices], dtype=torch.long)
    at = torch.tensor([p + j for r in replies for j in r.choices], dtype=torch.long)
    causal_lm = peft_model.get_base_model()
    hidden = causal_lm.model(input_ids=ids.to(device)).last_hidden_state
    logits = causal_lm.lm_head(hidden[owner.to(device), (at - 1).to(device)]).float()[:, : grammar.width]
    bitmasks = torch.cat([r.bitmasks for r in replies if r.choices])
    logp = torch.log_softmax((logits + grammar.additive(bitmasks).to(device)) / temperature, -1)
    chosen = ids[owner, at].to(device)
    return logp.gather(-1, chosen[:, None])[:, 0], owner.to(device)
