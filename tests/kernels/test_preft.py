"""PreFT: the LoRA and ReFT ops, the engine against peft's natural prefill-only reference, slots."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from preft.adapters import load_adapter, random_reft, save_reft
from preft.engine import Engine, Request
from preft.lora_ops import (adapter_runs, lora_add_gathered_, lora_add_module_runs_, lora_add_runs_,
                                    lora_delta_reference, lora_delta_segmented)
from preft.reft_ops import orthonormal_rows, reft_apply, reft_direct
from preft.store import SlotTable, prefill_slots

PROMPTS = ["The capital of France is", "Once upon a time, in a small village by the sea,", "def fibonacci(n):",
           "Three reasons to learn Python:"]
GEN = 12


# -- ops --------------------------------------------------------------------------------------

@pytest.mark.parametrize("n,d_in,d_out,r,slots", [(17, 16, 24, 4, 3), (40, 576, 192, 8, 5), (1, 8, 8, 2, 1)])
def test_lora_segmented_equals_reference(n, d_in, d_out, r, slots):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, d_in, generator=g)
    A, B = torch.randn(slots, d_in, r, generator=g), torch.randn(slots, r, d_out, generator=g)
    scales = torch.rand(slots, generator=g) + 0.5
    idx = torch.randint(-1, slots, (n,), generator=g)
    ref = lora_delta_reference(x, idx, A, B, scales)
    seg = lora_delta_segmented(x, idx, A, B, scales)
    assert torch.allclose(seg, ref, atol=1e-4, rtol=1e-4)
    assert torch.all(seg[idx < 0] == 0)
    assert torch.all(lora_delta_segmented(x, torch.full((n,), -1), A, B, scales) == 0)
    base = torch.randn(n, d_out, generator=g)
    fused = lora_add_runs_(base.clone(), x, adapter_runs(idx), A, B, scales)
    assert torch.allclose(fused, base + ref, atol=1e-4, rtol=1e-4)


def _runs_of(lengths_and_slots):
    """A flat slot index from (length, slot) pieces, slot -1 = tokens without an adapter."""
    return torch.tensor([slot for n, slot in lengths_and_slots for _ in range(n)], dtype=torch.long)


# (length, slot) pieces of a flat batch: one adapter; 64 prompts over adapters of two ranks, one of
# which skips the projection (gathered, two groups); same-length prompts of one rank side by side
# (the view path, per-adapter and uniform scales); mixed lengths with bare tokens between them;
# one slot in two places; one long prompt among short ones (padding limit: two groups); decode-like
# runs of one token; nothing adapted.
GATHER_LAYOUTS = {
    "one adapter": [(16, 0)],
    "64 runs of 6 adapters": [(16, s % 6) for s in range(64)],
    "32 equal runs side by side, one rank": [(16, (0, 1, 3, 4)[s % 4]) for s in range(32)],
    "two equal runs, one scale": [(16, 1), (16, 3)],
    "mixed lengths and bare tokens": [(3, -1), (16, 0), (5, 1), (1, -1), (16, 2), (9, 3), (2, -1), (12, 4)],
    "same slot twice, apart": [(7, 1), (4, -1), (7, 1), (7, 2)],
    "one long among short": [(64, 0), (4, 1), (4, 2), (5, 3), (3, -1)],
    "decode tokens": [(1, s) for s in (0, 1, -1, 2, 3, 3, -1, 4, 5)],
    "no adapter": [(10, -1)],
}


@pytest.mark.parametrize("layout", list(GATHER_LAYOUTS))
def test_gathered_lora_equals_reference_and_per_run(layout):
    """The batched op over alias slots equals the per-token definition (float tolerance) and the exact
    per-run op, with adapters of two ranks, two scales and one that does not target the projection."""
    g = torch.Generator().manual_seed(len(layout))
    d_in, d_out, slots, r = 48, 40, 6, 16
    ranks = [16, 16, 8, 16, 16, 8]
    key = (0, "q_proj")
    modules: list = []
    A_ref, B_ref, scales_ref = torch.zeros(slots, d_in, r), torch.zeros(slots, r, d_out), torch.zeros(slots)
    for s, rank in enumerate(ranks):
        if s == 5:  # this adapter leaves the projection alone
            modules.append({(1, "q_proj"): (torch.randn(d_in, rank), torch.randn(rank, d_out), 1.0)})
            continue
        A, B, scale = torch.randn(d_in, rank, generator=g), torch.randn(rank, d_out, generator=g), 2.0 if s % 2 else 0.5
        modules.append({key: (A, B, scale)})
        A_ref[s, :, :rank], B_ref[s, :rank], scales_ref[s] = A, B, scale
    idx = _runs_of(GATHER_LAYOUTS[layout])
    x, y = torch.randn(len(idx), d_in, generator=g), torch.randn(len(idx), d_out, generator=g)
    runs = adapter_runs(idx)
    want = y + lora_delta_reference(x, idx, A_ref, B_ref, scales_ref)
    got = lora_add_gathered_(y.clone(), x, runs, modules, key)
    per_run = lora_add_module_runs_(y.clone(), x, runs, modules, key)
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)
    assert torch.allclose(got, per_run, atol=1e-4, rtol=1e-4)
    bare = (idx < 0) | (idx == 5)
    assert torch.equal(got[bare], y[bare])  # tokens without an adapter on this projection are untouched
    if layout != "no adapter":
        assert not torch.allclose(got[~bare], y[~bare])


def test_prefill_slots_rule_and_decode_holds():
    """A prefill step may use max_loras distinct adapters; only alias slots (no copy) may be given
    more. Holds through decoding (all-token) stay capped at max_loras either way."""
    assert prefill_slots(8, None, alias=True) == prefill_slots(8, None, alias=False) == 8
    assert prefill_slots(8, 64, alias=True) == 64 and prefill_slots(8, 4, alias=True) == 8
    with pytest.raises(ValueError, match="alias"):
        prefill_slots(8, 64, alias=False)  # slots that copy weights cost memory
    t = SlotTable(4, decode_slots=2)
    assert t.acquire("a", through_decode=True) == (0, True) and t.acquire("b", through_decode=True) == (1, True)
    assert t.acquire("c", through_decode=True) is None and t.stats.waits == 1  # two held through decoding
    assert t.acquire("c") == (2, True) and t.acquire("d") == (3, True)  # prefill-only holds use the rest
    assert t.acquire("a", through_decode=True) == (0, False)  # its slot already decodes: a hit
    assert t.acquire("c", through_decode=True) is None  # resident, but a third adapter through decoding
    t.release(2)
    t.release(1, through_decode=True)
    assert t.acquire("c", through_decode=True) == (2, False) and t.decode_held() == 2
    with pytest.raises(RuntimeError):
        t.release(3, through_decode=True)  # held, but not through decoding


def test_adapter_runs_are_maximal_same_slot_runs():
    assert adapter_runs(torch.tensor([-1, 2, 2, 0, -1, -1, 0, 0, 3])) == [(1, 3, 2), (3, 4, 0), (6, 8, 0), (8, 9, 3)]
    assert adapter_runs(torch.tensor([-1, -1])) == [] and adapter_runs(torch.tensor([], dtype=torch.long)) == []


def test_lora_segmented_is_differentiable():
    x, A, B = torch.randn(6, 8), torch.randn(1, 8, 2, requires_grad=True), torch.randn(1, 2, 4, requires_grad=True)
    idx = torch.tensor([0, -1, 0, 0, -1, 0])
    lora_delta_segmented(x, idx, A, B, torch.ones(1)).sum().backward()
    assert A.grad is not None and A.grad.abs().sum() > 0 and B.grad.abs().sum() > 0


@pytest.mark.parametrize("kind", ["loreft", "direft"])
def test_reft_batched_equals_direct(kind):
    g = torch.Generator().manual_seed(7)
    d, r, slots = 32, 4, 3
    R = torch.stack([orthonormal_rows(r, d, g) for _ in range(slots)])
    W, b = torch.randn(slots, r, d, generator=g) * 0.1, torch.randn(slots, r, generator=g)
    h = torch.randn(10, d, generator=g)
    idx = torch.tensor([0, 1, -1, 2, 2, -1, 0, 1, 1, -1])
    out = reft_apply(h, idx, kind, R, W, b)
    for t in range(10):
        i = int(idx[t])
        want = h[t] if i < 0 else reft_direct(h[t:t + 1], kind, R[i], W[i], b[i])[0]
        assert torch.allclose(out[t], want, atol=1e-5)
    assert torch.allclose(R[0] @ R[0].T, torch.eye(r), atol=1e-5)
    if kind == "loreft":  # with W = R and b = 0 LoReFT is the identity: a real invariant of the formula
        assert torch.allclose(reft_direct(h, kind, R[0], R[0], torch.zeros(r)), h, atol=1e-5)


# -- slots ------------------------------------------------------------------------------------

def test_slot_table_lru_hits_evictions_and_waits():
    t = SlotTable(2)
    a = t.acquire("a")
    b = t.acquire("b")
    assert a == (0, True) and b == (1, True)
    assert t.acquire("c") is None and t.stats.waits == 1  # both held
    t.release(0)
    assert t.acquire("a") == (0, False)  # still resident: a hit, no load
    t.release(0)
    t.release(1)
    # b (slot 1) was used less recently than a (slot 0): c evicts b
    assert t.acquire("c") == (1, True) and t.stats.evictions == 1 and "b" not in t.resident
    with pytest.raises(RuntimeError):
        t.release(0)


# -- engine against peft ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def base():
    from harness.providers.embedded import load_model

    return load_model()


@pytest.fixture(scope="module")
def peft_adapters(tmp_path_factory, base):
    """Two seeded random LoRA adapters written by peft itself: all seven projections at rank 8, and
    attention-only at rank 4 (B random, so the adapters change the outputs)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from harness.providers.embedded import ensure_converted

    out = {}
    for name, rank, targets in (("all7", 8, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]),
                                ("attn", 4, ["q_proj", "v_proj"])):
        torch.manual_seed({"all7": 1, "attn": 2}[name])
        fresh = AutoModelForCausalLM.from_pretrained(str(ensure_converted()), dtype=torch.float32)
        model = get_peft_model(fresh, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets,
                                                 init_lora_weights=False, lora_dropout=0.0))
        with torch.no_grad():  # peft's random init of B is tiny; make the adapter matter
            for n, p in model.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.05)
        path = tmp_path_factory.mktemp("adapters") / name
        model.save_pretrained(str(path))
        out[name] = path
    return out


