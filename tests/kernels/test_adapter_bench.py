"""The multi-adapter serving benchmark: its files, its counters, and the slot semantics it measures.

The tiny configuration (adapters 1 and 4, 8 requests -- 2A, so every adapter is used -- 2 slots):
- all-token: requests of two adapters take both slots and hold them until they finish; the others
  wait, so at most 2 distinct adapters ever run and the 8 requests need at least 2 x GEN steps.
- preft: requests hold slots for their prefill step only, give them back, and the next requests
  are admitted while the first decode: more than 2 run at once. PreFT does wait for slots, but
  only when more distinct adapters arrive in one step than there are slots (`prefill_slots`, here
  max_loras), never behind a decoding request.
"""

from __future__ import annotations

import pytest
import torch

from preft.vllm_provider import vllm_available
from preft.adapters import random_lora
from preft.bench import CSV_COLUMNS, HostAdapters, ProcessUsage, format_table, run_adapter_bench
from preft.engine import Engine

pytestmark = pytest.mark.slow

GEN = 3


@pytest.fixture(scope="module")
def model():
    from harness.providers.embedded import load_model

    return load_model()[0]


@pytest.fixture(scope="module")
def tiny(model, tmp_path_factory):
    out = tmp_path_factory.mktemp("adapter_bench")
    messages: list[str] = []
    threads_before = torch.get_num_threads()
    result = run_adapter_bench(adapters=[1, 4], requests=8, prompt_len=8, gen_len=GEN, max_loras=2, out_dir=out,
                               threads=1, model=model, progress=messages.append)
    assert torch.get_num_threads() == threads_before, "the bench must restore the process's thread setting"
    return result, out, messages


def rows_by(result):
    return {(r["adapters"], r["mode"]): r for r in result["rows"]}


