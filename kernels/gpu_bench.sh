#!/usr/bin/env bash
# The PreFT adapter-serving benchmark on a GPU machine: installs nothing, downloads nothing.
#
# Needs a Python that imports torch (CUDA), transformers, vllm, peft, pandas, matplotlib, typer,
# rich, pydantic, platformdirs and psutil -- e.g. `.venv-vllm` built with a CUDA vLLM wheel, or a
# machine image that has them. The base model is a Llama-architecture model with random weights
# made on the machine (kernels/preft/random_llama.py; default the shape of Llama-3.2-1B, bf16):
# serving speed depends on shapes, not weight values. Adapters are seeded random rank-16 LoRAs on
# all seven projections, written once in peft's format in the model's dtype.
#
#   bash kernels/gpu_bench.sh                 # writes bench/gpu/{adapters_bench.json,csv,png}, table on stdout
#   SHAPE=llama-3.1-8b REQUESTS=1024 bash kernels/gpu_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
SHAPE=${SHAPE:-llama-3.2-1b}
OUT=${OUT:-bench/gpu}
ADAPTERS=${ADAPTERS:-1,8,64,512}
REQUESTS=${REQUESTS:-512}          # request i uses adapter i % A: 512 requests touch all 512 adapters
MODEL_DIR=${MODEL_DIR:-/tmp/harness-random-${SHAPE}}

missing=$("$PY" - <<'EOF'
import importlib.util
names = ["torch", "transformers", "vllm", "peft", "pandas", "matplotlib", "typer", "rich", "pydantic",
         "platformdirs", "psutil"]
print(" ".join(n for n in names if importlib.util.find_spec(n) is None))
EOF
)
if [ -n "$missing" ]; then
    echo "gpu_bench: $PY lacks: $missing -- this script installs nothing; use a Python that has them" >&2
    exit 3
fi
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_bench: no CUDA device visible')"

export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" VLLM_USE_V2_MODEL_RUNNER=0 PYTHONUNBUFFERED=1
"$PY" -m kernels.preft.random_llama --shape "$SHAPE" --out "$MODEL_DIR"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
"$PY" -m harness.cli bench adapters --engine vllm --vllm-model "$MODEL_DIR" --adapters "$ADAPTERS" \
    --modes base,preft,all-token --requests "$REQUESTS" --prompt-len 512 --gen-len 128 --rank 16 \
    --max-num-seqs 256 --out "$OUT" 2>&1 | tee "$OUT/log.txt"
