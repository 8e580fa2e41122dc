"""The PreFT vLLM plugin on vLLM's CPU build (marker `vllm`; `make test-vllm`, in `.venv-vllm`).

One engine for the module: three peft LoRA adapters, `max_loras=2` (fewer slots than adapters, so
every slot is full and no-adapter tokens sit next to adapter tokens), a small token budget so long
prompts are chunked, and the plugin's flag. Requests choose prefill-only (the engine default) or
all-token per request. The local PreFT engine's and peft's outputs are computed before vLLM starts
(two torch processes on this 2-core machine would slow each other down many times).
"""

from __future__ import annotations

import asyncio
import gc
import time
import uuid

import numpy as np
import pytest
import torch

from preft.vllm_provider import vllm_available
from preft.vllm_plugin import sampled_lora_ids, token_lora_ids

pytestmark = pytest.mark.vllm
needs_vllm = pytest.mark.skipif(not vllm_available(), reason="vllm not installed: `make vllm-install; make test-vllm`")

GEN = 12
PROMPTS = ["The capital of France is", "Once upon a time", "def add(a, b):", "The best fruit is"]
TARGETS = {"all7": (8, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], 1),
           "attn": (4, ["q_proj", "v_proj"], 2), "mlp": (8, ["gate_proj", "down_proj"], 3)}
LORA_ID = {name: i + 1 for i, name in enumerate(TARGETS)}
# ReFT folders: (kind, rank, layers, seed); first 3 and last 3 prompt positions (random_reft's default)
REFTS = {"loreft": ("loreft", 4, (2, 10, 20), 7), "direft": ("direft", 4, (5, 29), 8)}
LOCAL_MODE = {"prefill-only": "preft", "all-token": "all-token", None: "base"}
TOKEN_BUDGET = 128  # max_num_batched_tokens: a 300-token prompt is prefilled in three chunks
# (prompt, adapter, mode): one mixed batch of base, prefill-only and all-token requests
PLAN = [(PROMPTS[0], "all7", "prefill-only"), (PROMPTS[1], None, None), (PROMPTS[2], "attn", "prefill-only"),
        (PROMPTS[3], "all7", "all-token"), (PROMPTS[1], "attn", "prefill-only"), (PROMPTS[2], "mlp", "prefill-only"),
        (PROMPTS[0], "mlp", "all-token")]
# ReFT requests batched with a LoRA request and a bare one
REFT_PLAN = [(PROMPTS[0], "loreft", "prefill-only"), (PROMPTS[2], "direft", "prefill-only"),
             (PROMPTS[3], "loreft", "all-token"), (PROMPTS[1], "all7", "prefill-only"), (PROMPTS[1], None, None),
             (PROMPTS[2], "loreft", "prefill-only")]


# -- the token map, without an engine ----------------------------------------------------------

def test_token_map_gives_the_adapter_to_prompt_positions_only():
    # requests: fresh prefill (5 prompt tokens), the last chunk of a chunked prefill (positions
    # 6..9 of a 8-token prompt: two prompt, two... none: a chunk never passes its prompt, but a
    # preempted request's recompute does), a decode step, and an all-token decode step
    req_lora = np.array([1, 2, 3, 4])
    start = np.array([0, 6, 20, 20])
    prompt = np.array([5, 8, 10, 10])
    scheduled = np.array([5, 4, 1, 1])
    all_token = np.array([False, False, False, True])
    tokens = token_lora_ids(req_lora, start, prompt, scheduled, ~all_token)
    assert tokens.tolist() == [1, 1, 1, 1, 1, 2, 2, 0, 0, 0, 4]
    sampled = sampled_lora_ids(req_lora, start, prompt, scheduled, np.ones(4, dtype=np.int64), ~all_token)
    assert sampled.tolist() == [1, 0, 0, 4]  # the logits row of the last prompt token keeps its adapter
    only_decode = token_lora_ids(req_lora[2:3], start[2:3], prompt[2:3], scheduled[2:3], np.array([True]))
    assert not only_decode.any()  # a decode-only step maps every token to "no adapter"


