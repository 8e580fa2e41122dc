"""GRPO-style RL for PreFT (kernels/preft/rl.py) on a tiny random Llama: advantages, the
prefill-only semantics of sampling and scoring, the update direction, and seeded determinism.
The claim check over these runs (suite `preft.rl`, claim `preft.rl_parity`): test_preft_rl_claim.py."""

from __future__ import annotations

import pytest
import torch

from preft.model import PreftModel
from preft.random_llama import build_random_llama
from preft.rl import RlConfig, _grouped_logits, completion_logprob, group_advantages, rl_step, sample
from preft.task import adapter_index, pad_batch
from preft.train import TrainConfig, make_trainable


def tiny(seed: int = 0):
    model = build_random_llama("tiny", seed=0)
    adapter = make_trainable(TrainConfig(kind="lora", rank=2, seed=seed), model.config)
    with torch.no_grad():  # a non-zero B so the adapter changes the outputs
        g = torch.Generator().manual_seed(seed + 7)
        for b in adapter.lora.B.values():
            b.copy_(torch.randn(b.shape, generator=g) * 0.05)
    return PreftModel(model), adapter


PROMPTS = [[5, 9, 13, 21], [7, 3, 2, 11]]


def dense_logits(pm, seqs, prompt_len, mode, adapter):
    """The reference: every whole sequence through `forward_dense`, right-padded."""
    idx = [adapter_index(prompt_len, len(s), mode) for s in seqs]
    tokens, index = pad_batch(seqs, idx, 0)
    lora = adapter.lora if adapter is not None else None
    return pm.forward_dense(tokens, lora=lora, lora_idx=index if lora is not None else None)


def test_grouped_forward_equals_dense_forward_of_whole_sequences():
    """Running each prompt once for its group gives the dense forward's logits at every completion
    position, in both modes, with completions of different lengths (padding)."""
    pm, adapter = tiny()
    comps = [[30, 40, 50], [31], [32, 41], [33, 42, 51]]  # 2 per prompt
    padded = torch.tensor([c + [0] * (3 - len(c)) for c in comps])
    prompts = [PROMPTS[0], PROMPTS[0], PROMPTS[1], PROMPTS[1]]
    with torch.no_grad():
        for mode in ("preft", "all-token"):
            grouped = _grouped_logits(pm, PROMPTS, padded, mode, adapter)  # [4, 4, V]
            for row, (p, c) in enumerate(zip(prompts, comps)):
                dense = dense_logits(pm, [p + c], 4, mode, adapter)[0]
                assert torch.allclose(grouped[row, : len(c) + 1], dense[3 : 4 + len(c)], atol=1e-4), (mode, row)


def test_group_advantages_sum_to_zero_per_group():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    for std in (False, True):
        adv = group_advantages(rewards, std_norm=std)
        assert torch.allclose(adv.sum(1), torch.zeros(3), atol=1e-5)
        assert adv[0, 0] > 0 > adv[0, 1]
    assert torch.equal(group_advantages(rewards)[2], torch.zeros(4))


def test_preft_generated_positions_unadapted_prompt_positions_adapted():
    pm, adapter = tiny()
    seq = [PROMPTS[0] + [30, 40, 50]]
    with torch.no_grad():
        base = dense_logits(pm, seq, 4, "preft", None)
        pre = dense_logits(pm, seq, 4, "preft", adapter)
        allt = dense_logits(pm, seq, 4, "all-token", adapter)
        pre_no_gen = dense_logits(pm, [PROMPTS[0]], 4, "preft", adapter)
    assert not torch.allclose(pre[0, :4], base[0, :4])  # the adapter acts on the prompt
    assert torch.allclose(pre[0, :4], allt[0, :4], atol=1e-5)  # same on the prompt in both modes
    assert torch.allclose(pre[0, :4], pre_no_gen[0], atol=1e-5)  # generated tokens never change the prefix
    assert not torch.allclose(pre[0, 4:], allt[0, 4:], atol=1e-4)  # all-token also adapts generated positions
    # preft's generated positions are exactly the base layers applied to an adapted prefix: zeroing
    # the adapter's effect there (index -1) is what preft does, so the all-token run differs only there
    assert (pre[0, 4:] - allt[0, 4:]).abs().max() > 0


def test_update_on_positive_sample_raises_its_logprob():
    pm, adapter = tiny()
    prompts, comps = [PROMPTS[0]], [[30, 40, 0]]
    for mode in ("preft", "all-token"):
        pm, adapter = tiny()
        before = float(completion_logprob(pm, prompts * 2, comps + [[31, 41, 0]], mode, adapter, 0, group=2)[0])
        opt = torch.optim.SGD(adapter.params, lr=0.5)
        adv = torch.tensor([1.0, -1.0])
        loss = -(adv * completion_logprob(pm, prompts * 2, comps + [[31, 41, 0]], mode, adapter, 0, group=2)).mean()
        for p, g in zip(adapter.params, torch.autograd.grad(loss, adapter.params)):
            p.grad = g
        opt.step()
        after = float(completion_logprob(pm, prompts, comps, mode, adapter, 0)[0])
        assert after > before, mode


def test_rl_step_and_sampling_deterministic_per_seed():
    def run(seed):
        pm, adapter = tiny(seed)
        opt = torch.optim.AdamW(adapter.params, lr=1e-2)
        cfg = RlConfig(mode="preft", rank=2, prompts=2, group=3, seed=seed)
        gen = torch.Generator().manual_seed(seed)
        batch = [(PROMPTS[0], [30, 0]), (PROMPTS[1], [31, 0])]
        r = rl_step(pm, adapter, opt, batch, cfg, gen, stop_id=0)
        comps = sample(pm, [PROMPTS[0]] * 3 + [PROMPTS[1]] * 3, 3, "preft", adapter, gen, 0, group=3)
        return r, comps, [p.detach().clone() for p in adapter.params[:3]]

    a, b = run(0), run(0)
    assert a[0] == b[0] and a[1] == b[1]
    assert len(a[1]) == 6 and all(1 <= len(c) <= 3 for c in a[1])
    assert all(torch.equal(x, y) for x, y in zip(a[2], b[2]))


def test_grouped_batch_rejects_mixed_layout_and_prompt_lengths():
    pm, adapter = tiny()
    with pytest.raises(ValueError, match="G copies of each prompt"):
        sample(pm, [PROMPTS[0], PROMPTS[1]], 2, "preft", adapter, torch.Generator(), 0, group=2)
    with pytest.raises(ValueError, match="share one token length"):
        sample(pm, [PROMPTS[0], [1, 2]], 2, "preft", adapter, torch.Generator(), 0, group=1)
