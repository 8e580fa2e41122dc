#!/usr/bin/env bash
# PreFT on one H100/H200: the kernel tests, then the local engine's adapter benchmark on CUDA (bf16,
# Triton SGMV/BGMV LoRA kernels) at 1B and 8B random-weight Llama shapes. Installs and downloads
# nothing; no vLLM. Needs a Python with torch (CUDA), triton, transformers, numpy, pytest, and this
# repo's own imports (pydantic ...); matplotlib for the plot (skipped with a note when absent).
#
#   bash kernels/gpu_bench.sh                  # on the GPU machine: writes $OUT (default bench/gpu)
#   bash kernels/gpu_bench.sh --dry-run        # anywhere: the same steps on the CPU, tiny shape,
#                                              # kernels under TRITON_INTERPRET=1 (~1 min)
#
# $OUT/: kernel_tests.txt, <shape>/adapters_bench.{json,csv,png}, summary.{json,csv}, summary.png,
# gpu.txt, log.txt. Budget: under 8 minutes on an H200 (each shape has its own timeout, so one slow
# shape cannot eat the other's time; a shape that times out leaves a note in summary.json).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:-bench/gpu}
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
mkdir -p "$OUT"
export PYTHONPATH="$PWD/kernels:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

if [ "$DRY" = 1 ]; then
    DEVICE=cpu; SHAPES=${SHAPES:-tiny}; ADAPTERS=${ADAPTERS:-1,4}; REQUESTS=${REQUESTS:-8}
    PROMPT_LEN=${PROMPT_LEN:-16}; GEN_LEN=${GEN_LEN:-4}; MAX_LORAS=${MAX_LORAS:-2}; SHAPE_TIMEOUT=${SHAPE_TIMEOUT:-120}
    TESTS="tests/kernels/test_triton_lora.py tests/kernels/test_engine_device.py"
else
    DEVICE=cuda; SHAPES=${SHAPES:-llama-3.2-1b llama-3.1-8b}; ADAPTERS=${ADAPTERS:-1,64,512}; REQUESTS=${REQUESTS:-1024}
    PROMPT_LEN=${PROMPT_LEN:-256}; GEN_LEN=${GEN_LEN:-16}; MAX_LORAS=${MAX_LORAS:-16}; SHAPE_TIMEOUT=${SHAPE_TIMEOUT:-200}
    TESTS="tests/kernels/test_triton_lora.py tests/kernels/test_engine_device.py"
fi

missing=$("$PY" - <<'EOF'
import importlib.util
names = ["torch", "triton", "transformers", "numpy", "pytest"]
print(" ".join(n for n in names if importlib.util.find_spec(n) is None))
EOF
)
if [ -n "$missing" ]; then
    echo "gpu_bench: $PY lacks: $missing -- this script installs nothing; use a Python that has them" >&2
    exit 3
fi
if ! "$PY" -c "import preft.bench" 2>"$OUT/import_error.txt"; then
    echo "gpu_bench: this repo's bench does not import with $PY (see $OUT/import_error.txt)" >&2
    exit 3
fi
if [ "$DRY" = 0 ]; then
    "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_bench: no CUDA device visible')" || exit 4
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
fi

failed=0
{
    echo "== kernel tests ($DEVICE) =="
    # On a GPU: the interpreted equality tests and the compiled-kernel/CUDA-engine tests (-m gpu not
    # excluded). In the dry run the GPU tests skip.
    TRITON_INTERPRET=1 timeout 180 "$PY" -m pytest -q -p no:cacheprovider $TESTS 2>&1 | tail -15 | tee "$OUT/kernel_tests.txt" || failed=1
    for shape in $SHAPES; do
        echo "== adapter bench: $shape on $DEVICE =="
        timeout "$SHAPE_TIMEOUT" "$PY" - "$shape" <<EOF
import sys
from preft.bench import format_table, run_adapter_bench
shape = sys.argv[1]
result = run_adapter_bench(adapters=[int(a) for a in "$ADAPTERS".split(",")], modes=["base", "preft", "all-token"],
                           rank=16, requests=$REQUESTS, prompt_len=$PROMPT_LEN, gen_len=$GEN_LEN, max_loras=$MAX_LORAS,
                           max_num_seqs=128, device="$DEVICE", model_shape=shape, out_dir="$OUT/" + shape,
                           max_cpu_loras=512, progress=lambda m: print(m, flush=True))
print(format_table(result))
EOF
        rc=$?
        echo "$shape exit $rc"
        [ "$rc" = 0 ] || failed=1
    done
    "$PY" - "$OUT" <<'EOF'
import csv, json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows, notes = [], {}
for sub in sorted(p for p in out.iterdir() if p.is_dir()):
    doc = sub / "adapters_bench.json"
    if not doc.is_file():
        notes[sub.name] = "no result (timed out or failed: see log.txt)"
        continue
    result = json.loads(doc.read_text())
    for row in result["rows"]:
        rows.append({"shape": sub.name, **row})
    notes[sub.name] = {"preft_over_all_token": result["preft_over_all_token"], "preft_over_base": result["preft_over_base"]}
(out / "summary.json").write_text(json.dumps({"ratios": notes, "paper": "1.90x preft/all-token at 512 adapters, 70B on vLLM",
                                               "rows": rows}, indent=2) + "\n")
if rows:
    keys = ["shape", "adapters", "mode", "max_loras", "requests", "output_tok_s", "ttft_p50_ms", "tpot_p50_ms", "steps",
            "distinct_adapters_touched", "slot_loads", "slot_evictions", "slot_waits"]
    with (out / "summary.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for (shape, mode) in sorted({(r["shape"], r["mode"]) for r in rows}):
            pts = sorted((r["adapters"], r["output_tok_s"]) for r in rows if r["shape"] == shape and r["mode"] == mode)
            ax.plot(*zip(*pts), marker="o", label=f"{shape} {mode}")
        ax.set_xscale("log", base=2); ax.set_yscale("log")
        ax.set_xlabel("distinct adapters A (all used)"); ax.set_ylabel("output tokens / s"); ax.legend(fontsize=7)
        fig.tight_layout(); fig.savefig(out / "summary.png", dpi=120)
    except ImportError:
        notes["plot"] = "matplotlib missing: no summary.png"
print(json.dumps(notes, indent=1))
EOF
    exit "$failed"
} 2>&1 | tee "$OUT/log.txt"  # pipefail: the script fails when a shape failed or timed out
