"""A small supervised task for comparing prefill-only (PreFT) and all-token adapters on CPU.

Word category -> made-up code word: "Word: tiger\\nCode:" -> " blorfin" (animal), " quazzle" (fruit),
" dromik" (colour), " plinko" (vehicle). The base model never says these words (base accuracy 0),
and each code is three tokens, so after the first token the rest must come from the decode
positions -- exactly where prefill-only and all-token adapters differ. Train and test use disjoint
words AND disjoint templates, so test accuracy measures learning the category -> code rule, not
memorising prompts. Everything is built in code from a seed; there are no data files.

Greedy decoding here re-runs `PreftModel.forward_dense` for every generated token (answers are 3
tokens, so no KV cache is needed); generated positions carry index -1 under prefill-only
semantics, which is what a prefill-only engine does with its cache.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

import torch

from preft.grad import no_grad

CODES = {"animal": " blorfin", "fruit": " quazzle", "colour": " dromik", "vehicle": " plinko"}
WORDS = {
    "animal": ["dog", "cat", "horse", "cow", "lion", "tiger", "rabbit", "sheep", "wolf", "bear", "monkey",
               "deer", "fox", "goat", "mouse", "elephant"],
    "fruit": ["apple", "banana", "grape", "lemon", "cherry", "peach", "pear", "mango", "plum", "melon",
              "strawberry", "pineapple", "kiwi", "apricot", "coconut", "raspberry"],
    "colour": ["red", "blue", "green", "yellow", "purple", "pink", "brown", "black", "white", "gray",
               "violet", "teal", "crimson", "silver", "beige", "maroon"],
    "vehicle": ["car", "bus", "truck", "train", "bicycle", "airplane", "boat", "ship", "motorcycle",
                "helicopter", "taxi", "tractor", "van", "scooter", "subway", "canoe"],
}
TRAIN_TEMPLATES = ("Word: {w}\nCode:", "Item: {w}\nCode:", "What is the code for {w}?\nAnswer:")
TEST_TEMPLATES = ("Name: {w}\nCode:", "The secret code for the word {w} is")
TEST_WORDS_PER_CATEGORY = 5

Pair = tuple[str, str]
Example = tuple[list[int], list[int]]  # (prompt ids, answer ids)


def make_task(seed: int = 0) -> tuple[list[Pair], list[Pair]]:
    """(train, test) lists of (prompt, answer); the words held out for test are drawn by `seed`."""
    rng = random.Random(seed)
    train: list[Pair] = []
    test: list[Pair] = []
    for category, words in WORDS.items():
        words = list(words)
        rng.shuffle(words)
        held = words[:TEST_WORDS_PER_CATEGORY]
        train += [(t.format(w=w), CODES[category]) for w in words[TEST_WORDS_PER_CATEGORY:] for t in TRAIN_TEMPLATES]
        test += [(t.format(w=w), CODES[category]) for w in held for t in TEST_TEMPLATES]
    rng.shuffle(train)
    return train, test


def encode(tokenizer: Any, pairs: Sequence[Pair]) -> list[Example]:
    """Prompt and answer tokenised separately (no BOS, as the tokenizer adds none), then joined."""
    return [(tokenizer(p)["input_ids"], tokenizer(a)["input_ids"]) for p, a in pairs]


def adapter_index(prompt_len: int, total_len: int, semantics: str,
                  reft_span: tuple[int, int] | None = None) -> list[int]:
    """Slot 0 where the adapter acts, -1 elsewhere, over one sequence of `total_len` tokens.

    `reft_span=None` is LoRA (every prompt token); `(first_n, last_m)` is ReFT (those prompt
    positions only). `all-token` also adapts every position after the prompt; `preft` never does.
    """
    if semantics not in ("preft", "all-token"):
        raise ValueError(f"semantics {semantics!r}: use preft or all-token")
    if reft_span is None:
        on = set(range(prompt_len))
    else:
        first_n, last_m = reft_span
        on = set(range(min(first_n, prompt_len))) | set(range(max(0, prompt_len - last_m), prompt_len))
    if semantics == "all-token":
        on |= set(range(prompt_len, total_len))
    return [0 if i in on else -1 for i in range(total_len)]


def pad_batch(seqs: Sequence[list[int]], idx: Sequence[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token lists and index lists (padding: pad_id and -1). Causal attention means
    padding after a sequence never changes its logits."""
    t = max(len(s) for s in seqs)
    tokens = torch.full((len(seqs), t), pad_id, dtype=torch.long)
    index = torch.full((len(seqs), t), -1, dtype=torch.long)
    for row, (s, i) in enumerate(zip(seqs, idx)):
        tokens[row, : len(s)] = torch.tensor(s)
        index[row, : len(i)] = torch.tensor(i)
    return tokens, index


@no_grad
def greedy_answers(pm: Any, examples: Sequence[Example], *, semantics: str = "preft", lora: Any = None,
                   reft: Any = None, reft_span: tuple[int, int] | None = None, pad_id: int = 0,
                   batch: int = 32) -> list[list[int]]:
    """Greedy continuation of each prompt, as many tokens as its answer has (dense forward per token)."""
    outputs: list[list[int]] = []
    for start in range(0, len(examples), batch):
        chunk = examples[start:start + batch]
        gen: list[list[int]] = [[] for _ in chunk]
        for _ in range(max(len(a) for _, a in chunk)):
            seqs = [p + g for (p, _), g in zip(chunk, gen)]
            idx = [adapter_index(len(p), len(s), semantics, reft_span) for (p, _), s in zip(chunk, seqs)]
            tokens, index = pad_batch(seqs, idx, pad_id)
            logits = pm.forward_dense(tokens, lora=lora, lora_idx=index if lora is not None else None,
                                      reft=reft, reft_idx=index if reft is not None else None)
            last = torch.tensor([len(s) - 1 for s in seqs])
            picks = logits[torch.arange(len(seqs)), last].argmax(-1).tolist()
            for g, tok in zip(gen, picks):
                g.append(int(tok))
        outputs += [g[: len(a)] for (_, a), g in zip(chunk, gen)]
    return outputs


def accuracy(pm: Any, examples: Sequence[Example], **kwargs: Any) -> float:
    """Exact match of the greedy answer tokens (keyword arguments as for `greedy_answers`)."""
    if not examples:
        return 0.0
    got = greedy_answers(pm, examples, **kwargs)
    return float(sum(g == a for g, (_, a) in zip(got, examples))) / len(examples)
