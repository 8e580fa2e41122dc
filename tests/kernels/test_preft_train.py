"""PreFT training: the task, the SFT loop in both modes, the saved adapters, and the invariants
that make `preft` training mean prefill-only inference."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from preft.adapters import LoraAdapter, ReftAdapter, load_adapter
from preft.model import KVPool, LoraWeights, PreftModel, Span
from preft.task import CODES, TEST_TEMPLATES, TRAIN_TEMPLATES, WORDS, accuracy, encode, make_task
from preft.train import (TrainConfig, batch_loss, build_batch, compare, export, make_trainable,
                                 reproject, train)


@pytest.fixture(scope="module")
def base():
    from harness.providers.embedded import load_model

    model, tokenizer = load_model()
    return model, tokenizer, PreftModel(model)


@pytest.fixture(scope="module")
def trained(base, tmp_path_factory):
    """A short LoRA training in preft mode (one of the 'slow' tests' shared costs)."""
    model, tokenizer, _ = base
    out = tmp_path_factory.mktemp("lora") / "adapter"
    cfg = TrainConfig(kind="lora", mode="preft", rank=4, steps=24, batch=8, seed=0)
    return train(cfg, model=model, tokenizer=tokenizer, out_dir=out)


def stack(adapter: LoraAdapter) -> LoraWeights:
    """A loaded LoRA as a one-slot stack."""
    return LoraWeights(A={k: a[None] for k, (a, _, _) in adapter.modules.items()},
                       B={k: b[None] for k, (_, b, _) in adapter.modules.items()},
                       scales={k: torch.tensor([s]) for k, (_, _, s) in adapter.modules.items()})


def test_task_is_seeded_and_splits_are_disjoint():
    train_a, test_a = make_task(0)
    assert (train_a, test_a) == make_task(0)
    assert make_task(1) != (train_a, test_a)
    def words(pairs):
        return {w for p, _ in pairs for ws in WORDS.values() for w in ws if w in p.replace("?", " ").split()}

    assert words(train_a).isdisjoint(words(test_a)) and len(words(test_a)) == 20
    assert set(TRAIN_TEMPLATES).isdisjoint(TEST_TEMPLATES)
    assert {a for _, a in train_a} == {a for _, a in test_a} == set(CODES.values())


@pytest.mark.slow
def test_base_model_fails_the_task_deterministically(base):
    _, tokenizer, pm = base
    test = encode(tokenizer, make_task(0)[1])
    assert all(len(p) <= 32 and 1 <= len(a) <= 3 for p, a in test)
    first = accuracy(pm, test, pad_id=tokenizer.eos_token_id)
    assert first <= 0.05
    assert accuracy(pm, test, pad_id=tokenizer.eos_token_id) == first


@pytest.mark.slow
def test_fresh_lora_is_a_no_op_and_its_A_gradient_is_exactly_zero(base):
    """B = 0 at init (as in peft): the adapted loss is the base loss, and dL/dA = x^T (g B^T) s = 0."""
    model, tokenizer, pm = base
    adapter = make_trainable(TrainConfig(kind="lora", rank=4), model.config)
    batch = build_batch(encode(tokenizer, make_task(0)[0][:4]), "preft", None, tokenizer.eos_token_id, tokenizer.eos_token_id)
    loss = batch_loss(pm, *batch, adapter)
    with torch.no_grad():
        assert torch.equal(loss.detach(), batch_loss(pm, *batch))
    grads = torch.autograd.grad(loss, adapter.params)
    n = len(adapter.params) // 2  # params are [*A, *B]
    assert all(bool((g == 0).all()) for g in grads[:n])
    assert sum(float(g.abs().sum()) for g in grads[n:]) > 0
    assert all(p.grad is None for p in model.parameters())  # the shared base got no gradients


@pytest.mark.slow
def test_preft_training_learns_the_task(trained, base):
    losses = trained.losses
    assert sum(losses[-4:]) / 4 < 0.1 * losses[0]
    assert trained.test_acc["preft"] >= 0.5  # the base model scores 0 on this split
    assert trained.config.mode == "preft" and trained.seconds > 0


@pytest.mark.slow
def test_preft_teacher_forcing_equals_prefill_then_bare_decode(trained, base):
    """The invariant behind `preft` training: with -1 on the response positions, the dense causal
    forward gives the very logits of prefill-with-adapter + decode-without over a KV cache."""
    model, tokenizer, pm = base
    lora = stack(load_adapter(trained.adapter_dir))
    prompt, answer = encode(tokenizer, make_task(0)[1][:1])[0]
    tokens, index, _ = build_batch([(prompt, answer)], "preft", None, tokenizer.eos_token_id, tokenizer.eos_token_id)
    assert index[0, : len(prompt)].eq(0).all() and index[0, len(prompt):].eq(-1).all()
    with torch.no_grad():
        dense = pm.forward_dense(tokens, lora=lora, lora_idx=index)[0]
        pool = KVPool(model.config, rows=1, capacity=32)
        cached = [pm.forward_cached(torch.tensor(prompt), [Span(0, 0, len(prompt), 0)], pool,
                                    lora=lora, lora_idx=torch.zeros(len(prompt), dtype=torch.long))[0]]
        for k, tok in enumerate(answer):
            cached.append(pm.forward_cached(torch.tensor([tok]), [Span(0, 0, 1, len(prompt) + k)], pool,
                                            lora=lora, lora_idx=torch.tensor([-1]))[0])
    expected = dense[len(prompt) - 1: len(prompt) + len(answer)]
    assert torch.allclose(torch.stack(cached), expected, atol=1e-4, rtol=0)
    # ... and the adapter matters there: all-token logits on the response differ.
    with torch.no_grad():
        every = pm.forward_dense(tokens, lora=lora, lora_idx=torch.zeros_like(index))[0]
    assert not torch.allclose(every[len(prompt):], dense[len(prompt):], atol=1e-3)


@pytest.mark.slow
def test_saved_lora_loads_here_and_in_peft_with_equal_logits(trained, base):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from harness.providers.embedded import ensure_converted

    _, tokenizer, pm = base
    loaded = load_adapter(trained.adapter_dir)
    assert isinstance(loaded, LoraAdapter) and loaded.rank == 4 and len(loaded.modules) == 30 * 7
    assert any(float(b.abs().max()) > 0 for _, b, _ in loaded.modules.values())  # trained, not the init
    fresh = AutoModelForCausalLM.from_pretrained(str(ensure_converted()), dtype=torch.float32)
    peft_model = PeftModel.from_pretrained(fresh, trained.adapter_dir).eval()
    ids = torch.tensor([tokenizer("Word: tiger\nCode: blorfin")["input_ids"]])
    with torch.no_grad():
        ours = pm.forward_dense(ids, lora=stack(loaded), lora_idx=torch.zeros_like(ids))
        theirs = peft_model(input_ids=ids).logits
    assert (ours - theirs).abs().max().item() < 1e-4


@pytest.mark.slow
def test_loreft_step_keeps_R_orthonormal_and_saves(base, tmp_path):
    model, tokenizer, pm = base
    adapter = make_trainable(TrainConfig(kind="loreft", rank=4, reft_layers=(3, 9)), model.config)
    opt = torch.optim.AdamW(adapter.params, lr=0.05)
    batch = build_batch(encode(tokenizer, make_task(0)[0][:4]), "preft", adapter.reft_span,
                        tokenizer.eos_token_id, tokenizer.eos_token_id)
    for p, g in zip(adapter.params, torch.autograd.grad(batch_loss(pm, *batch, adapter), adapter.params)):
        p.grad = g
    opt.step()
    eye = torch.eye(4)
    drift = max(float((R @ R.T - eye).abs().max()) for R in (adapter.reft.R[l][0].detach() for l in adapter.layers))
    assert drift > 1e-5  # the raw step leaves the manifold ...
    reproject(adapter)
    for l in adapter.layers:  # ... and the re-projection puts R back on it
        R = adapter.reft.R[l][0]
        assert torch.allclose(R @ R.T, eye, atol=1e-5)
    saved = load_adapter(export(adapter, "r", tmp_path / "reft"))
    assert isinstance(saved, ReftAdapter) and saved.kind == "loreft" and sorted(saved.layers) == [3, 9]
    assert torch.allclose(saved.layers[3][0] @ saved.layers[3][0].T, eye, atol=1e-5)


@pytest.mark.slow
def test_compare_writes_results_csv_and_plot(tmp_path):
    rows = compare(ranks=(2,), kinds=("lora",), modes=("preft", "all-token"), steps=2, out=tmp_path, log=None)
    assert [(r["mode"], r["rank"]) for r in rows] == [("preft", 2), ("all-token", 2)]
    payload = json.loads((tmp_path / "results.json").read_text())
    assert payload["summary"] == rows and len(payload["runs"][0]["losses"]) == 2
    with open(tmp_path / "loss_curves.csv") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0]) == ["kind", "mode", "rank", "step", "loss"] and len(table) == 4
    assert (tmp_path / "loss_curves.png").stat().st_size > 1000
    assert (tmp_path / "adapters" / "lora-preft-r2" / "adapter_config.json").is_file()