@needs_vllm
def test_cpu_lora_ops_give_no_adapter_tokens_exactly_zero():
    """vLLM's torch ops read slot -1 as the last slot (upstream PR #48421); the plugin's ops compute
    only tokens with a slot, and agree with the stock ops on those."""
    from vllm.lora.ops import torch_ops as stock

    from preft import vllm_plugin as ours

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(7, 16, generator=gen)
    a = torch.randn(3, 1, 4, 16, generator=gen)  # (slots, 1, rank, in)
    b = torch.randn(3, 1, 24, 4, generator=gen)  # (slots, 1, out, rank)
    slots = torch.tensor([0, 0, -1, 2, 2, -1, 1])
    shrunk_stock, shrunk = torch.zeros(7, 4), torch.zeros(7, 4)
    stock.bgmv_shrink(x, a, shrunk_stock, slots, 0.5)
    ours.bgmv_shrink(x, a, shrunk, slots, 0.5)
    with_slot = slots >= 0
    assert torch.allclose(shrunk[with_slot], shrunk_stock[with_slot], atol=1e-5)
    assert not shrunk[~with_slot].any()
    assert torch.allclose(shrunk_stock[2], 0.5 * a[-1, 0] @ x[2], atol=1e-5)  # the upstream bug itself
    y_stock, y = torch.ones(7, 24), torch.ones(7, 24)
    stock.bgmv_expand(shrunk, b, y_stock, slots, True)
    ours.bgmv_expand(shrunk, b, y, slots, True)
    assert torch.allclose(y, y_stock, atol=1e-5)  # zero inputs: both add nothing to no-adapter rows
    seg = torch.zeros(7, 30)
    ours.sgmv_expand_slice(shrunk, b, seg, torch.tensor([0, 2, 3, 5, 6]), torch.tensor([2, 1, 2, 1, 1]),
                           torch.tensor([0, -1, 2, -1, 1]), 5, 2, 7, 3, 24, False)
    assert torch.allclose(seg[:, 3:27], y - 1, atol=1e-5) and not seg[:, :3].any() and not seg[:, 27:].any()


# -- one engine --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    """Three seeded random LoRA adapters written by peft (B random, so they change the outputs)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from harness.providers.embedded import ensure_converted

    root = tmp_path_factory.mktemp("vllm_adapters")
    out = {}
    for name, (rank, targets, seed) in TARGETS.items():
        torch.manual_seed(seed)
        fresh = AutoModelForCausalLM.from_pretrained(str(ensure_converted()), dtype=torch.float32)
        model = get_peft_model(fresh, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets,
                                                 init_lora_weights=False, lora_dropout=0.0))
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.05)
        model.save_pretrained(str(root / name))
        out[name] = root / name
    from preft.adapters import random_reft, save_reft

    for name, (kind, rank, layers, seed) in REFTS.items():
        out[name] = save_reft(random_reft(fresh.config, rank, seed, kind=kind, layers=layers, name=name), root / name)
    return out


def _long_prompt_ids(tokenizer) -> list[int]:
    text = " ".join(f"Item {i} is a {['red', 'green', 'blue'][i % 3]} box." for i in range(40))
    return list(tokenizer(text + " The last item is")["input_ids"])[:300]


