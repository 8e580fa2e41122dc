"""GRPO-style RL for PreFT (kernels/preft/rl.py) on a tiny random Llama: advantages, the
prefill-only semantics of sampling and scoring, the update direction, and seeded determinism."""

from __future__ import annotations

import pytest
import torch

from preft.model import PreftModel
from preft.random_llama import build_random_llama
from preft.rl import RlConfig, _grouped_logits, completion_logprob, group_advantages, rl_step, sample
from preft.rl_check import CLAIM, CRITERIA_LOG, LEARN_MIN, MARGIN, judge, rl_claim, summarise
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


def rl_runs(diffs: dict[int, list[float]], gain: float | dict[int, float] = 0.5) -> list:
    """Synthetic RlResults: per rank, one (preft, all-token) pair per seed whose final rewards differ
    by diffs[rank][seed]; all-token gains `gain` over its first step (4 steps: final = last reward)."""
    from preft.rl import RlResult

    out = []
    for rank, ds in diffs.items():
        g = gain[rank] if isinstance(gain, dict) else gain
        for seed, d in enumerate(ds):
            base = 0.1 + 0.01 * seed
            cfg = {"steps": 4, "lr": 1e-3, "seed": seed, "rank": rank}
            out.append(RlResult(config=cfg | {"mode": "all-token"}, rewards=[base, base, base, base + g], seconds=1.0))
            out.append(RlResult(config=cfg | {"mode": "preft"}, rewards=[base, base, base, base + g + d], seconds=1.0))
    return out


NEAR_ZERO = [0.0, 0.01, -0.01, 0.005]


def verdict_of(diffs, gain=0.5):
    seeds = len(next(iter(diffs.values())))
    return judge(rl_runs(diffs, gain), sorted(diffs), list(range(seeds)))


def test_verdict_reproduced_when_every_rank_is_inside_the_margin():
    v = verdict_of({2: NEAR_ZERO, 8: NEAR_ZERO})
    assert v.verdict == "reproduced" and [c.outcome for c in v.conditions] == ["holds", "holds"]
    assert v.seeds == 4 and v.criterion_hash == CLAIM.criterion_hash() and v.claim == "preft.rl_parity"


def test_verdict_interval_is_the_t_interval_of_the_paired_differences_at_the_looks_level():
    from harness.stats import mean_interval

    diffs = [-0.2, 0.1, -0.05, 0.0]
    v = verdict_of({2: diffs, 8: NEAR_ZERO})
    mean, lo, hi = mean_interval(diffs, 1 - 0.05 / 4)  # Bonferroni over the plan's 4 looks
    c = v.conditions[0]
    assert (c.estimate, c.ci_low, c.ci_high, c.level) == pytest.approx((mean, lo, hi, 0.9875))
    assert c.outcome == "undecided" and v.verdict == "inconclusive" and v.seeds_to_decide


def test_verdict_not_reproduced_when_a_rank_lies_beyond_the_margin():
    v = verdict_of({2: [-0.4, -0.41, -0.39, -0.4], 8: NEAR_ZERO})
    assert v.conditions[0].ci_high < -MARGIN and v.conditions[0].outcome == "fails"
    assert v.verdict == "not reproduced"


def test_verdict_inconclusive_when_an_interval_straddles_the_margin():
    v = verdict_of({2: [-0.3, 0.2, -0.1, 0.1], 8: NEAR_ZERO})
    assert v.conditions[0].ci_low < -MARGIN < v.conditions[0].ci_high and v.verdict == "inconclusive"


def test_learn_gate_inconclusive_when_all_token_did_not_learn():
    # parity everywhere, but all-token gained less than LEARN_MIN at every rank: says nothing
    v = verdict_of({2: NEAR_ZERO, 8: NEAR_ZERO}, gain=LEARN_MIN / 2)
    assert [c.outcome for c in v.conditions] == ["holds", "holds"] and v.verdict == "inconclusive"
    assert "did not learn" in v.note and v.seeds_to_decide is None
    # even a failed rank is not "not reproduced" without learning
    assert verdict_of({2: [-0.4, -0.41, -0.39, -0.4], 8: NEAR_ZERO}, gain=0.0).verdict == "inconclusive"
    # learning at one rank is enough (the gate is "at every rank")
    assert verdict_of({2: NEAR_ZERO, 8: NEAR_ZERO}, gain={2: 0.0, 8: LEARN_MIN + 0.01}).verdict == "reproduced"
    assert f"all-token's mean gain over its first-step reward is >= {LEARN_MIN}" in v.criterion


def test_looks_are_replayed_and_stop_at_the_first_that_decides():
    wide = [-0.2, 0.1, -0.05, 0.05]  # undecided at 4 seeds, inside the margin at 11
    v = verdict_of({2: wide + [0.0] * 7, 8: NEAR_ZERO * 2 + [0.0] * 3})
    assert [lk.seeds for lk in v.looks] == [4, 11] and [lk.verdict for lk in v.looks] == ["inconclusive", "reproduced"]
    assert v.seeds == 11 and v.verdict == "reproduced"
    decided_early = verdict_of({2: NEAR_ZERO * 2 + [-0.5, -0.5, -0.5], 8: NEAR_ZERO * 2 + [-0.5, -0.5, -0.5]})
    assert [lk.seeds for lk in decided_early.looks] == [4] and decided_early.verdict == "reproduced"
    assert decided_early.seeds == 4  # the later seeds do not override the decision


