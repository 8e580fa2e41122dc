"""`harness bench structured`: the embedded engine's decode speed with and without a JSON-schema
constraint, and the grammar compile time.

Same prompts, same batch, a fixed number of new tokens per request in both modes: free requests
ignore the end-of-turn token, and the default schema (a catalogue of at least 24 items) cannot be
complete within the default 64 tokens, so the grammar masks every one of them. Each (batch, mode)
runs `repeats` times, the two modes interleaved, after one full-length warm-up (the KV pool
grows to its size there); the table shows the median. `tok/s` counts every new
token over the whole run (prefill included, the same in both modes); `decode tok/s` leaves out
the first step (prefill and first token); `mask ms/tok` is the time spent in the constraint (fill
and apply the token bitmask, accept the token) per constrained token. With `--schema` the
constrained requests may finish before `--max-tokens` (see `new tokens` and `finish`).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, TypedDict

import typer
from pydantic import JsonValue

CATALOGUE_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"items": {"type": "array", "minItems": 24, "maxItems": 24, "items": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 24}, "price": {"type": "number"},
                       "in_stock": {"type": "boolean"}},
        "required": ["name", "price", "in_stock"]}}},
    "required": ["items"],
}
TOPICS = ["a bakery", "a bicycle shop", "a bookshop", "a garden centre", "a music store", "a toy shop",
          "a tea house", "a hardware store"]


class StructuredRow(TypedDict):
    """One (batch, mode) row: medians over the repeats."""

    batch: int
    mode: str
    new_tokens: float
    wall_s: float
    tok_s: float
    decode_tok_s: float
    mask_ms_per_token: float | None  # free decoding: None
    finish: list[str]


class CompileTimes(TypedDict):
    tokenizer_info_s: float
    cold_s: float
    cached_s: float


class StructuredResult(TypedDict):
    """The benchmark's result, as `--json` prints it (key order included)."""

    rows: list[StructuredRow]
    ratio_constrained_over_free: dict[str, float]  # str(batch) -> constrained tok/s over free tok/s
    max_tokens: int
    repeats: int
    compile: CompileTimes
    schema: dict[str, JsonValue]
    threads: int


class _Timed:
    """Wraps a request's constraint and adds up the time spent in it."""

    def __init__(self, inner: Any, clock: list[float]) -> None:
        self.inner, self.clock = inner, clock

    def mask(self, logits: Any) -> None:
        t = time.perf_counter()
        self.inner.mask(logits)
        self.clock[0] += time.perf_counter() - t

    def accept(self, token: int) -> bool:
        t = time.perf_counter()
        ok = bool(self.inner.accept(token))
        self.clock[0] += time.perf_counter() - t
        return ok

    @property
    def finished(self) -> bool:
        return bool(self.inner.finished)


def _one_run(engine: Any, requests: list[Any]) -> tuple[float, float, int]:
    """(wall seconds, seconds after the first step, new tokens) of running `requests` together."""
    started = time.perf_counter()
    for req in requests:
        engine.add(req)
    engine.step()
    after_first = time.perf_counter()
    while engine.has_work():
        engine.step()
    ended = time.perf_counter()
    return ended - started, ended - after_first, sum(len(r.output_ids) for r in requests)