@pytest.fixture(scope="module")
def peft_models(peft_adapters):
    from preft.reference import load_peft

    return {name: load_peft(path) for name, path in peft_adapters.items()}


def _ids(tokenizer, prompt):
    return list(tokenizer(prompt)["input_ids"])


@pytest.mark.slow
def test_mixed_batch_equals_peft_prefill_only_and_all_token(base, peft_adapters, peft_models):
    from harness.providers.embedded import stop_token_ids
    from preft.reference import all_token_greedy, prefill_only_greedy

    model, tok = base
    stops = stop_token_ids(model, tok)
    engine = Engine(model, max_loras=3, keep_logits=True)
    for name, path in peft_adapters.items():
        engine.register(load_adapter(path, name=name))
    plan = [(PROMPTS[0], "all7", "preft"), (PROMPTS[1], None, "base"), (PROMPTS[2], "attn", "preft"),
            (PROMPTS[3], "all7", "preft"), (PROMPTS[1], "attn", "preft"), (PROMPTS[0], "all7", "all-token"),
            (PROMPTS[2], "attn", "all-token")]
    reqs = [Request(_ids(tok, p), GEN, adapter=a, mode=m, stop_ids=stops) for p, a, m in plan]
    engine.run(reqs)  # one mixed batch: every request is admitted on the first step
    assert engine.stats.max_running == len(reqs)
    worst = 0.0
    for (prompt, name, mode), req in zip(plan, reqs):
        ids = _ids(tok, prompt)
        if mode == "base":
            want = model.generate(torch.tensor([ids]), max_new_tokens=GEN, do_sample=False,
                                  eos_token_id=sorted(stops), pad_token_id=0)[0, len(ids):].tolist()
        elif mode == "preft":
            want, logits = prefill_only_greedy(peft_models[name], ids, GEN, stops)
            worst = max(worst, max(float((a - b).abs().max()) for a, b in zip(req.logits, logits)))
        else:
            want = all_token_greedy(peft_models[name], ids, GEN, stops)
        assert req.output_ids == want, (prompt, name, mode)
    assert worst < 1e-3  # the stated logit tolerance (fp32; observed ~4e-5)
    # the adapters matter: prefill-only differs from both the bare model and from all-token somewhere
    bare = Engine(model).run([Request(_ids(tok, p), GEN, stop_ids=stops) for p, _, _ in plan])
    assert any(r.output_ids != b.output_ids for r, b in zip(reqs, bare) if r.mode != "base")
    assert reqs[0].output_ids != reqs[5].output_ids or reqs[2].output_ids != reqs[6].output_ids


