"""A small OpenAI-compatible server on 127.0.0.1: serves any harness model (e.g. the embedded
one), or answers at once (`echo`, for measuring the harness's own overhead), and can inject
faults (429, 500, hangs) on a fixed schedule for testing retries, and rate limits: a 429 with
`Retry-After` for the first K requests (`--rate-limit-first`) or for any request that arrives
while N are in flight (`--rate-limit-above`). `/stats` counts what was served and faulted and the
peak number of requests in flight.

`/v1/chat/completions` takes OpenAI's `response_format`, `tools` and `tool_choice` and vLLM's
`structured_outputs` (or `guided_*`) and hands them to the model as `GenerateConfig` fields; a bad
constraint is HTTP 400 naming it. `/v1/completions` (raw text, no chat template) is served by the
model's `complete` where it has one. `/v1/images/generations` answers from a folder of PNGs
(`--images DIR`, see `image_for`): a scripted text-to-image model for tests.

    python -m harness.loopback --model local/smollm2-135m --port 8000
    python -m harness.loopback --echo --faults 429,500,timeout,ok --port 0
    python -m harness.loopback --echo --rate-limit-above 4 --retry-after-s 0.2 --port 0

The first line printed is `READY <base_url>`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import itertools
import math
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import JsonValue, ValidationError

from harness.errors import invalid
from harness.messages import ChatMessage, MessageError, check_messages, text_of
from harness.providers.base import (
    ConstraintError,
    GenerateConfig,
    Model,
    ModelError,
    ModelOutput,
    RawTextModel,
    ToolSpec,
    Usage,
    check_constraint,
)

FAULTS = ("ok", "429", "500", "503", "timeout", "drop")


class LoopbackServer:
    def __init__(self, model: Model | None, faults: list[str], hang_s: float,
                 reply: str | None = None, delay_s: float = 0.0, per_request: bool = False,
                 retry_after_s: float | None = None, rate_limit_first: int = 0, rate_limit_above: int = 0,
                 images: Path | None = None):
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
        self.retry_after_s = retry_after_s  # sent with every 429 (None: no Retry-After header)
        self.rate_limit_first = rate_limit_first
        self.rate_limit_above = rate_limit_above
        self.images = images  # the folder `/v1/images/generations` answers from (see `image_for`)
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/images/generations", self.images_generations)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/stats", self.stats)
        return app

    async def models(self, request: web.Request) -> web.Response:
        name = self.model.name if self.model else "echo"
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model"}]})

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response({"served": self.served, "faulted": self.faulted, "requests": self.requests,
                                  "peak_in_flight": self.peak_in_flight})

    def _next_fault(self, raw: bytes) -> str:
        if not self.per_request:
            return next(self.schedule)
        key = hashlib.sha256(raw).hexdigest()
        seen = self.attempts.get(key, 0)
        self.attempts[key] = seen + 1
        return self.faults[seen] if seen < len(self.faults) else "ok"

    @contextlib.contextmanager
    def _counted(self) -> Iterator[None]:
        """Count a request as in flight while it is handled (rejected ones too: what clients send)."""
        self.requests += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= 1

    def _rate_limited(self) -> bool:
        return self.requests <= self.rate_limit_first or 0 < self.rate_limit_above < self.in_flight

    async def _fault(self, request: web.Request, raw: bytes) -> web.StreamResponse | None:
        """The injected fault's response for this request, or None to answer it normally."""
        fault = "429" if self._rate_limited() else self._next_fault(raw)
        if fault != "ok":
            self.faulted[fault] = self.faulted.get(fault, 0) + 1
        if fault == "429":
            return _too_many(self.retry_after_s)
        if fault in ("500", "503"):
            return _error(f"injected {fault}", int(fault), kind="injected")
        if fault == "timeout":
            await asyncio.sleep(self.hang_s)
        if fault == "drop":
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=500)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return None

    async def chat(self, request: web.Request) -> web.StreamResponse:
        with self._counted():
            return await self._chat(request)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        faulted = await self._fault(request, raw)
        if faulted is not None:
            return faulted
        try:
            body = _json_body(raw)
            messages = flat_messages(body.get("messages") or [])
            config = request_config(body)
        except ModelError as exc:
            return _error(str(exc))
        if self.model is None:
            last = text_of(messages[-1]) if messages else ""
            out = self._echo(f"echo: {last[:64]}", " ".join(text_of(m) for m in messages))
        else:
            try:
                out = await self.model.generate(messages, config)
            except ModelError as exc:
                return _error(str(exc))
        self.served += 1
        return web.json_response(chat_completion(str(body.get("model", "echo")), out))

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """Raw text in, raw text out (no chat template): the model's `complete`, where it has one."""
        with self._counted():
            return await self._completions(request)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        faulted = await self._fault(request, raw)
        if faulted is not None:
            return faulted
        try:
            body = _json_body(raw)
            prompt = _prompt(body.get("prompt"))
            if body.get("tools") is not None:
                raise ConstraintError("tools: only /v1/chat/completions takes tools")
            config = request_config(body)
        except ModelError as exc:
            return _error(str(exc))
        if self.model is None:
            out = self._echo(f"echo: {prompt[:64]}", prompt)
        elif not isinstance(self.model, RawTextModel):
            return _error(f"{self.model.name} has no raw-text completion; use /v1/chat/completions")
        else:
            try:
                out = await self.model.complete(prompt, config)
            except ModelError as exc:
                return _error(str(exc))
        self.served += 1
        return web.json_response(text_completion(str(body.get("model", "echo")), out))

    async def images_generations(self, request: web.Request) -> web.StreamResponse:
        """A picture for a prompt, from the `--images` folder (see `image_for`), base64 in `b64_json`."""
        with self._counted():
            raw = await request.read()
            faulted = await self._fault(request, raw)
            if faulted is not None:
                return faulted
            try:
                prompt = _prompt(_json_body(raw).get("prompt"))
            except ModelError as exc:
                return _error(str(exc))
            if self.images is None:
                return _error("this server draws no pictures: start it with --images DIR", status=404)
            path = image_for(self.images, prompt)
            if path is None:
                return _error(f"no picture for this prompt in {self.images} (and no default.png)")
            self.served += 1
            return web.json_response({"created": int(time.time()),
                                      "data": [{"b64_json": base64.b64encode(path.read_bytes()).decode("ascii")}]})

    def _echo(self, default: str, prompt: str) -> ModelOutput:
        """Echo mode's instant answer; tokens are counted as words."""
        text = self.reply if self.reply is not None else default
        return ModelOutput(text=text, usage=Usage(prompt_tokens=len(prompt.split()),
                                                  completion_tokens=len(text.split()), calls=1))


