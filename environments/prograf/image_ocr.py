"""Text read off an image by OCR (rapidocr: its ONNX models ship in the wheel, so nothing is
downloaded), and the rule by which an expected label counts as found.

The matching rule (`label_matches`), stated once:
- both sides are normalised: NFKC, lower case, Ω -> ohm, µ -> u, whitespace and quotes removed,
  and the OCR confusables 0/o and 1/l/i/| folded together;
- a label of at most 3 normalised characters (a point letter, "R1", "yes") must equal a whole
  OCR line or one of its whitespace-separated words -- never a piece of a longer word, so "A" is
  not found in "Admin";
- a longer label is found when it is a substring of a line, or when some window of the line as
  long as the label (or the whole line) has difflib similarity >= 0.85 to it: one misread
  character in a short word is forgiven, a different word is not.
"""

from __future__ import annotations

import difflib
import re
import threading
import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np

SHORT_LABEL = 3  # normalised characters: up to this many, only whole words match
SIMILARITY = 0.85
CONFUSABLES = str.maketrans({"0": "o", "1": "l", "i": "l", "|": "l"})

_engine: Any = None
_engine_lock = threading.Lock()


@dataclass(frozen=True)
class TextLine:
    text: str
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels
    score: float

    @property
    def height(self) -> float:
        return self.box[3] - self.box[1]


def engine() -> Any:
    """The OCR engine, built once: onnxruntime on one thread (the machine's cores are shared)."""
    global _engine
    with _engine_lock:
        if _engine is None:
            from rapidocr import RapidOCR

            _engine = RapidOCR(params={"EngineConfig.onnxruntime.intra_op_num_threads": 1,
                                       "EngineConfig.onnxruntime.inter_op_num_threads": 1,
                                       "Global.log_level": "warning"})
        return _engine


def read_text(img: np.ndarray) -> list[TextLine]:
    """Every line of text OCR finds in RGB pixels, with its box and confidence."""
    result = engine()(img)
    if result.txts is None:
        return []
    lines = []
    for text, box, score in zip(result.txts, result.boxes, result.scores):
        xs, ys = [float(p[0]) for p in box], [float(p[1]) for p in box]
        lines.append(TextLine(str(text), (min(xs), min(ys), max(xs), max(ys)), float(score)))
    return lines


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = text.replace("ω", "ohm").replace("µ", "u").replace("μ", "u")
    return re.sub(r"[\s\"'`]", "", text).translate(CONFUSABLES)


def _words(text: str) -> list[str]:
    return [normalise(w) for w in unicodedata.normalize("NFKC", text).split()]


def label_matches(expected: str, line: str) -> bool:
    """Whether one OCR line shows `expected` (the rule in the module's docstring)."""
    want, have = normalise(expected), normalise(line)
    if not want or not have:
        return False
    if len(want) <= SHORT_LABEL:
        return want == have or want in _words(line)
    if want in have:
        return True
    windows = [have] + [have[k:k + len(want)] for k in range(max(0, len(have) - len(want)) + 1)]
    return max(difflib.SequenceMatcher(None, want, w).ratio() for w in windows) >= SIMILARITY


def occurrences(expected: str, lines: list[TextLine]) -> list[TextLine]:
    """The lines that show `expected`; a short label counts once per matching word."""
    found: list[TextLine] = []
    want = normalise(expected)
    for line in lines:
        if not label_matches(expected, line.text):
            continue
        repeats = _words(line.text).count(want) if len(want) <= SHORT_LABEL else 1
        found.extend([line] * max(1, repeats))
    return found