@pytest.mark.slow
def test_reft_prefill_only_equals_hooked_hf_model(base, tmp_path):
    """ReFT in the engine equals a direct implementation: forward hooks on the HF decoder layers
    that apply the intervention at the chosen prompt positions during prefill, none in decode."""
    model, tok = base
    engine = Engine(model, keep_logits=True)
    adapters = [random_reft(model.config, 4, seed=s, kind=k, layers=(2, 9, 20), first_n=2, last_m=2, name=f"{k}{s}")
                for s, k in ((1, "loreft"), (2, "direft"))]
    for a in adapters:
        engine.register(load_adapter(save_reft(a, tmp_path / a.name)))
    reqs = [Request(_ids(tok, PROMPTS[i]), 8, adapter=a.name, mode="preft") for i, a in enumerate(adapters)]
    reqs.append(Request(_ids(tok, PROMPTS[2]), 8))
    engine.run(reqs)
    for req, adapter in zip(reqs, adapters):
        ids = req.prompt_ids
        positions = adapter.positions(len(ids))
        hooks = []
        for layer, (R, W, b) in adapter.layers.items():
            def hook(_module, _inputs, output, R=R, W=W, b=b, positions=positions, adapter=adapter):
                h = output[0] if isinstance(output, tuple) else output
                h = h.clone()
                h[0, positions] = reft_direct(h[0, positions], adapter.kind, R, W, b)
                return (h, *output[1:]) if isinstance(output, tuple) else h
            hooks.append(model.model.layers[layer].register_forward_hook(hook))
        try:
            with torch.inference_mode():
                out = model(input_ids=torch.tensor([ids]), use_cache=True)
        finally:
            for h in hooks:
                h.remove()
        first_logits = out.logits[0, -1].float()
        cache, tokens = out.past_key_values, [int(first_logits.argmax())]
        with torch.inference_mode():
            while len(tokens) < 8:
                out = model(input_ids=torch.tensor([[tokens[-1]]]), past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                tokens.append(int(out.logits[0, -1].argmax()))
        assert req.output_ids == tokens
        assert float((req.logits[0] - first_logits).abs().max()) < 1e-3
    assert reqs[0].output_ids != Engine(model).run([Request(reqs[0].prompt_ids, 8)])[0].output_ids


@pytest.mark.slow
@pytest.mark.parametrize("prefill", [None, 4])
def test_slot_pressure_all_token_waits_preft_releases(base, prefill):
    from preft.adapters import random_lora

    model, tok = base
    ids = _ids(tok, PROMPTS[0])
    results = {}
    for mode in ("all-token", "preft"):
        engine = Engine(model, max_loras=2, max_lora_rank=4, max_prefill_loras=prefill)  # alias slots (CPU)
        for i in range(4):
            engine.register(random_lora(model.config, 4, seed=i, name=f"a{i}", targets=("q_proj",)))
        reqs = [Request(ids, 6, adapter=f"a{i}", mode=mode) for i in range(4)]
        for r in reqs:
            engine.add(r)
        engine.step()
        held_after_first_step = engine.loras.table.held()
        while engine.has_work():
            engine.step()
        results[mode] = (held_after_first_step, engine.stats, engine.loras.table.stats, reqs)
    held, stats, slots, reqs = results["all-token"]
    assert held == 2 and stats.slot_waits > 0 and stats.max_running == 2  # two slots bound concurrency
    assert all(len(r.output_ids) == 6 for r in reqs)
    # 2 slots in all: the 3rd and 4th adapter evict; given 4 prefill slots, nothing is evicted
    if prefill:
        assert slots.evictions == 0 and slots.loads == 4
    else:
        assert slots.evictions >= 2
    held, stats, slots, reqs = results["preft"]
    assert held == 0  # prefilled requests gave their slots back at once
    assert stats.max_running == 4 and all(len(r.output_ids) == 6 for r in reqs)
    # one prefill step for 4 adapters given 4 prefill slots; 2 steps of 2 with 2
    assert stats.slot_waits == (0 if prefill else 1)


@pytest.mark.slow
def test_continuous_batching_admits_mid_flight(base):
    model, tok = base
    engine = Engine(model)
    long = engine.add(Request(_ids(tok, PROMPTS[1]), 16))
    for _ in range(3):
        engine.step()
    short = engine.add(Request(_ids(tok, PROMPTS[0]), 4))
    while engine.has_work():
        engine.step()
    assert short.finished_at < long.finished_at and engine.stats.max_running == 2
    alone = Engine(model).run([Request(_ids(tok, PROMPTS[1]), 16), Request(_ids(tok, PROMPTS[0]), 4)])
    assert long.output_ids == alone[0].output_ids and short.output_ids == alone[1].output_ids


# -- the command line and the provider --------------------------------------------------------

def _generate_cli(*args):
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "generate", *args], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_generate_cli_matches_peft_reference(base, peft_adapters, peft_models):
    from harness.providers.embedded import stop_token_ids
    from preft.reference import all_token_greedy, prefill_only_greedy

    model, tok = base
    stops = stop_token_ids(model, tok)
    prompt, path = PROMPTS[3], peft_adapters["all7"]
    got = _generate_cli("--model", "local/smollm2-135m", "--adapter", str(path), "--adapter-mode", "preft",
                        "--prompt", prompt, "--max-tokens", "20", "--json")
    ids = _ids(tok, prompt)
    assert got["prompt_token_ids"] == ids
    assert got["token_ids"] == prefill_only_greedy(peft_models["all7"], ids, 20, stops)[0]
    assert got["usage"] == {"prompt_tokens": len(ids), "completion_tokens": len(got["token_ids"])}
    got = _generate_cli("--adapter", str(path), "--adapter-mode", "all-token", "--prompt", prompt,
                        "--max-tokens", "20", "--json")
    assert got["token_ids"] == all_token_greedy(peft_models["all7"], ids, 20, stops)


