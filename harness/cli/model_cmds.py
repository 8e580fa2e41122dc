"""`harness generate` and `harness serve`: one generation, or a model behind an OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.kit import fail
from harness.errors import HarnessError
from harness.spec import DEFAULT_MODEL

app = typer.Typer()


@app.command("generate")
def generate_cmd(
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="Model spec, provider/name."),
    prompt: str = typer.Option(..., "--prompt", help="Raw text (tokenised as is) unless --chat; raw text needs a "
                               "model with a raw-text interface (local/, vllm/, openai/ completions)."),
    chat: bool = typer.Option(False, "--chat", help="Wrap the prompt as one user message in the chat template."),
    adapter: Optional[Path] = typer.Option(None, "--adapter", help="peft LoRA folder or ReFT folder (local model)."),
    adapter_mode: str = typer.Option("preft", "--adapter-mode", help="preft (prompt only) or all-token."),
    max_tokens: int = typer.Option(64, "--max-tokens", min=1),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0),
    seed: int = typer.Option(0, "--seed"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Endpoint for openai/ and litellm/ models."),
    json_schema: Optional[Path] = typer.Option(None, "--json-schema", help="File with a JSON schema the reply must match."),
    choice: Optional[str] = typer.Option(None, "--choice", help="The reply is exactly one of these, e.g. yes,no,maybe."),
    regex: Optional[str] = typer.Option(None, "--regex", help="The reply matches this regular expression in full."),
    as_json: bool = typer.Option(False, "--json", help="Print text, token ids and usage as one JSON object."),
) -> None:
    """One generation, for quick checks and scripts (greedy unless --temperature). At most one of
    --json-schema, --choice, --regex constrains the reply (the embedded model enforces it per token)."""
    import json

    from harness.generate import generate_once

    try:
        result = generate_once(model=model, prompt=prompt, chat=chat, adapter=adapter, adapter_mode=adapter_mode,
                               max_tokens=max_tokens, temperature=temperature, seed=seed, base_url=base_url,
                               json_schema=json_schema, choice=choice, regex=regex)
    except HarnessError as exc:
        fail(str(exc))
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(result["text"])


@app.command("serve")
def serve_cmd(
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="Model to serve, provider/name."),
    port: int = typer.Option(8000, "--port"),
    faults: str = typer.Option("", "--faults", help="Fault schedule for tests, e.g. 429,500,timeout,ok."),
) -> None:
    """Serve a model as an OpenAI-compatible endpoint on 127.0.0.1 (vllm/ models: vLLM's own server)."""
    if model.startswith("vllm/"):
        if faults:
            fail("--faults works with the harness's own server, not with vllm/ models")
        from harness.providers.vllm_provider import exec_openai_server

        try:
            exec_openai_server(model.split("/", 1)[1], port)
        except HarnessError as exc:
            fail(str(exc))
    from harness.loopback import main

    main(["--model", model, "--port", str(port), "--faults", faults])


