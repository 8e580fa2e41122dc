"""PreFT: prefill-only adapters (LoRA and ReFT) on a Llama-architecture base model.

A request's adapter acts on its prompt's tokens only; every decode step runs the bare base model
over a KV cache that the adapted prefill wrote. Modules:

- `lora_ops`: the multi-adapter LoRA op with a per-token adapter index (reference and segmented).
- `triton_lora`: the same op as Triton shrink/expand kernels (GPU, or CPU with TRITON_INTERPRET=1).
- `reft_ops`: LoReFT and DiReFT interventions with a per-token intervention index.
- `adapters`: LoRA adapters in peft's saved format and ReFT adapters in this project's format.
- `model`: a flat-token Llama forward over the HF model's weights that applies them.
- `store`: resident adapter slots (`max_loras`) with LRU eviction.
- `engine`: continuous batching with modes `base`, `preft` and `all-token`.
"""