def test_generate_cli_bad_adapter_is_one_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "generate", "--adapter", str(tmp_path / "empty"),
                           "--prompt", "hi"], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "not an adapter directory" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_adapter_provider_serves_through_harness(base, peft_adapters, peft_models):
    import asyncio

    from harness.providers import GenerateConfig, load_model
    from harness.providers.embedded import as_id_list, stop_token_ids
    from harness.spec import ModelSpec
    from preft.reference import prefill_only_greedy

    model, tok = base
    path = peft_adapters["attn"]
    provider = load_model(ModelSpec.parse(f"local/smollm2-135m@{path}"))
    messages = [{"role": "user", "content": "Name a colour."}]
    out = asyncio.run(provider.generate(messages, GenerateConfig(max_tokens=10)))
    ids = as_id_list(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True))
    want, _ = prefill_only_greedy(peft_models["attn"], ids, 10, stop_token_ids(model, tok))
    shown = want[:-1] if want[-1] in stop_token_ids(model, tok) else want
    assert out.text == tok.decode(shown, skip_special_tokens=True)
    assert out.usage.completion_tokens == len(want) and out.usage.prompt_tokens == len(ids)
    bare = load_model(ModelSpec.parse("local/smollm2-135m"))
    assert out.request_hash != asyncio.run(bare.generate(messages, GenerateConfig(max_tokens=10))).request_hash
    from harness.errors import HarnessError

    with pytest.raises(HarnessError, match="does not exist"):
        load_model(ModelSpec.parse("local/smollm2-135m@/no/such/dir"))
    with pytest.raises(HarnessError, match="#preft or #all-token"):
        load_model(ModelSpec.parse(f"local/smollm2-135m@{path}#sometimes"))