def prompt_key(prompt: str) -> str:
    """The file name stem `--images` looks up for a prompt."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def image_for(folder: Path, prompt: str) -> Path | None:
    """`<folder>/<prompt_key(prompt)>.png` if present, else `<folder>/default.png`, else None: a
    scripted text-to-image model for tests (the pictures are made by whoever starts the server)."""
    for name in (f"{prompt_key(prompt)}.png", "default.png"):
        if (folder / name).is_file():
            return folder / name
    return None


def _error(message: str, status: int = 400, kind: str = "invalid_request_error") -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind}}, status=status)


def _too_many(retry_after_s: float | None) -> web.Response:
    """HTTP 429 as OpenAI sends it: `Retry-After` in whole seconds and `retry-after-ms`."""
    headers = {} if retry_after_s is None else {"Retry-After": str(math.ceil(retry_after_s)),
                                                 "retry-after-ms": str(round(retry_after_s * 1000))}
    return web.json_response({"error": {"message": "injected 429: rate limit reached", "type": "requests"}},
                             status=429, headers=headers)


def _json_body(raw: bytes) -> dict[str, JsonValue]:
    try:
        body = json.loads(raw)
    except ValueError:
        raise ModelError("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise ModelError("the request body must be a JSON object")
    return body


def _prompt(value: Any) -> str:
    # OpenAI's completions endpoint also takes a list of prompts; one list item is the same request.
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str):
        raise ModelError("prompt: send one string")
    return value


def _text(content: Any) -> str:
    """A message's content as text: OpenAI allows null (a tool-call turn) or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    raise ModelError(f"message content {content!r}: use a string or a list of text parts")


