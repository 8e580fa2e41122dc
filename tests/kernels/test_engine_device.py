"""The engine's device path and LoRA backends on a micro random Llama (CPU; Triton interpreted).

One mixed batch (bare, prefill-only and all-token requests over three adapters in two slots) gives
the same greedy tokens and logits with alias slots (the CPU default), copied slots, and the Triton
kernels (SGMV for prefill runs, BGMV for decode). The benchmark's counters on a Zipf/Poisson draw;
the CUDA tests skip without a GPU.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is first imported (see test_triton_lora.py)

import pytest  # noqa: E402
import torch  # noqa: E402

from preft.adapters import random_lora  # noqa: E402
from preft.engine import Engine, Request, resolve_backend  # noqa: E402
from preft.lora_ops import adapter_runs, lora_delta, lora_delta_reference  # noqa: E402

triton = pytest.importorskip("triton", reason="triton is not installed (pip install -e '.[kernels]')")
from preft import triton_lora  # noqa: E402

GEN = 3


def micro_model(device: str = "cpu", dtype: torch.dtype = torch.float32):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=40000, max_position_embeddings=256, bos_token_id=1,
                         eos_token_id=2, tie_word_embeddings=True)
    with torch.device(device):
        return LlamaForCausalLM(config).to(dtype).eval()


@pytest.fixture(scope="module")
def model():
    return micro_model()


def mixed_run(model, **engine_kwargs):
    engine = Engine(model, max_loras=2, max_lora_rank=4, keep_logits=True, **engine_kwargs)
    for i in range(3):
        engine.register(random_lora(model.config, 4, seed=i, name=f"a{i}", std=0.5))
    g = torch.Generator().manual_seed(1)
    prompts = torch.randint(1000, 40000, (6, 20), generator=g).tolist()
    plan = [(None, "base"), ("a0", "preft"), ("a1", "all-token"), ("a2", "preft"), ("a0", "all-token"), ("a1", "preft")]
    reqs = [Request(p, GEN, adapter=a, mode=m) for p, (a, m) in zip(prompts, plan)]
    engine.run(reqs)
    return engine, reqs


def test_alias_copy_and_triton_slots_give_the_same_tokens(model):
    alias, want = mixed_run(model)
    assert alias.loras.alias and alias.lora_backend == "segmented" and alias.loras.bytes() == 0
    copied, got_copy = mixed_run(model, lora_alias=False)
    assert not copied.loras.alias and copied.loras.bytes() > 0
    triton_engine, got_triton = mixed_run(model, lora_backend="triton")
    assert not triton_engine.loras.alias
    bare = Engine(model).run([Request(list(r.prompt_ids), GEN) for r in want])
    assert any(w.output_ids != b.output_ids for w, b in zip(want[1:], bare[1:])), "the adapters change nothing"
    for other in (got_copy, got_triton):
        for w, o in zip(want, other):
            assert w.output_ids == o.output_ids
            for lw, lo in zip(w.logits, o.logits):
                torch.testing.assert_close(lo, lw, rtol=1e-4, atol=1e-4)
    # three adapters, two slots: an eviction, and every adapter was served
    assert alias.loras.table.touched == {"a0", "a1", "a2"} and alias.loras.table.stats.evictions >= 1


def test_sgmv_kernel_equals_reference_on_runs_of_mixed_length():
    g = torch.Generator().manual_seed(2)
    idx = torch.tensor([1] * 20 + [-1] * 3 + [0] * 17 + [2] + [1] * 5)
    n, d_in, d_out, r, S = idx.numel(), 48, 40, 6, 3
    x = torch.randn(n, d_in, generator=g)
    A, B = torch.randn(S, d_in, r, generator=g), torch.randn(S, r, d_out, generator=g)
    s = torch.tensor([0.5, 2.0, 1.5])
    want = lora_delta_reference(x, idx, A, B, s)
    got = triton_lora.lora_delta_sgmv(x, idx, A, B, s, adapter_runs(idx))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max()))
    assert torch.count_nonzero(got[idx < 0]) == 0
    assert adapter_runs(idx) == [(0, 20, 1), (23, 40, 0), (40, 41, 2), (41, 46, 1)]
    torch.testing.assert_close(lora_delta(x, idx, A, B, s, backend="triton"), want, rtol=1e-4,
                               atol=1e-4 * float(want.abs().max()))


def test_backend_resolution():
    assert resolve_backend("auto", torch.device("cpu")) == "segmented"
    assert resolve_backend("auto", torch.device("cuda")) == "triton"
    assert resolve_backend("reference", torch.device("cuda")) == "reference"


def test_bench_zipf_poisson_counts_touched_loads_and_evictions(model, tmp_path):
    from preft.bench import run_adapter_bench

    result = run_adapter_bench(adapters=[4], requests=6, prompt_len=8, gen_len=2, max_loras=2, rank=4,
                               popularity="zipf", arrival="poisson", rate=400.0, out_dir=tmp_path, model=model,
                               threads=1)
    rows = {r["mode"]: r for r in result["rows"]}
    assert result["config"]["arrival"] == "poisson" and result["config"]["popularity"] == "zipf"
    for mode in ("preft", "all-token"):
        row = rows[mode]
        assert row["requests"] == 8  # raised to 2A so that every adapter is used
        assert row["distinct_adapters_used"] == row["distinct_adapters_touched"] == 4
        # two slots, one already holding the warm-up's adapter: every load past the first evicts
        assert row["slot_evictions"] == row["slot_loads"] - 1 >= 2
        assert row["all_requests_full_length"] and row["output_tokens"] == 16
    assert rows["base"]["distinct_adapters_touched"] == rows["base"]["slot_loads"] == 0
    with pytest.raises(ValueError, match="no CUDA device" if not torch.cuda.is_available() else "use cpu or cuda"):
        run_adapter_bench(adapters=[1], device="cuda" if not torch.cuda.is_available() else "tpu", model=model)
    with pytest.raises(ValueError, match="--popularity"):
        run_adapter_bench(adapters=[1], popularity="pareto", model=model)


def test_random_llama_shapes_build_in_memory():
    from preft.random_llama import SHAPES, build_random_llama

    m = build_random_llama("tiny", "float32", "cpu")
    assert m.config.num_hidden_layers == SHAPES["tiny"]["num_hidden_layers"] and not m.training
    assert next(m.parameters()).dtype == torch.float32
    with pytest.raises(ValueError, match="use one of"):
        build_random_llama("llama-9t")


GPU_SCRIPT = """
import torch
from preft import triton_lora  # first: compiled kernels (importing the test module sets TRITON_INTERPRET)
from tests.kernels.test_engine_device import micro_model, mixed_run
assert not triton_lora._interpreted()
cpu_engine, want = mixed_run(micro_model())
for dtype in (torch.float32, torch.bfloat16):
    engine, got = mixed_run(micro_model("cuda", dtype))
    assert engine.lora_backend == "triton" and engine.pool.k[0].device.type == "cuda"
    assert engine.loras.weights.A[0, "q_proj"].device.type == "cuda" and engine.pool.dtype == dtype
    if dtype == torch.float32:  # the first step's logits (prefill; Triton's tl.dot may use TF32 on a GPU)
        for g, w in zip(got, want):
            torch.testing.assert_close(g.logits[0], w.logits[0], rtol=1e-2, atol=1e-2)
    assert all(len(r.output_ids) == 3 for r in got)
print("gpu engine ok")
"""


@pytest.mark.gpu
def test_engine_on_cuda_matches_cpu_tokens():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here")
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compiled kernels in a clean child
    proc = subprocess.run([sys.executable, "-c", GPU_SCRIPT], capture_output=True, text=True, env=env,
                          cwd=Path(__file__).resolve().parents[2], timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gpu engine ok" in proc.stdout