@pytest.mark.slow
def test_cancelled_requests_leave_the_batch(base):
    model, tok = base
    engine = Engine(model, max_num_seqs=1)
    running = engine.add(Request(_ids(tok, PROMPTS[1]), 50))
    queued = engine.add(Request(_ids(tok, PROMPTS[0]), 50))
    engine.step()
    queued.cancelled = running.cancelled = True  # e.g. two callers timed out
    finished = []
    while engine.has_work():
        finished += engine.step()
    assert {r.id for r in finished} == {running.id, queued.id}
    assert running.finish_reason == queued.finish_reason == "cancelled"
    assert len(running.output_ids) == 2 and queued.output_ids == []


def test_full_slots_refuse_the_rest_of_the_queue_but_admit_resident_and_other_kind():
    """Once every LoRA slot is held in a step, only requests whose adapter is resident (or that need
    a ReFT slot) are admitted; each refusal is still counted; every request still finishes."""
    from preft.adapters import random_lora, random_reft
    from preft.random_llama import build_random_llama

    model = build_random_llama("tiny", seed=0)
    engine = Engine(model, max_loras=2, max_lora_rank=4, max_refts=1)
    for i in range(4):
        engine.register(random_lora(model.config, 4, seed=i, name=f"a{i}", targets=("q_proj",)))
    engine.register(random_reft(model.config, 2, seed=9, name="r0", layers=(0,)))
    names = ["a0", "a1", "a2", "a3", "r0", "a0", "a1"]
    reqs = [engine.add(Request([5, 6, 7, 8], 3, adapter=n, mode="all-token")) for n in names]
    engine.step()
    admitted = [n for n, r in zip(names, reqs) if r.output_ids]
    assert admitted == ["a0", "a1", "r0", "a0", "a1"]
    assert engine.loras.table.stats.waits == 2 and engine.loras.table.stats.hits == 2
    while engine.has_work():
        engine.step()
    assert all(len(r.output_ids) == 3 for r in reqs)