def test_writes_json_csv_png_with_expected_columns(tiny):
    import pandas as pd

    result, out, messages = tiny
    for name in ("adapters_bench.json", "adapters_bench.csv", "adapters_bench.png"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "adapters_bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    frame = pd.read_csv(out / "adapters_bench.csv")
    assert list(frame.columns) == CSV_COLUMNS
    assert len(frame) == 6 and set(frame["mode"]) == {"base", "preft", "all-token"}
    assert sorted(set(frame["adapters"])) == [1, 4]
    assert (frame["output_tok_s"] > 0).all() and (frame["total_s"] > 0).all()
    assert (frame["cpu_s"] > 0).all()
    # tokens per CPU second: the same tokens over the process's CPU time of that row
    assert (abs(frame["output_tok_cpu_s"] - frame["output_tokens"] / frame["cpu_s"]) <= 0.01 * frame["output_tok_cpu_s"]).all()
    for column in ProcessUsage.FIELDS:  # the OS's counts over each timed run
        assert (frame[column] >= 0).all(), column
    assert result["environment"]["torch"] == torch.__version__ and result["environment"]["threads"] == 1
    assert set(result["preft_over_all_token"]) == set(result["preft_over_base"]) == {"1", "4"}
    assert set(result["preft_over_all_token_cpu"]) == set(result["preft_over_base_cpu"]) == {"1", "4"}
    assert messages, "progress was never called"
    table = format_table(result)
    assert table.count("\n| 4 | ") >= 3 and "preft / all-token" in table


def test_process_usage_counts_the_pages_a_region_touches():
    import mmap

    page, pages = mmap.PAGESIZE, 16384
    with ProcessUsage() as quiet:
        pass
    # a fresh anonymous mapping (not the allocator's free list, whose pages may be resident already)
    # in small pages: writing one byte per page faults each page in
    with mmap.mmap(-1, pages * page) as fresh:
        if hasattr(mmap, "MADV_NOHUGEPAGE"):
            fresh.madvise(mmap.MADV_NOHUGEPAGE)
        with ProcessUsage() as touching:
            for offset in range(0, pages * page, page):
                fresh[offset] = 1
    assert touching.counts["page_faults_minor"] + touching.counts["page_faults_major"] >= pages // 2
    assert quiet.counts["page_faults_minor"] < pages // 16
    assert all(v >= 0 for v in touching.counts.values())


def test_every_request_generates_exactly_gen_len_tokens(tiny):
    result, _, _ = tiny
    for row in result["rows"]:
        assert row["all_requests_full_length"], row
        assert row["output_tokens"] == 8 * GEN
        assert row["decode_tokens"] == 8 * (GEN - 1) and row["prefill_tokens"] == 8 * 8
        assert row["ttft_p50_ms"] > 0 and row["tpot_p50_ms"] > 0


def test_slot_semantics_all_token_queues_preft_does_not_queue_behind_decoders(tiny):
    rows = rows_by(tiny[0])
    for mode in ("base", "preft", "all-token"):  # one adapter fits one slot: never a wait
        assert rows[1, mode]["slot_waits"] == 0 and rows[1, mode]["engine_slot_waits"] == 0
    assert rows[4, "base"]["slot_loads"] == rows[4, "base"]["slot_waits"] == 0

    at, pf = rows[4, "all-token"], rows[4, "preft"]
    # all-token holds a slot per adapter for a request's whole life: never more distinct adapters
    # running than slots (two requests of one adapter share its slot); preft only for a prefill step.
    assert at["max_loras"] == 2 and at["max_running_adapters"] <= 2 and at["steps"] >= 2 * GEN
    assert at["engine_slot_waits"] >= GEN and at["slot_waits"] > at["engine_slot_waits"]
    assert pf["max_running_adapters"] > 2 and pf["max_running"] > at["max_running"]
    assert pf["steps"] < at["steps"] and pf["engine_slot_waits"] < at["engine_slot_waits"]
    for row in (at, pf):  # every adapter served
        assert row["slot_kind"] == "alias" and row["prefill_slots"] == 2 and row["lora_op"] == "per-run"
        assert row["distinct_adapters_used"] == row["distinct_adapters_touched"] == 4
        assert row["slot_evictions"] == row["slot_loads"] - 1 >= 2  # one of two slots holds the warm-up's adapter
    assert tiny[0]["config"]["slot_rule"].startswith("distinct adapters per prefill step")


def test_lazy_adapters_equal_random_lora_and_host_memory_is_bounded(model):
    host = HostAdapters(model.config, count=6, rank=4, capacity=2)
    engine = Engine(model, max_num_seqs=2, max_loras=2, max_lora_rank=4)
    with host.registering():  # shapes only: nothing is materialised
        for adapter in host.adapters:
            engine.register(adapter)
    assert host.misses == 0 and not host.cache
    want = random_lora(model.config, 4, seed=5, name="a5").modules
    got = host.adapters[5].modules
    assert host.misses == 1 and got.keys() == want.keys()
    assert all(torch.equal(got[k][0], want[k][0]) and torch.equal(got[k][1], want[k][1]) and got[k][2] == want[k][2]
               for k in want)
    for adapter in host.adapters:
        _ = adapter.modules  # touch every cached adapter: no reload may happen
    assert len(host.cache) == 2 and host.cache_bytes() == 2 * host.adapter_bytes
    assert host.adapter_bytes == sum(4 * (a.numel() + b.numel()) for a, b, _ in want.values())
    slot = engine.loras.acquire("a5")  # a load: on the CPU the slot aliases the host tensors
    held = engine.loras.weights.slot_modules[slot][0, "q_proj"][0]
    assert torch.equal(held, want[0, "q_proj"][0])
    assert engine.loras.alias  # (a5 left the host cache above, so the load materialised it afresh)


def test_other_engines_are_one_clear_error():
    with pytest.raises(ValueError, match="use one of"):
        run_adapter_bench(engine="tgi", adapters=[1])
    if not vllm_available():
        with pytest.raises(ValueError, match="make vllm-install"):
            run_adapter_bench(engine="vllm", adapters=[1])
    with pytest.raises(ValueError, match="modes"):
        run_adapter_bench(modes=["sideways"], adapters=[1], model=object())
    with pytest.raises(ValueError, match="--prefill-loras"):
        run_adapter_bench(adapters=[1], prefill_loras=0, model=object())


@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vllm not installed: `make vllm-install; make test-vllm`")
def test_vllm_engine_writes_the_same_files_and_columns(tmp_path):
    """`--engine vllm`: one engine (1 slot, 2 adapters), the local bench's CSV columns, and the
    plugin's counters showing prefill-only decode steps run without adapters."""
    import pandas as pd

    result = run_adapter_bench(engine="vllm", adapters=[1, 2], requests=4, prompt_len=8, gen_len=GEN, max_loras=1,
                               max_cpu_loras=2, out_dir=tmp_path)
    rows = {(r["adapters"], r["mode"]): r for r in result["rows"]}
    assert set(rows) == {(a, m) for a in (1, 2) for m in ("base", "preft", "all-token")}
    assert all(r["output_tokens"] == 4 * GEN and r["all_requests_full_length"] for r in rows.values())
    assert rows[2, "preft"]["max_active_adapters"] == 1 and rows[2, "all-token"]["max_active_adapters"] == 1
    assert rows[1, "base"]["adapter_tokens"] == 0
    # prefill-only: only the 4 x 8 prompt tokens carry an adapter; all-token: every token does
    assert rows[1, "preft"]["adapter_tokens"] == 4 * 8
    assert rows[1, "all-token"]["adapter_tokens"] == 4 * 8 + 4 * (GEN - 1)
    assert rows[1, "preft"]["steps_without_adapter"] > 0
    frame = pd.read_csv(tmp_path / "adapters_bench.csv")
    assert list(frame.columns) == CSV_COLUMNS and len(frame) == 6
    assert set(result["preft_over_all_token"]) == {"1", "2"} and result["config"]["engine"] == "vllm"
    assert "| A | preft / all-token | preft / base |" in format_table(result)


def test_random_llama_has_the_named_shape_and_loads(tmp_path):
    """The GPU bench's base model: a Llama of a public model's shape with random weights."""
    from transformers import AutoConfig

    from preft.random_llama import SHAPES, make_random_llama

    out = make_random_llama(tmp_path / "m", "smollm2-135m", dtype="bfloat16")
    config = AutoConfig.from_pretrained(out)
    assert config.model_type == "llama" and config.num_hidden_layers == 30 and config.hidden_size == 576
    assert str(getattr(config, "dtype", None) or config.torch_dtype).endswith("bfloat16")
    assert make_random_llama(out, "smollm2-135m") == out  # made once
    with pytest.raises(ValueError, match="use one of"):
        make_random_llama(tmp_path / "x", "gpt-9")
    assert set(SHAPES) >= {"llama-3.2-1b", "llama-3.1-8b"}
