"""`harness serve`: a model behind an OpenAI-compatible server. (`harness generate` is PreFT's:
`preft.commands.generate_cmd`, registered under `harness.commands`.)"""

from __future__ import annotations

import typer

from harness.cli.kit import fail
from harness.errors import HarnessError
from harness.spec import DEFAULT_MODEL

app = typer.Typer()


@app.command("serve")
def serve_cmd(
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="Model to serve, provider/name."),
    port: int = typer.Option(8000, "--port"),
    faults: str = typer.Option("", "--faults", help="Fault schedule for tests, e.g. 429,500,timeout,ok."),
) -> None:
    """Serve a model as an OpenAI-compatible endpoint on 127.0.0.1 (a provider with its own server,
    as vllm/ has, serves it there)."""
    from harness.providers import get_provider
    from harness.spec import ModelSpec

    try:
        spec = ModelSpec.parse(model)
        own_server = getattr(get_provider(spec.provider), "serve", None)
        if own_server is not None:
            if faults:
                fail(f"--faults works with the harness's own server, not with {spec.provider}/ models")
            own_server(spec, port)  # replaces this process
            return
    except HarnessError as exc:
        fail(str(exc))
    from harness.loopback import main

    main(["--model", model, "--port", str(port), "--faults", faults])