def test_alias_slots_prefill_every_adapter_in_one_step_with_the_same_logits():
    """CPU alias slots given 8 prefill slots: 8 prefill-only requests of 8 adapters prefill in one
    step (2 slots, alias by default or copying: 2 per step), all-token still runs at most 2 adapters
    at a time, and the gathered op gives the logits of the copying store's per-run op; so does the
    default per-run alias path."""
    from preft.adapters import random_lora
    from preft.random_llama import build_random_llama

    model = build_random_llama("tiny", seed=0)
    prompts = [[5 + i, 6, 7 + i, 8, 9] + [10 + i] * (i % 3) for i in range(8)]  # two lengths, side by side or not

    def serve(mode, alias, gather=False, prefill=None):
        engine = Engine(model, max_num_seqs=8, max_loras=2, max_lora_rank=8, lora_alias=alias, keep_logits=True,
                        max_prefill_loras=prefill)
        engine.loras.weights.gather = gather
        for i in range(8):
            engine.register(random_lora(model.config, 8 if i % 2 else 4, seed=i, name=f"a{i}", std=0.5))
        reqs = [engine.add(Request(list(p), 3, adapter=f"a{i}", mode=mode)) for i, p in enumerate(prompts)]
        engine.step()
        first = sum(1 for r in reqs if r.output_ids)
        while engine.has_work():
            engine.step()
        return engine, reqs, first

    alias, alias_reqs, alias_first = serve("preft", alias=True, gather=True, prefill=8)
    copy, copy_reqs, copy_first = serve("preft", alias=False)
    per_run, per_run_reqs, per_run_first = serve("preft", alias=True)
    assert alias.loras.table.slots == 8 and copy.loras.table.slots == per_run.loras.table.slots == 2
    assert alias_first == 8 and copy_first == per_run_first == 2
    assert alias.stats.steps == 3 and copy.stats.steps > alias.stats.steps
    for a, c, p in zip(alias_reqs, copy_reqs, per_run_reqs):
        assert a.output_ids == c.output_ids == p.output_ids
        for la, lc, lp in zip(a.logits, c.logits, p.logits):
            assert float((la - lc).abs().max()) < 1e-4 and float((la - lp).abs().max()) < 1e-4
    assert float((alias_reqs[0].logits[0] - Engine(model, keep_logits=True).run(
        [Request(list(prompts[0]), 3)])[0].logits[0]).abs().max()) > 1e-3  # the adapters change the output
    all_token, at_reqs, at_first = serve("all-token", alias=True, prefill=8)
    assert at_first == 2 and all_token.stats.max_running_adapters == 2
    assert all(len(r.output_ids) == 3 for r in at_reqs)


