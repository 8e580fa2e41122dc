"""Text read off an image by OCR (rapidocr: its ONNX models ship in the wheel, so nothing is
downloaded), and the rule by which an expected label counts as found.

The matching rule (`label_matches`), stated once:
- both sides are normalised: NFKC, lower case, Ω -> ohm (and a Q closing a number, "2kQ": Ω
  misread), µ -> u, whitespace and quotes removed,
  and the OCR confusables 0/o and 1/l/i/|// folded together; each word loses dots at its ends
  ("•O", ".o", "A·": a point's dot read as part of its letter; "3.5" keeps its inner dot);
- a label of at most 3 normalised characters (a point letter, "R1", "yes") must equal a whole
  OCR line or one of its whitespace-separated words -- never a piece of a longer word, so "A" is
  not found in "Admin" -- except that a word made wholly of the task's own labels run together
  ("yesno", "R210kΩ": two labels drawn close enough to be read as one box) counts as each of
  them (`split_merged`; `vocabulary` is every label text of the task);
- a longer label is found when it is a substring of a line, or when some window of the line as
  long as the label (or the whole line) has difflib similarity >= 0.85 to it, or some window
  one character shorter, as long or longer is at most one edit (Levenshtein) from it: one
  misread character is forgiven ("refurd" is "refund"; similarity alone forgives none in a
  word under 7 letters) unless the label holds a digit ("10 cm" is not "13 cm"), a different
  word is not. It counts once per
  non-overlapping copy in the line ("fault fault": two arrows' labels read as one line). A long
  label no single line shows may be split over two boxes side by side on one row ("11" "cm"):
  such a pair, read left to right, counts as one line (`side_by_side`).

Reading (`read_text`), fixed on the development split of the 2026-12-03 calibration (tasks with
even index; docs/prograf.md, session 12): the 180-degree text-orientation classifier is off (it
turned short upright words upside down: "End" -> "puj", "no" -> "ou"; our renders and
text-to-image diagrams write text upright), and the detector keeps boxes whose mean score is
>= `BOX_THRESHOLD` (rapidocr's default 0.5 dropped lone, clearly drawn point letters).
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
DOTS = ".·•∙●◦"  # a point's dot, read as a character next to its letter
CONFUSABLES = str.maketrans({"0": "o", "1": "l", "i": "l", "|": "l", "/": "l"})
BOX_THRESHOLD = 0.3  # the detector's box score; see the module docstring

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
                                       "Global.use_cls": False,  # see the module docstring
                                       "Det.box_thresh": BOX_THRESHOLD,
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
    text = re.sub(r"(?<=[\dkm])q(?=\s|$)", "ohm", text)  # Ω read as Q after a number ("2kQ")
    text = " ".join(w.strip(DOTS) for w in text.split())
    return re.sub(r"[\s\"'`]", "", text).translate(CONFUSABLES)


def _words(text: str) -> list[str]:
    return [normalise(w) for w in unicodedata.normalize("NFKC", text).split()]


def split_merged(word: str, vocabulary: frozenset[str]) -> list[str] | None:
    """`word` (normalised) as two or more normalised vocabulary labels run together, else None."""
    parts: dict[int, list[str]] = {0: []}  # prefix length -> one way to spell it with labels
    for end in range(1, len(word) + 1):
        for label in vocabulary:
            start = end - len(label)
            if label and start in parts and word[start:end] == label:
                parts[end] = parts[start] + [label]
                break
    found = parts.get(len(word))
    return found if found is not None and len(found) >= 2 else None


def _short_copies(want: str, line: str, vocabulary: frozenset[str]) -> int:
    words = _words(line)
    copies = words.count(want)
    for word in words:
        merged = split_merged(word, vocabulary) if word != want else None
        copies += merged.count(want) if merged else 0
    return copies + (1 if not copies and normalise(line) == want else 0)


def edits(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions turning a into b."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def _long_copies(want: str, have: str, has_digit: bool) -> int:
    if want in have:
        return have.count(want)
    windows = [have] + [have[k:k + len(want)] for k in range(max(0, len(have) - len(want)) + 1)]
    if max(difflib.SequenceMatcher(None, want, w).ratio() for w in windows) >= SIMILARITY:
        return 1
    if has_digit:
        return 0  # "10 cm" and "13 cm" differ by one edit: a number is read exactly or not at all
    near = [have[k:k + n] for n in (len(want) - 1, len(want), len(want) + 1) for k in range(max(0, len(have) - n) + 1)]
    return int(any(edits(want, w) <= 1 for w in near))


def copies(expected: str, line: str, vocabulary: frozenset[str] = frozenset()) -> int:
    """How many times one OCR line shows `expected` (the rule in the module's docstring)."""
    want, have = normalise(expected), normalise(line)
    if not want or not have:
        return 0
    if len(want) <= SHORT_LABEL:
        return _short_copies(want, line, frozenset(normalise(v) for v in vocabulary))
    return _long_copies(want, have, any(ch.isdigit() for ch in expected))


def label_matches(expected: str, line: str, vocabulary: frozenset[str] = frozenset()) -> bool:
    """Whether one OCR line shows `expected` at least once."""
    return copies(expected, line, vocabulary) > 0


def side_by_side(lines: list[TextLine]) -> list[TextLine]:
    """Pairs of boxes on one row (centres within half a height), the gap between them at most a
    height: one line of text the detector cut in two."""
    pairs = []
    for a in lines:
        for b in lines:
            height = max(a.height, b.height, 1.0)
            row = abs((a.box[1] + a.box[3]) - (b.box[1] + b.box[3])) / 2 <= height / 2
            if a is not b and row and 0 <= b.box[0] - a.box[2] <= height:
                box = (a.box[0], min(a.box[1], b.box[1]), b.box[2], max(a.box[3], b.box[3]))
                pairs.append(TextLine(f"{a.text} {b.text}", box, min(a.score, b.score)))
    return pairs


def occurrences(expected: str, lines: list[TextLine], vocabulary: frozenset[str] = frozenset()) -> list[TextLine]:
    """The lines that show `expected`, each repeated once per copy it shows."""
    found = [line for line in lines for _ in range(copies(expected, line.text, vocabulary))]
    if len(normalise(expected)) <= SHORT_LABEL:
        return found
    alone = {id(line) for line in found}
    for pair in side_by_side([line for line in lines if id(line) not in alone]):
        found.extend([pair] * copies(expected, pair.text, vocabulary))
    return found
