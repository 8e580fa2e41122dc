"""A Llama-architecture model with random weights, for serving benchmarks where nothing can be downloaded.

Throughput does not depend on the weights' values, only on the shapes, so the GPU adapter benchmark
(`kernels/gpu_bench.sh`) builds its base model here instead of bringing a checkpoint. The shapes are
those of public models (from their config.json files); no tokenizer is written: the benchmark feeds
token ids and never detokenizes.

    python -m preft.random_llama --shape llama-3.2-1b --out /tmp/llama-1b-random
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TypedDict


class Shape(TypedDict):
    """A Llama's `LlamaConfig` size fields (the rest are the config's defaults)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    max_position_embeddings: int
    rope_theta: float
    tie_word_embeddings: bool


SHAPES: dict[str, Shape] = {
    # a small config for CPU measurements and tests (not a public model): 4 layers, d=256, a 4096-token
    # vocabulary so that the LM head does not dominate a step
    "tiny": Shape(hidden_size=256, intermediate_size=768, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=4096, max_position_embeddings=4096, rope_theta=10000.0,
                 tie_word_embeddings=True),
    "smollm2-135m": Shape(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192, rope_theta=100000.0,
                         tie_word_embeddings=True),
    "llama-3.2-1b": Shape(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
                         tie_word_embeddings=True),
    "llama-3.1-8b": Shape(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
                         tie_word_embeddings=False),
}


def build_random_llama(shape: str = "tiny", dtype: str = "float32", device: str = "cpu", seed: int = 0) -> Any:
    """The model in memory, weights initialised on `device` directly (an 8B model never passes
    through host memory in fp32); eval mode."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if shape not in SHAPES:
        raise ValueError(f"--model-shape {shape!r}: use one of {sorted(SHAPES)}")
    if dtype not in ("bfloat16", "float16", "float32"):
        raise ValueError(f"--dtype {dtype!r}: use bfloat16, float16 or float32")
    torch.manual_seed(seed)
    config = LlamaConfig(**SHAPES[shape], bos_token_id=1, eos_token_id=2, rms_norm_eps=1e-5)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))  # works across transformers versions (dtype= / torch_dtype=)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


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