@pytest.fixture(scope="module")
def expected(adapters):
    """Greedy outputs of the local PreFT engine for PLAN and the chunked long prompt, and peft's
    all-token reference, computed before vLLM starts."""
    from harness.providers.embedded import load_model
    from preft.adapters import load_adapter
    from preft.engine import Engine, Request
    from preft.reference import all_token_greedy, load_peft

    model, tok = load_model()
    engine = Engine(model, max_loras=3)
    for name, path in adapters.items():
        engine.register(load_adapter(path, name=name))
    ids = [list(tok(p)["input_ids"]) for p, _, _ in PLAN]
    reqs = [Request(i, GEN, adapter=a, mode=LOCAL_MODE[m]) for i, (_, a, m) in zip(ids, PLAN)]
    long_ids = _long_prompt_ids(tok)
    long_reqs = [Request(list(long_ids), GEN, adapter="all7", mode="preft"),
                 Request(list(long_ids), GEN, adapter="attn", mode="all-token")]
    reft_ids = [list(tok(p)["input_ids"]) for p, _, _ in REFT_PLAN]
    reft_reqs = [Request(i, GEN, adapter=a, mode=LOCAL_MODE[m]) for i, (_, a, m) in zip(reft_ids, REFT_PLAN)]
    engine.run(reqs + long_reqs + reft_reqs)
    bare = Engine(model).run([Request(list(i), GEN) for i in reft_ids])
    peft_all7 = load_peft(adapters["all7"])
    peft_ref = all_token_greedy(peft_all7, ids[3], GEN, frozenset())
    del peft_all7
    return {"dirs": adapters, "ids": ids, "plan": [r.output_ids for r in reqs], "long_ids": long_ids,
            "long": [r.output_ids for r in long_reqs], "peft_all_token": peft_ref,
            "reft_ids": reft_ids, "reft": [r.output_ids for r in reft_reqs], "reft_bare": [r.output_ids for r in bare]}


@pytest.fixture(scope="module")
def engine(expected, loop):
    from vllm.v1.engine.async_llm import AsyncLLM

    from preft.vllm_provider import engine_args, preft_engine_kwargs, resolve_model

    kwargs = preft_engine_kwargs(max_rank=8, max_loras=2, reft={name: str(expected["dirs"][name]) for name in REFTS})
    llm = AsyncLLM.from_engine_args(engine_args(resolve_model("smollm2-135m"), max_model_len=2048,
                                                max_num_batched_tokens=TOKEN_BUDGET, **kwargs))
    yield llm
    llm.shutdown()
    # shutdown() cancels the output-handler task on `loop`: let it finish, then finalise the engine
    # now, not at interpreter exit when vLLM's globals are gone (its __del__ would fail there)
    del llm
    loop.run_until_complete(asyncio.sleep(0.05))
    gc.collect()


async def _generate(llm, ids, adapters, name, mode, max_tokens=GEN, finished=None):
    from vllm import SamplingParams
    from vllm.lora.request import LoRARequest

    extra = {"preft_mode": mode} if mode else None
    if name in REFTS:
        extra["reft"] = name
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True, extra_args=extra)
    lora = LoRARequest(name, LORA_ID[name], str(adapters[name])) if name in LORA_ID else None
    final = None
    async for out in llm.generate({"prompt_token_ids": ids}, params, request_id=uuid.uuid4().hex, lora_request=lora):
        final = out
    if finished is not None:
        finished[name] = time.monotonic()
    return list(final.outputs[0].token_ids)


def _stats(llm, loop, reset=False):
    return loop.run_until_complete(llm.collective_rpc("preft_stats", args=(reset,)))[0]


@needs_vllm
def test_mixed_batch_equals_the_local_engine_and_peft(engine, expected, adapters, loop):
    _stats(engine, loop, reset=True)

    async def batch():
        return await asyncio.gather(*[_generate(engine, ids, adapters, a, m)
                                      for ids, (_, a, m) in zip(expected["ids"], PLAN)])

    got = loop.run_until_complete(batch())
    for item, g, want in zip(PLAN, got, expected["plan"]):
        assert g == want, item
    assert got[3] == expected["peft_all_token"]  # all-token vLLM LoRA equals peft
    # prefill-only is not all-token: for some prompt and adapter the continuation differs
    pairs = [(ids, a) for ids, (_, a, m) in zip(expected["ids"], PLAN) if m == "prefill-only"]

    async def as_all_token():
        return await asyncio.gather(*[_generate(engine, ids, adapters, a, "all-token") for ids, a in pairs])

    prefill_only = [g for g, (_, _, m) in zip(got, PLAN) if m == "prefill-only"]
    assert prefill_only != loop.run_until_complete(as_all_token())
    stats = _stats(engine, loop)
    assert 0 < stats["max_active_adapters"] <= 2  # three adapters in the batch, two slots


