"""PreFT: prefill-only LoRA and ReFT adapters, the local multi-adapter engine and the vLLM plugin."""