def flat_messages(messages: Any) -> list[ChatMessage]:
    """OpenAI chat messages as the harness's `{role, content}` strings, checked as `ChatMessage`s. An
    assistant turn that called tools shows its calls as the `{"name", "arguments"}` JSON a
    constrained reply takes, so a model without a tool-call template still sees what it did (and the
    cache key is the one it had); a tool result stays a `tool` turn. Pictures are not passed on."""
    if not isinstance(messages, list):
        raise ModelError("messages: send a list of {role, content} objects")
    flat = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ModelError(f"messages[{i}]: each message needs a role")
        content = _text(m.get("content"))
        calls = m.get("tool_calls") or []
        if calls and not content:
            content = json.dumps([_call_as_json(c) for c in calls], ensure_ascii=False)
        flat.append({"role": m["role"], "content": content})
    try:
        return check_messages(flat)
    except MessageError as exc:
        raise ModelError(str(exc)) from None


def _call_as_json(call: Any) -> dict[str, JsonValue]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict):
        raise ModelError(f"tool call {call!r}: expected {{'type': 'function', 'function': {{...}}}}")
    args = fn.get("arguments")
    try:
        parsed = json.loads(args) if isinstance(args, str) and args.strip() else (args or {})
    except ValueError:
        parsed = args  # history is shown as sent; it is not ours to repair
    return {"name": fn.get("name"), "arguments": parsed}


def request_config(body: dict[str, JsonValue]) -> GenerateConfig:
    """The request's sampling parameters and output constraint as a checked `GenerateConfig`.
    Constraints come from OpenAI's fields (`response_format`, `tools`, `tool_choice`) or vLLM's
    (`structured_outputs`, or the older `guided_json` / `guided_choice` / `guided_regex`); a
    constraint the model cannot take raises `ConstraintError` (the caller answers HTTP 400)."""
    temperature = body.get("temperature")
    stop = body.get("stop")
    constraints = _constraints(body)
    try:  # the body's values as sent: GenerateConfig checks them
        config = GenerateConfig(
            temperature=1.0 if temperature is None else temperature,  # the OpenAI API's default
            max_tokens=body.get("max_tokens") or body.get("max_completion_tokens") or 512,
            top_p=body.get("top_p") or 1.0,
            seed=body.get("seed"),
            stop=[stop] if isinstance(stop, str) else stop,
            **constraints,
        )
    except ValidationError as exc:
        raise ConstraintError(invalid(exc, "request body", "send a value the OpenAI chat API accepts there")) from None
    check_constraint(config)
    return config


# A constraint field's value as the request gave it (JSON), or its tools read into ToolSpecs.
Constraint = JsonValue | list[ToolSpec]


def _constraints(body: dict[str, JsonValue]) -> dict[str, Constraint]:
    """The constraint fields named in the request, each given at most once across its spellings."""
    found: dict[str, tuple[str, Constraint]] = {}

    def put(field: str, source: str, value: Constraint) -> None:
        if value is None:
            return
        if field in found:
            raise ConstraintError(f"{field} given twice: in {found[field][0]} and in {source}")
        found[field] = (source, value)

    put("json_schema", "response_format", _response_format(body.get("response_format")))
    outputs = body.get("structured_outputs")
    if outputs is not None:
        if not isinstance(outputs, dict):
            raise ConstraintError("structured_outputs: send an object, e.g. {\"choice\": [...]}")
        for unsupported in ("grammar", "structural_tag"):
            if outputs.get(unsupported) is not None:
                raise ConstraintError(f"structured_outputs.{unsupported} is not supported here: use json, "
                                      "json_object, choice or regex")
        put("json_schema", "structured_outputs.json", _schema_value("structured_outputs.json", outputs.get("json")))
        put("json_schema", "structured_outputs.json_object", {"type": "object"} if outputs.get("json_object") else None)
        put("choice", "structured_outputs.choice", outputs.get("choice"))
        put("regex", "structured_outputs.regex", outputs.get("regex"))
    put("json_schema", "guided_json", _schema_value("guided_json", body.get("guided_json")))
    put("choice", "guided_choice", body.get("guided_choice"))
    put("regex", "guided_regex", body.get("guided_regex"))
    put("tools", "tools", _tools(body.get("tools")))
    put("tool_choice", "tool_choice", _tool_choice(body.get("tool_choice")))
    return {field: value for field, (_, value) in found.items()}