@needs_vllm
def test_reft_at_prompt_positions_equals_the_local_engine(engine, expected, adapters, loop):
    """LoReFT and DiReFT through the plugin's decoder-layer hooks, prefill-only (first 3 / last 3
    prompt positions) and all-token, in one batch with a LoRA request and a bare one."""
    _stats(engine, loop, reset=True)

    async def batch():
        return await asyncio.gather(*[_generate(engine, ids, adapters, a, m)
                                      for ids, (_, a, m) in zip(expected["reft_ids"], REFT_PLAN)])

    got = loop.run_until_complete(batch())
    for item, g, want in zip(REFT_PLAN, got, expected["reft"]):
        assert g == want, item
    changed = [g != bare for g, bare, (_, a, _) in zip(got, expected["reft_bare"], REFT_PLAN) if a in REFTS]
    assert any(changed)  # the interventions change the continuation
    stats = _stats(engine, loop)
    lengths = [len(ids) for ids, (_, a, m) in zip(expected["reft_ids"], REFT_PLAN) if a in REFTS and m == "prefill-only"]
    all_token = [len(ids) + GEN - 1 for ids, (_, a, m) in zip(expected["reft_ids"], REFT_PLAN) if m == "all-token"]
    assert stats["reft_tokens"] == sum(min(n, 6) for n in lengths) + sum(all_token)


@needs_vllm
def test_chunked_prefill_keeps_the_adapter_on_every_prompt_chunk(engine, expected, adapters, loop):
    long_ids = expected["long_ids"]
    assert len(long_ids) > 2 * TOKEN_BUDGET

    async def both():
        return await asyncio.gather(_generate(engine, long_ids, adapters, "all7", "prefill-only"),
                                    _generate(engine, long_ids, adapters, "attn", "all-token"))

    assert loop.run_until_complete(both()) == expected["long"]


@needs_vllm
def test_decoding_requests_hold_no_adapter_slot(engine, adapters, loop, expected):
    """Two slots, three adapters. Prefill-only: a third adapter's short request runs while the two
    long ones decode, so it finishes first. All-token: it waits for a slot until a long one ends."""
    ids = expected["ids"]

    def finish_order(mode):
        finished: dict = {}

        async def run():
            long = [asyncio.create_task(_generate(engine, ids[0], adapters, name, mode, 48, finished))
                    for name in ("all7", "attn")]
            await asyncio.sleep(0.5)  # both long requests are admitted (and prefilled) first
            await _generate(engine, ids[2], adapters, "mlp", mode, 2, finished)
            await asyncio.gather(*long)

        _stats(engine, loop, reset=True)
        loop.run_until_complete(run())
        return finished, _stats(engine, loop)

    finished, stats = finish_order("prefill-only")
    assert finished["mlp"] < min(finished["all7"], finished["attn"])
    assert stats["max_active_adapters"] <= 2
    # decode steps of prefill-only requests map no token to an adapter
    assert stats["steps_without_adapter"] >= 40
    finished, stats = finish_order("all-token")
    assert finished["mlp"] > min(finished["all7"], finished["attn"])
    assert stats["steps_without_adapter"] == 0


@needs_vllm
def test_adapter_spec_serves_prefill_only_like_the_local_provider(adapters, loop, expected):
    """`vllm/smollm2-135m@DIR` (prefill-only LoRA), `#all-token`, and a ReFT folder through the harness
    provider give the embedded engine's text for the same `local/...` specs."""
    from harness.providers import GenerateConfig, load_model
    from harness.spec import ModelSpec

    question = [{"role": "user", "content": "Write one sentence about the sea."}]
    config = GenerateConfig(max_tokens=16)
    specs = [f"smollm2-135m@{adapters['all7']}", f"smollm2-135m@{adapters['all7']}#all-token",
             f"smollm2-135m@{adapters['loreft']}"]
    want = [asyncio.run(load_model(ModelSpec.parse(f"local/{s}")).generate(question, config)) for s in specs]
    for spec, w in zip(specs, want):
        model = load_model(ModelSpec.parse(f"vllm/{spec}"))
        try:
            got = loop.run_until_complete(model.generate(question, config))
        finally:
            loop.run_until_complete(model.aclose())
        assert got.text == w.text, spec
        assert got.usage.prompt_tokens == w.usage.prompt_tokens
    assert want[0].text != want[1].text  # the two modes really differ on this prompt