def test_a_seed_count_off_the_plan_is_exploratory_and_unregistered():
    v = verdict_of({2: NEAR_ZERO + [0.0], 8: NEAR_ZERO + [0.0]})
    assert v.criterion_hash != CLAIM.criterion_hash() and v.registered is None and "EXPLORATORY" in v.note
    assert rl_claim((4, 16)).criterion_hash() != CLAIM.criterion_hash()  # other ranks: another criterion


def test_summary_rows_and_saved_verdict(tmp_path):
    from harness.claims import load_verdicts, save_verdict
    from harness.claims.table import to_markdown

    v = verdict_of({2: NEAR_ZERO, 8: [-0.2, 0.1, -0.05, 0.0]})
    rows = summarise(v, [2, 8])
    assert [r["rank"] for r in rows] == [2, 8] and rows[1]["outcome"] == "undecided" and rows[0]["all_token_gain"] == 0.5
    save_verdict(tmp_path, v)
    [back] = load_verdicts([tmp_path])
    assert back == v and "| preft.rl_parity |" in to_markdown([back])
    assert back.runs["preft"][0] == "preft_r2_s0" and back.cells_s == 16.0


def test_criterion_hashes_are_in_the_log():
    from harness.claims import SeedPlan
    from harness.claims.prereg import load_log, unregistered

    log = load_log(CRITERIA_LOG)
    assert unregistered([CLAIM], log) == []
    current = [e for e in log if e.hash == CLAIM.criterion_hash()]
    assert current and current[0].results_seen != "none" and "40" in current[0].results_seen
    # every seed count the check was looked at before the core (2, 4, 11, 20, 40) has its entry
    past = [rl_claim(plan=SeedPlan(looks=(n,))) for n in (2, 4, 11, 20, 40)]
    assert unregistered(past, log) == []
    assert unregistered([rl_claim(plan=SeedPlan(looks=(4, 11, 20, 40, 80)))], log)  # a new look needs an entry


def test_grouped_batch_rejects_mixed_layout_and_prompt_lengths():
    pm, adapter = tiny()
    import pytest

    with pytest.raises(ValueError, match="G copies of each prompt"):
        sample(pm, [PROMPTS[0], PROMPTS[1]], 2, "preft", adapter, torch.Generator(), 0, group=2)
    with pytest.raises(ValueError, match="share one token length"):
        sample(pm, [PROMPTS[0], [1, 2]], 2, "preft", adapter, torch.Generator(), 0, group=1)


def test_check_reuses_a_kept_run_with_the_same_settings_only(tmp_path):
    import json

    from preft.rl import RlResult
    from preft.rl_check import run_once

    cfg = RlConfig(mode="preft", rank=2, steps=3, seed=1)
    kept = RlResult(config=vars(cfg).copy(), rewards=[0.1, 0.5, 0.9], seconds=4.0)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "preft_r2_s1.json").write_text(json.dumps(vars(kept)))
    # model None: a run that trained instead of reusing would fail
    assert run_once(cfg, tmp_path, None, None, log=lambda s: None).rewards == [0.1, 0.5, 0.9]
    changed = RlConfig(mode="preft", rank=2, steps=3, seed=1, lr=5e-4)
    import pytest

    with pytest.raises(AttributeError):  # other settings: not reused, so it tries to train on model None
        run_once(changed, tmp_path, None, None, log=lambda s: None)


def test_run_check_stops_at_the_first_deciding_look_and_saves_the_verdict(tmp_path, monkeypatch):
    import json

    import harness.providers.local_weights as local_weights
    from harness.claims import load_verdicts
    from preft.rl import RlConfig
    from preft.rl_check import run_check

    monkeypatch.setattr(local_weights, "load_model", lambda: (None, None))  # every run is kept: nothing trains
    (tmp_path / "out" / "runs").mkdir(parents=True)
    for r in rl_runs({2: NEAR_ZERO, 8: NEAR_ZERO}):
        cfg = RlConfig(mode=r.config["mode"], rank=r.config["rank"], seed=r.config["seed"], steps=4)
        r.config = vars(cfg).copy()
        (tmp_path / "out" / "runs" / f"{cfg.mode}_r{cfg.rank}_s{cfg.seed}.json").write_text(json.dumps(vars(r)))
    payload = run_check([2, 8], None, tmp_path / "out", tmp_path / "runs", log=lambda s: None, steps=4)
    assert payload["verdict"] == "reproduced" and payload["criterion_hash"] == CLAIM.criterion_hash()
    assert len(payload["runs"]) == 16  # the first look decided: seeds 4-10 were never trained
    [saved] = load_verdicts([tmp_path / "runs"])
    assert saved.verdict == "reproduced" and saved.seeds == 4 and '"steps": 4' in saved.setting
    assert json.loads((tmp_path / "out" / "rl_check.json").read_text())["rows"][0]["outcome"] == "holds"
