"""Output constraints for the PreFT engine, with xgrammar: JSON schema, regex and choice.

`Grammars` belongs to one tokenizer: it builds xgrammar's `TokenizerInfo` once (the engine's stop
ids as the grammar's stop tokens, the model's logits width as the vocabulary, so ids past the
tokenizer's vocabulary are never allowed) and compiles each grammar once, caching it by
(kind, canonical spec). `constraint()` returns a fresh `GrammarConstraint` -- one xgrammar
`GrammarMatcher` for one request -- which implements the engine's `TokenConstraint`: mask the
request's logits row, accept the chosen token, finished once the grammar accepted a stop token.

A grammar xgrammar cannot build (an unsupported schema keyword, a regex with lookaround or
backreferences, a contradictory range) is a `ConstraintError` naming the input.
"""

from __future__ import annotations

import collections
import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import torch

from harness.providers.base import ConstraintError, ModelError

KINDS = ("json_schema", "regex", "choice")
CACHE_SIZE = 256  # compiled grammars kept per tokenizer (a small schema compiles to ~100 KB)
MISSING_XGRAMMAR = ("constrained decoding in the embedded engine needs the package xgrammar: "
                    "run `pip install 'xgrammar>=0.1.25,<0.3'` (or `make install`)")


def _xgrammar() -> Any:
    try:
        import xgrammar
    except ImportError:
        raise ModelError(MISSING_XGRAMMAR) from None
    return xgrammar


def canonical(kind: str, spec: Any) -> str:
    """The cache key's text. JSON without sorting keys: property order is part of a schema's
    meaning here (xgrammar emits properties in the order the schema lists them)."""
    if kind == "regex":
        if not isinstance(spec, str):
            raise ConstraintError(f"regex: give a string, not {type(spec).__name__}")
        return spec
    return json.dumps(spec, ensure_ascii=False, separators=(",", ":"))


def describe(kind: str, spec: Any, limit: int = 80) -> str:
    """The input, as an error message names it."""
    text = canonical(kind, spec)
    text = text if len(text) <= limit else text[:limit - 3] + "..."
    return {"json_schema": f"JSON schema {text}", "regex": f"regex {text!r}", "choice": f"choice {text}"}[kind]


def _reason(exc: Exception) -> str:
    """xgrammar's message without its C++ prefix (`[time] /path/file.cc:94: `)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return re.sub(r"^\[[^\]]*\]\s*\S+:\d+:\s*", "", text)


def choice_grammar(options: list[str]) -> str:
    """EBNF for "exactly one of these strings": JSON string literals are valid EBNF literals."""
    return "root ::= " + " | ".join(json.dumps(o) for o in options)


@dataclass
class CompileStats:
    compiled: int = 0
    hits: int = 0
    seconds: float = 0.0  # spent compiling (misses only)


class Grammars:
    """xgrammar for one tokenizer: its `TokenizerInfo`, a compiler and the compiled-grammar cache."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: frozenset[int] | set[int]) -> None:
        xgr = _xgrammar()
        if not stop_ids:
            raise ValueError("constrained decoding needs at least one stop token id")
        started = time.perf_counter()
        self.tokenizer = tokenizer  # held: `shared_grammars` keys on its id
        self.vocab_size = int(vocab_size)
        self.info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=self.vocab_size,
                                                       stop_token_ids=sorted(stop_ids))
        # Our own cache below decides what stays; xgrammar's would keep a second copy.
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=2, cache_enabled=False)
        self.info_seconds = time.perf_counter() - started
        # Special tokens other than the stop tokens (<|im_start|>, <repo_name>, ...) are ordinary
        # text to xgrammar; they never belong inside a constrained reply, and decoding with
        # skip_special_tokens would drop them from the text the grammar checked.
        special = set(getattr(tokenizer, "all_special_ids", []) or []) - set(stop_ids)
        self.banned = torch.tensor(sorted(i for i in special if 0 <= i < self.vocab_size), dtype=torch.long)
        self._cache: collections.OrderedDict[tuple[str, str], Any] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.stats = CompileStats()

    def compile(self, kind: str, spec: Any) -> Any:
        """The compiled grammar for (kind, spec), from the cache when it was compiled before."""
        if kind not in KINDS:
            raise ConstraintError(f"constraint kind {kind!r}: use one of {', '.join(KINDS)}")
        key = (kind, canonical(kind, spec))
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self.stats.hits += 1
                return self._cache[key]
        started = time.perf_counter()
        try:
            if kind == "json_schema":
                # One line, `, ` and `: ` separators: free whitespace lets a small model loop on
                # spaces until max_tokens.
                compiled = self.compiler.compile_json_schema(key[1], any_whitespace=False, strict_mode=True)
            elif kind == "regex":
                compiled = self.compiler.compile_regex(spec)
            else:
                if not isinstance(spec, list) or not spec or not all(isinstance(o, str) and o for o in spec):
                    raise ConstraintError(f"{describe(kind, spec)}: give at least one non-empty string")
                compiled = self.compiler.compile_grammar(choice_grammar(spec))
        except ConstraintError:
            raise
        except Exception as exc:  # noqa: BLE001 - xgrammar raises RuntimeError/ValueError with its reason
            raise ConstraintError(f"{describe(kind, spec)} cannot be enforced by the embedded engine: "
                                  f"{_reason(exc)}") from None
        with self._lock:
            self.stats.compiled += 1
            self.stats.seconds += time.perf_counter() - started
            self._cache[key] = compiled
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return compiled

    def constraint(self, kind: str, spec: Any) -> "GrammarConstraint":
        """A fresh matcher for one request (compiling the grammar on first use)."""
        return GrammarConstraint(self, self.compile(kind, spec))


class GrammarConstraint:
    """One request's xgrammar matcher, as the engine's `TokenConstraint`."""

    def __init__(self, grammars: Grammars, compiled: Any) -> None:
        xgr = _xgrammar()
        self._apply = xgr.apply_token_bitmask_inplace
        self._matcher = xgr.GrammarMatcher(compiled)
        self._bitmask = xgr.allocate_token_bitmask(1, grammars.vocab_size)
        self._vocab_size = grammars.vocab_size
        self._banned = grammars.banned

    def mask(self, logits: torch.Tensor) -> None:
        row = logits.view(1, -1)
        if row.shape[1] > self._vocab_size:  # wider logits than the grammar knows: never those ids
            row[:, self._vocab_size:] = float("-inf")
        if self._matcher.fill_next_token_bitmask(self._bitmask):  # False: every token allowed
            self._apply(row, self._bitmask, vocab_size=min(row.shape[1], self._vocab_size))
        if self._banned.numel():
            row[0, self._banned] = float("-inf")

    def accept(self, token: int) -> bool:
        return bool(self._matcher.accept_token(int(token)))

    @property
    def finished(self) -> bool:
        return bool(self._matcher.is_terminated())

    @property
    def complete(self) -> bool:
        """The output so far is a whole match (true also before the stop token is accepted)."""
        return bool(self._matcher.is_completed())


_SHARED: dict[tuple[int, int, frozenset[int]], Grammars] = {}
_SHARED_LOCK = threading.Lock()


def shared_grammars(tokenizer: Any, vocab_size: int, stop_ids: frozenset[int]) -> Grammars:
    """The process's `Grammars` for this tokenizer (built once: ~0.3 s for SmolLM2's 49k tokens)."""
    key = (id(tokenizer), int(vocab_size), frozenset(stop_ids))
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = Grammars(tokenizer, vocab_size, stop_ids)
        return _SHARED[key]