def test_admission_groups_the_requests_of_one_adapter(monkeypatch):
    """Waiting requests are admitted first come, first served, except that an adapter's later
    requests follow its first one: with room for two sequences and the queue a0 a1 a2 a0 a1 a2,
    each adapter is loaded once (first come, first served reloads evicted adapters); requests
    without an adapter keep their place; every request's tokens equal those it gets alone."""
    import preft.engine as engine_module
    from preft.adapters import random_lora
    from preft.random_llama import build_random_llama

    base = Request([1], 1)
    a, b = Request([1], 1, adapter="a"), Request([1], 1, adapter="b")
    a2, b2 = Request([2], 1, adapter="a"), Request([2], 1, adapter="b")
    assert engine_module._grouped_by_adapter([a, base, b, a2, b2]) == [a, a2, base, b, b2]

    model = build_random_llama("tiny", seed=0)
    names = ["a0", "a1", "a2", "a0", "a1", "a2"]

    def serve():
        engine = Engine(model, max_num_seqs=2, max_loras=2, max_lora_rank=4)
        for i in range(3):
            engine.register(random_lora(model.config, 4, seed=i, name=f"a{i}", std=0.5))
        reqs = [engine.add(Request([5 + i, 6, 7, 8 + i], 3, adapter=n)) for i, n in enumerate(names)]
        engine.step()
        first = [n for n, r in zip(names, reqs) if r.output_ids]
        while engine.has_work():
            engine.step()
        return engine, reqs, first

    engine, reqs, first = serve()
    assert first == ["a0", "a0"] and engine.loras.table.stats.loads == 3
    for r in reqs:
        alone = Engine(model, max_lora_rank=4)
        alone.register(random_lora(model.config, 4, seed=int(r.adapter[1:]), name=r.adapter, std=0.5))
        assert alone.run([Request(list(r.prompt_ids), 3, adapter=r.adapter)])[0].output_ids == r.output_ids
    monkeypatch.setattr(engine_module, "_grouped_by_adapter", list)  # first come, first served
    fifo, _, fifo_first = serve()
    assert fifo_first == ["a0", "a1"] and fifo.loras.table.stats.loads > 3


def test_reserve_kv_sizes_the_pool_within_the_budget():
    """`reserve_kv` grows the pool before serving (rows capped at max_num_seqs), refuses a size over
    the KV budget with one clear error, and the pool still grows on demand past the reservation."""
    from preft.random_llama import build_random_llama

    model = build_random_llama("tiny", seed=0)
    engine = Engine(model, max_num_seqs=4)
    engine.reserve_kv(8, 20)
    assert (engine.pool.rows, engine.pool.capacity) == (4, 64)
    long = engine.run([Request(list(range(5, 75)), 4)])[0]  # 74 positions > 64: the pool grows
    assert engine.pool.capacity >= 74 and long.output_ids == Engine(model).run([Request(list(range(5, 75)), 4)])[0].output_ids
    small = Engine(model, kv_cache_bytes=1 << 16)
    with pytest.raises(ValueError, match="kv_cache_bytes"):
        small.reserve_kv(4, 1000)
    assert small.pool.rows == 1  # nothing was allocated by the refused reservation
