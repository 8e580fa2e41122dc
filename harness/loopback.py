"""A small OpenAI-compatible server on 127.0.0.1: serves any harness model (e.g. the embedded
one), or answers at once (`echo`, for measuring the harness's own overhead), and can inject
faults (429, 500, hangs) on a fixed schedule for testing retries.

    python -m harness.loopback --model local/smollm2-135m --port 8000
    python -m harness.loopback --echo --faults 429,500,timeout,ok --port 0

The first line printed is `READY <base_url>`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import itertools
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

from aiohttp import web

from harness.providers.base import GenerateConfig, Model, ModelError

FAULTS = ("ok", "429", "500", "503", "timeout", "drop")


class LoopbackServer:
    def __init__(self, model: Model | None, faults: list[str], hang_s: float,
                 reply: str | None = None, delay_s: float = 0.0, per_request: bool = False):
        bad = [f for f in faults if f not in FAULTS]
        if bad:
            raise SystemExit(f"--faults {','.join(bad)}: unknown fault; use {', '.join(FAULTS)}")
        self.model = model
        self.faults = faults or ["ok"]
        self.schedule = itertools.cycle(self.faults)
        # per_request: every distinct request body meets the fault list once, in order, then
        # succeeds -- deterministic under concurrency, unlike one global cycle.
        self.per_request = per_request
        self.attempts: dict[str, int] = {}
        self.hang_s = hang_s
        self.reply = reply
        self.delay_s = delay_s
        self.served = 0
        self.faulted: dict[str, int] = {}

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/stats", self.stats)
        return app

    async def models(self, request: web.Request) -> web.Response:
        name = self.model.name if self.model else "echo"
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model"}]})

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response({"served": self.served, "faulted": self.faulted})

    def _next_fault(self, raw: bytes) -> str:
        if not self.per_request:
            return next(self.schedule)
        key = hashlib.sha256(raw).hexdigest()
        seen = self.attempts.get(key, 0)
        self.attempts[key] = seen + 1
        return self.faults[seen] if seen < len(self.faults) else "ok"

    async def chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        fault = self._next_fault(raw)
        if fault != "ok":
            self.faulted[fault] = self.faulted.get(fault, 0) + 1
        if fault in ("429", "500", "503"):
            return web.json_response({"error": {"message": f"injected {fault}", "type": "injected"}}, status=int(fault))
        if fault == "timeout":
            await asyncio.sleep(self.hang_s)
        if fault == "drop":
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=500)
        body = json.loads(raw)
        messages = body.get("messages") or []
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.model is None:
            last = messages[-1]["content"] if messages else ""
            text = self.reply if self.reply is not None else f"echo: {last[:64]}"
            pt, ct, finish = sum(len(m.get("content", "").split()) for m in messages), len(text.split()), "stop"
        else:
            config = GenerateConfig(
                temperature=body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0,
                max_tokens=body.get("max_tokens") or body.get("max_completion_tokens") or 512,
                top_p=body.get("top_p") or 1.0,
                seed=body.get("seed"),
                stop=[body["stop"]] if isinstance(body.get("stop"), str) else body.get("stop"),
            )
            try:
                out = await self.model.generate(messages, config)
            except ModelError as exc:
                return web.json_response({"error": {"message": str(exc), "type": "invalid_request_error"}}, status=400)
            text, pt, ct, finish = out.text, out.usage.prompt_tokens, out.usage.completion_tokens, out.finish_reason
        self.served += 1
        return web.json_response(_completion(body.get("model", "echo"), text, finish, pt, ct))


def _completion(model: str, text: str, finish: str, pt: int, ct: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
    }


async def serve(server: LoopbackServer, host: str, port: int) -> None:
    runner = web.AppRunner(server.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    print(f"READY http://{host}:{bound}/v1", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m harness.loopback", description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="harness model spec to serve, e.g. local/smollm2-135m")
    p.add_argument("--echo", action="store_true", help="answer at once without a model")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--faults", default="", help=f"comma-separated schedule, cycled per request: {', '.join(FAULTS)}")
    p.add_argument("--hang-s", type=float, default=30.0, help="how long a `timeout` fault hangs")
    p.add_argument("--reply", default=None, help="with --echo: answer this text instead of echoing")
    p.add_argument("--per-request", action="store_true",
                   help="apply --faults to each distinct request in turn (then succeed), not as one global cycle")
    p.add_argument("--delay-s", type=float, default=0.0, help="wait this long before answering")
    args = p.parse_args(argv)
    model = None
    if not args.echo:
        from harness.providers import load_model
        from harness.spec import DEFAULT_MODEL, ModelSpec

        model = load_model(ModelSpec.parse(args.model or DEFAULT_MODEL))
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    # Loopback only: this server is for local models and tests, never exposed.
    with contextlib.suppress(KeyboardInterrupt):
        server = LoopbackServer(model, faults, args.hang_s, reply=args.reply, delay_s=args.delay_s,
                                per_request=args.per_request)
        asyncio.run(serve(server, "127.0.0.1", args.port))


@contextlib.contextmanager
def running_server(*args: str, startup_timeout_s: float = 300.0) -> Iterator[str]:
    """Start the server in a child process; yield its base URL; always stop it."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.loopback", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + startup_timeout_s
        line = ""
        assert proc.stdout is not None  # stdout=PIPE
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("READY ") or not line:
                break
        if not line.startswith("READY "):
            raise RuntimeError(f"loopback server did not start (exit code {proc.poll()})")
        yield line.split()[1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