def run_structured_bench(*, batches: list[int], max_tokens: int = 64, repeats: int = 3,
                         schema: dict[str, JsonValue] | None = None, threads: int | None = None,
                         progress: Callable[[str], None] | None = None) -> StructuredResult:
    from preft.engine import Engine, Request  # first: OpenMP's waiting is set before torch loads
    import torch

    from harness.providers.embedded import as_id_list, stop_token_ids
    from harness.providers.embedded import load_model
    from preft.constrain import Grammars
    from preft.serving import apply_engine_threads

    if max_tokens < 2 or repeats < 1 or not batches or min(batches) < 1:
        raise ValueError("max_tokens must be at least 2, repeats and every batch size at least 1")
    say = progress or (lambda _msg: None)
    schema = schema if schema is not None else CATALOGUE_SCHEMA
    if threads is not None:
        torch.set_num_threads(threads)
    else:
        apply_engine_threads()
    model, tokenizer = load_model()
    stops = stop_token_ids(model, tokenizer)
    width = int(model.get_output_embeddings().weight.shape[0])

    # Compile times: a fresh Grammars, so nothing is cached from earlier calls in this process.
    grammars = Grammars(tokenizer, width, stops)
    t = time.perf_counter()
    grammars.compile("json_schema", schema)  # ConstraintError: the schema cannot be enforced
    cold = time.perf_counter() - t
    lookups = []
    for _ in range(50):  # one lookup is tens of microseconds: the median of many
        t = time.perf_counter()
        grammars.compile("json_schema", schema)
        lookups.append(time.perf_counter() - t)
    cached = statistics.median(lookups)

    prompts = [as_id_list(tokenizer.apply_chat_template(
        [{"role": "user", "content": f"List the products of {topic} as JSON: name, price, in stock."}],
        add_generation_prompt=True, tokenize=True)) for topic in TOPICS]
    engine = Engine(model)
    rows: list[StructuredRow] = []
    modes = ("free", "json_schema")
    for batch in batches:
        ids = [prompts[i % len(prompts)] for i in range(batch)]

        def requests(mode: str, n: int, clock: list[float], ids: list[list[int]] = ids) -> list[Any]:
            if mode == "free":
                return [Request(p, n) for p in ids]  # no stop ids: exactly n tokens
            return [Request(p, n, stop_ids=stops, constraint=_Timed(grammars.constraint("json_schema", schema), clock))
                    for p in ids]

        _one_run(engine, requests("free", max_tokens, [0.0]))  # warm-up: grows the KV pool to full length
        runs: dict[str, list[tuple[Any, ...]]] = {m: [] for m in modes}
        for _ in range(repeats):  # the modes interleaved: drift in the machine's load hits both alike
            for mode in modes:
                clock = [0.0]
                reqs = requests(mode, max_tokens, clock)
                wall, decode, tokens = _one_run(engine, reqs)
                runs[mode].append((wall, decode, tokens, clock[0], sorted({str(r.finish_reason) for r in reqs})))
        for mode in modes:
            got, med = runs[mode], statistics.median  # per run, then the median: a user schema may end runs early
            row: StructuredRow = {"batch": batch, "mode": mode, "new_tokens": med(r[2] for r in got),
                                  "wall_s": round(med(r[0] for r in got), 3), "tok_s": round(med(r[2] / r[0] for r in got), 1),
                                  "decode_tok_s": round(med((r[2] - batch) / max(r[1], 1e-9) for r in got), 1),
                                  "mask_ms_per_token": round(med(1000 * r[3] / r[2] for r in got), 3) if mode != "free" else None,
                                  "finish": sorted({f for r in got for f in r[4]})}
            rows.append(row)
            say(f"batch {batch} {mode}: {row['tok_s']} tok/s")
    ratios: dict[str, float] = {}
    for batch in batches:
        free, constrained = (next(r for r in rows if r["batch"] == batch and r["mode"] == m)
                             for m in ("free", "json_schema"))
        ratios[str(batch)] = round(constrained["tok_s"] / free["tok_s"], 3)
    return {"rows": rows, "ratio_constrained_over_free": ratios, "max_tokens": max_tokens, "repeats": repeats,
            "compile": {"tokenizer_info_s": round(grammars.info_seconds, 4), "cold_s": round(cold, 5),
                        "cached_s": round(cached, 7)},
            "schema": schema, "threads": torch.get_num_threads()}


def format_table(result: StructuredResult) -> str:
    lines = ["| batch | mode | new tokens | wall s | tok/s | decode tok/s | mask ms/tok | finish |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        mask = "-" if r["mask_ms_per_token"] is None else f"{r['mask_ms_per_token']:.3f}"
        lines.append(f"| {r['batch']} | {r['mode']} | {r['new_tokens']} | {r['wall_s']:.2f} | {r['tok_s']:.1f} | "
                     f"{r['decode_tok_s']:.1f} | {mask} | {','.join(r['finish'])} |")
    ratios = ", ".join(f"batch {b}: {v:.2f}" for b, v in result["ratio_constrained_over_free"].items())
    c = result["compile"]
    lines.append(f"constrained / free tok/s: {ratios}")
    lines.append(f"grammar compile: cold {1000 * c['cold_s']:.1f} ms, cached {1e6 * c['cached_s']:.1f} us (median) "
                 f"(tokenizer info, once per process: {1000 * c['tokenizer_info_s']:.0f} ms); "
                 f"threads {result['threads']}, {result['max_tokens']} new tokens per request, "
                 f"median of {result['repeats']}")
    return "\n".join(lines)


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(2)


def bench_structured_cmd(
    batches: str = typer.Option("1,8", "--batches", help="Batch sizes, comma-separated."),
    max_tokens: int = typer.Option(64, "--max-tokens", min=2, help="New tokens per request (fixed)."),
    repeats: int = typer.Option(3, "--repeats", min=1, help="Timed runs per row (after a warm-up)."),
    schema: Optional[Path] = typer.Option(None, "--schema", help="JSON schema file (default: a 24-item catalogue)."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="torch threads (default: as the engine)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Embedded-engine tokens/s with and without a JSON-schema constraint, and grammar compile time."""
    try:
        sizes = [int(b) for b in batches.split(",") if b.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        _fail(f"--batches {batches!r}: write comma-separated positive integers, e.g. 1,8")
    loaded = None
    if schema is not None:
        try:
            loaded = json.loads(schema.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            _fail(f"--schema {schema}: cannot read a JSON schema from it ({exc})")
        if not isinstance(loaded, dict):
            _fail(f"--schema {schema}: a JSON schema is an object")
    from harness.providers.base import ConstraintError

    try:
        result = run_structured_bench(batches=sizes, max_tokens=max_tokens, repeats=repeats, schema=loaded,
                                      threads=threads, progress=lambda m: print(m, file=sys.stderr, flush=True))
    except ConstraintError as exc:
        _fail(f"--schema {schema}: {exc}")
    except ValueError as exc:
        _fail(str(exc))
    print(json.dumps(result, indent=2) if as_json else format_table(result))