def test_vllm_adapter_spec_errors_name_the_input(tmp_path):
    from harness.errors import HarnessError
    from preft.vllm_provider import adapter_kind, lora_rank

    with pytest.raises(HarnessError, match="vllm/smollm2-135m@x: .* holds neither adapter_config.json"):
        adapter_kind(tmp_path, "vllm/smollm2-135m@x")
    (tmp_path / "reft_config.json").write_text("{}")
    assert adapter_kind(tmp_path) == "reft"
    with pytest.raises(HarnessError, match="no adapter_config.json"):
        lora_rank(tmp_path, "vllm/smollm2-135m@x")
    (tmp_path / "adapter_config.json").write_text('{"r": "eight"}')
    with pytest.raises(HarnessError, match="no integer rank"):
        lora_rank(tmp_path)


# -- the extension points and the version guard, without an engine ------------------------------

@needs_vllm
def test_engine_kwargs_name_the_scheduler_and_worker_extension_vllm_resolves():
    from vllm.config import SchedulerConfig
    from vllm.utils.import_utils import resolve_obj_by_qualname

    from preft.vllm_provider import preft_engine_kwargs
    from preft.vllm_scheduler import PreftAsyncScheduler, PreftScheduler

    kwargs = preft_engine_kwargs(max_rank=8, max_loras=2)
    assert resolve_obj_by_qualname(kwargs["worker_extension_cls"]).preft_stats
    scheduler = SchedulerConfig.default_factory(scheduler_cls=kwargs["scheduler_cls"]).get_scheduler_cls()
    assert scheduler is PreftScheduler
    # the class picks vLLM's async scheduler where the resolved config asks for it (vLLM resolves
    # async_scheduling before it builds the scheduler); __new__ only, no engine behind it
    from types import SimpleNamespace

    from vllm.v1.core.sched.async_scheduler import AsyncScheduler

    def built(async_scheduling):
        config = SimpleNamespace(scheduler_config=SimpleNamespace(async_scheduling=async_scheduling))
        return type(PreftScheduler.__new__(PreftScheduler, vllm_config=config))

    assert built(True) is PreftAsyncScheduler and issubclass(PreftAsyncScheduler, AsyncScheduler)
    assert built(False) is PreftScheduler and not issubclass(PreftScheduler, AsyncScheduler)


@needs_vllm
def test_patches_are_guarded_by_the_signatures_they_were_written_for(monkeypatch):
    from vllm.v1.worker.lora_model_runner_mixin import LoRAModelRunnerMixin

    from preft import vllm_plugin

    assert vllm_plugin.signature_problem() is None  # the pinned vLLM: patched
    monkeypatch.setattr(LoRAModelRunnerMixin, "set_active_loras", lambda self, input_batch: None)
    problem = vllm_plugin.signature_problem()
    assert problem is not None and "set_active_loras" in problem and "input_batch" in problem


@needs_vllm
def test_flag_without_the_scheduler_is_one_error_naming_the_option():
    from types import SimpleNamespace

    from preft import vllm_plugin

    stock = SimpleNamespace(scheduler_config=SimpleNamespace(scheduler_cls=None))
    with pytest.raises(RuntimeError, match="--scheduler-cls preft.vllm_scheduler.PreftScheduler"):
        vllm_plugin._require_scheduler(stock)
    vllm_plugin._require_scheduler(SimpleNamespace(scheduler_config=SimpleNamespace(scheduler_cls=vllm_plugin.SCHEDULER)))