def _response_format(value: Any) -> dict[str, JsonValue] | None:
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}  # any JSON object, as OpenAI's JSON mode promises
    if kind == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
            raise ConstraintError("response_format json_schema: send {\"json_schema\": {\"name\": ..., "
                                  "\"schema\": {...}}}")
        schema: dict[str, JsonValue] = spec["schema"]
        return schema
    raise ConstraintError(f"response_format {value!r}: the type is text, json_object or json_schema")


def _schema_value(where: str, value: Any) -> dict[str, JsonValue] | None:
    """vLLM takes a JSON schema as an object or as JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ConstraintError(f"{where}: not JSON") from None
    if value is not None and not isinstance(value, dict):
        raise ConstraintError(f"{where}: a JSON schema is an object, got {value!r}")
    return value


def _tools(value: Any) -> list[ToolSpec] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise ConstraintError("tools: send a list of {\"type\": \"function\", \"function\": {...}}")
    specs = []
    for i, tool in enumerate(value):
        fn = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if not isinstance(fn, dict):
            raise ConstraintError(f"tools[{i}]: only function tools, {{\"type\": \"function\", \"function\": {{...}}}}")
        if not isinstance(fn.get("name"), str):
            raise ConstraintError(f"tools[{i}]: the function has no name")
        params = fn.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise ConstraintError(f"tools[{i}] ({fn['name']}): parameters must be a JSON schema object")
        specs.append(ToolSpec(name=fn["name"], description=fn.get("description") or "",
                              **({"parameters": params} if params is not None else {})))
    return specs or None


def _tool_choice(value: Any) -> str | None:
    """OpenAI's `tool_choice` as the config's string: auto, none, required or the tool's name."""
    if value is None or isinstance(value, str):
        return value  # an unknown string is check_constraint's to reject, with the tools' names
    fn = value.get("function") if isinstance(value, dict) and value.get("type") == "function" else None
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        name: str = fn["name"]
        return name
    raise ConstraintError(f"tool_choice {value!r}: use auto, none, required or "
                          "{\"type\": \"function\", \"function\": {\"name\": ...}}")


def _usage(out: ModelOutput) -> dict[str, JsonValue]:
    pt, ct = out.usage.prompt_tokens, out.usage.completion_tokens
    return {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}


def chat_completion(model: str, out: ModelOutput) -> dict[str, JsonValue]:
    """A chat-completions response; tool calls in OpenAI's form (content null, arguments as JSON text)."""
    message: dict[str, JsonValue] = {"role": "assistant", "content": out.text}
    finish = out.finish_reason
    if out.tool_calls:
        message["content"] = None
        message["tool_calls"] = [
            {"id": call.id or f"call_{uuid.uuid4().hex[:24]}", "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}
            for call in out.tool_calls]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(out),
    }


def text_completion(model: str, out: ModelOutput) -> dict[str, JsonValue]:
    return {
        "id": f"cmpl-{uuid.uuid4().hex[:12]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": out.text, "finish_reason": out.finish_reason, "logprobs": None}],
        "usage": _usage(out),
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
    p.add_argument("--retry-after-s", type=float, default=None,
                   help="send Retry-After (and retry-after-ms) with every 429, asking clients to wait this long")
    p.add_argument("--rate-limit-first", type=int, default=0, help="answer the first K requests with 429")
    p.add_argument("--images", type=Path, default=None,
                   help="answer /v1/images/generations from this folder: <sha256(prompt)[:16]>.png, else default.png")
    p.add_argument("--rate-limit-above", type=int, default=0,
                   help="answer 429 to a request that arrives while N are already in flight (0: never)")
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
                                per_request=args.per_request, retry_after_s=args.retry_after_s,
                                rate_limit_first=args.rate_limit_first, rate_limit_above=args.rate_limit_above,
                                images=args.images)
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
