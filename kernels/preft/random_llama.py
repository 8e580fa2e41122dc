"""A Llama-architecture model with random weights, for serving benchmarks where nothing can be downloaded.

Throughput does not depend on the weights' values, only on the shapes, so the GPU adapter benchmark
(`kernels/gpu_bench.sh`) builds its base model here instead of bringing a checkpoint. The shapes are
those of public models (from their config.json files); no tokenizer is written: the benchmark feeds
token ids and never detokenizes.

    python -m kernels.preft.random_llama --shape llama-3.2-1b --out /tmp/llama-1b-random
"""

from __future__ import annotations

import argparse
from pathlib import Path

SHAPES: dict[str, dict] = {
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192, rope_theta=100000.0,
                         tie_word_embeddings=True),
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
                         tie_word_embeddings=True),
    "llama-3.1-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
                         tie_word_embeddings=False),
}


def make_random_llama(out: str | Path, shape: str = "llama-3.2-1b", dtype: str = "bfloat16", seed: int = 0) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if shape not in SHAPES:
        raise ValueError(f"--shape {shape!r}: use one of {sorted(SHAPES)}")
    out = Path(out)
    if (out / "config.json").is_file():
        return out
    torch.manual_seed(seed)
    config = LlamaConfig(**SHAPES[shape], bos_token_id=1, eos_token_id=2, rms_norm_eps=1e-5)
    model = LlamaForCausalLM(config).to(getattr(torch, dtype))
    model.config.dtype = dtype
    model.save_pretrained(str(out))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="llama-3.2-1b", choices=sorted(SHAPES))
    parser.add_argument("--out", required=True)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    args = parser.parse_args()
    print(make_random_llama(args.out, args.shape, args.dtype))


if __name__ == "__main__":
    main()
