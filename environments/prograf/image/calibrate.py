"""Calibrating the image-only verifier on our own renders, where the truth is known.

Every reference and mutant of the chosen tasks is drawn by our own render path
(`pictures.drawing_of`: SVG as the verifier sees it; DOT, Mermaid and schemdraw through our own
writers) and rendered to PNG at twice the verifier's size (800 px along the longer side, near a
text-to-image generator's 1024). The truth for each point is the structural verifier's verdict on
the same code (rendered, so a white-on-white mutant is false there too); points the structural
verifier gated are left out (their truth is their parent's). Identical pictures (a task's DOT and
Mermaid answers draw the same graph) count once.

Per check type, with "the point fails" as the positive class: precision = tp / (tp + fp) (when the
image check says fail, the point does fail), recall = tp / (tp + fn), pass precision =
tn / (tn + fn) (when it says pass, the point does pass); a point the image check itself leaves
undecided (`image_verify.Undecidable`) counts in neither, only in `undecided`. The rule, fixed before the first run: a
type is enabled only if precision >= 0.9, pass precision >= 0.9 and at least 5 known failures were
seen; otherwise its points are reported undecided.

Subsets, so a rule can be chosen on one part and reported on another: `parity` keeps the tasks
whose index in the corpus file (among the `categories` kept, when given) is even (0) or odd (1) -- session 12 chose its reading fixes on
the even tasks and reports the odd ones -- and `check_types` keeps only those types' points.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import numpy as np
from typing_extensions import TypedDict  # pydantic validates a typing.TypedDict only from Python 3.12

from environments.prograf.check.render import Renderer
from environments.prograf.check.verify import verify
from environments.prograf.generate.foreign import Output, generated
from environments.prograf.image.pictures import UNREADABLE, drawing_of
from environments.prograf.image.png import decode_png
from environments.prograf.image.verify import CALIBRATION_THRESHOLD, CHECK_TYPES, Pixels, decide
from environments.prograf.task import CATEGORIES, Solution, Task

SCALE = 2  # times the verifier's RENDER_SIZE (400 px)
MIN_FAILURES = 5
EXAMPLES = 5  # misjudged points kept per type and direction, for the report


def interleaved(tasks: list[Task], limit: int | None) -> list[Task]:
    """The first `limit` tasks taking the categories in turn, so a small limit sees all four."""
    by_cat = {c: [t for t in tasks if t.category == c] for c in CATEGORIES}
    order = [
        t
        for k in range(max(len(v) for v in by_cat.values()))
        for c in CATEGORIES
        if k < len(by_cat[c])
        for t in [by_cat[c][k]]
    ]
    return order[:limit]


def render_png(task: Task, sol: Solution, renderer: Renderer, augment: int | None = None) -> tuple[str, bytes]:
    """The drawn SVG's hash and its PNG at SCALE times the verifier's size; with `augment`, the
    picture varied as `image_augment` draws it from (augment, the SVG's hash)."""
    drawing = drawing_of(sol.format, sol.code, task.category)
    digest = hashlib.sha256(drawing.svg.encode()).hexdigest()
    if augment is None:
        return digest, renderer.png(drawing.svg, drawing.width * SCALE, drawing.height * SCALE)
    from environments.prograf.image.augment import draw, vary_pixels, vary_svg

    v = draw(f"{augment}/{digest}")
    png = renderer.png(vary_svg(drawing.svg, v), drawing.width * SCALE, drawing.height * SCALE)
    return digest, encode_png(vary_pixels(decode_png(png), v))


def encode_png(img: np.ndarray) -> bytes:
    import cv2

    ok, data = cv2.imencode(".png", img[..., ::-1])
    if not ok:
        raise ValueError("PNG encoding failed")
    return bytes(data)


def samples(task: Task, foreign: list[Output] | None = None) -> Iterator[tuple[str, Solution]]:
    """The task's references and mutants, then (when given) its foreign-style outputs."""
    for k, sol in enumerate(task.reference):
        yield f"reference {k} ({sol.format})", sol
    for k, sol in enumerate(task.mutants):
        yield f"mutant {k} ({sol.format}, {sol.fault})", sol
    for out in foreign or []:
        yield f"foreign {out.key}", Solution(format=out.format, code=out.code)


class Tally(TypedDict):
    """One check type's counts: a failure read as a failure is a true positive."""

    tp: int
    fp: int  # a point that holds, read as failed
    fn: int  # a point that fails, read as passed
    tn: int
    undecided: int
    false_fail: list[str]  # the first few fp and fn, in words
    false_pass: list[str]


class Rates(Tally):
    precision: float | None
    recall: float | None
    pass_precision: float | None
    enabled: bool
    why_disabled: str


class CalibrationReport(TypedDict):
    tasks: int
    parity: int | None
    foreign: bool
    augment: int | None
    excluded: list[str]
    categories: list[str] | None
    images: int
    undrawable: int
    scale: int
    threshold: float
    min_failures: int
    seconds: float
    image_seconds: float
    by_type: dict[str, Rates]


def _empty() -> Tally:
    return {"tp": 0, "fp": 0, "fn": 0, "tn": 0, "undecided": 0, "false_fail": [], "false_pass": []}


def _rates(row: Tally) -> Rates:
    tp, fp, fn, tn = row["tp"], row["fp"], row["fn"], row["tn"]
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    pass_precision = tn / (tn + fn) if tn + fn else None
    why = []
    if tp + fn < MIN_FAILURES:
        why.append(f"only {tp + fn} known failures (< {MIN_FAILURES})")
    if precision is None or precision < CALIBRATION_THRESHOLD:
        why.append(f"precision {precision if precision is None else round(precision, 3)} < {CALIBRATION_THRESHOLD}")
    if pass_precision is None or pass_precision < CALIBRATION_THRESHOLD:
        why.append(
            f"pass precision {pass_precision if pass_precision is None else round(pass_precision, 3)}"
            f" < {CALIBRATION_THRESHOLD}"
        )
    return {
        **row,
        "precision": precision,
        "recall": recall,
        "pass_precision": pass_precision,
        "enabled": not why,
        "why_disabled": "; ".join(why),
    }


def subset(tasks: list[Task], parity: int | None, limit: int | None) -> list[Task]:
    """The tasks with index (in the corpus file) of this parity, then the first `limit` interleaved."""
    if parity not in (None, 0, 1):
        raise ValueError(f"parity must be 0 (even task index) or 1 (odd), got {parity!r}")
    kept = [t for k, t in enumerate(tasks) if parity is None or k % 2 == parity]
    return interleaved(kept, limit)


def calibrate(
    tasks: list[Task],
    renderer: Renderer,
    limit: int | None = None,
    parity: int | None = None,
    check_types: frozenset[str] | None = None,
    categories: frozenset[str] | None = None,
    foreign: bool = False,
    augment: int | None = None,
    exclude: frozenset[str] = frozenset(),
) -> CalibrationReport:
    """The per-type table over the references and mutants of the chosen tasks (see `subset`);
    `categories` keeps only those categories' tasks; `foreign` adds each task's foreign-style
    outputs (`foreign.generated`, correct and faulty); `augment` draws every picture varied by
    `image_augment` from that seed instead of clean; `exclude` leaves those task ids out (tasks
    looked at while a rule was chosen, so a report half stays unseen)."""
    start = time.perf_counter()
    odd = sorted((categories or frozenset()) - set(CATEGORIES))
    if odd:
        raise ValueError(
            f"unknown categor{'y' if len(odd) == 1 else 'ies'} {', '.join(odd)}; choose from {', '.join(CATEGORIES)}"
        )
    chosen = subset([t for t in tasks if categories is None or t.category in categories], parity, limit)
    chosen = [t for t in chosen if t.id not in exclude]
    by_task: dict[str, list[Output]] = {}
    if foreign:
        for out in generated(tasks):
            by_task.setdefault(out.task_id, []).append(out)
    every_type = frozenset(CHECK_TYPES.values())
    unknown = sorted((check_types or frozenset()) - every_type)
    if unknown:
        raise ValueError(f"unknown check type(s) {', '.join(unknown)}; choose from {', '.join(sorted(every_type))}")
    wanted = check_types or every_type
    table = {t: _empty() for t in sorted(wanted)}
    seen: set[str] = set()
    images = skipped = 0
    image_seconds = 0.0
    for task in chosen:
        if not any(CHECK_TYPES.get(vp.check) in wanted for vp in task.points):
            continue  # none of the chosen check types: nothing to read
        for name, sol in samples(task, by_task.get(task.id)):
            try:
                digest, png = render_png(task, sol, renderer, augment)
            except UNREADABLE:
                skipped += 1  # nothing to draw (e.g. a mutant that empties the drawing): no picture to judge
                continue
            if digest in seen:
                continue
            seen.add(digest)
            truth = {p.id: p for p in verify(task, sol.format, sol.code, renderer).points}
            t0 = time.perf_counter()
            px = Pixels(decode_png(png))
            images += 1
            for vp in task.points:
                if CHECK_TYPES.get(vp.check) not in wanted or truth[vp.id].gated:
                    continue
                got = decide(px, task, vp, every_type)
                row = table[CHECK_TYPES[vp.check]]
                if got.status == "undecided":
                    row["undecided"] += 1
                    continue
                _tally(
                    row,
                    truth[vp.id].passed,
                    got.status == "pass",
                    f"{task.id} {name} {vp.id}: {got.reason} (truth: {truth[vp.id].reason})",
                )
            image_seconds += time.perf_counter() - t0
    return {
        "tasks": len(chosen),
        "parity": parity,
        "foreign": foreign,
        "augment": augment,
        "excluded": sorted(exclude),
        "categories": sorted(categories) if categories else None,
        "images": images,
        "undrawable": skipped,
        "scale": SCALE,
        "threshold": CALIBRATION_THRESHOLD,
        "min_failures": MIN_FAILURES,
        "seconds": round(time.perf_counter() - start, 1),
        "image_seconds": round(image_seconds, 1),
        "by_type": {t: _rates(row) for t, row in table.items()},
    }


def _tally(row: Tally, truly_passed: bool, image_passed: bool, note: str) -> None:
    if truly_passed:
        if image_passed:
            row["tn"] += 1
        else:
            row["fp"] += 1
            if len(row["false_fail"]) < EXAMPLES:
                row["false_fail"].append(note)
    elif image_passed:
        row["fn"] += 1
        if len(row["false_pass"]) < EXAMPLES:
            row["false_pass"].append(note)
    else:
        row["tp"] += 1


def enabled_types(report: CalibrationReport) -> frozenset[str]:
    return frozenset(t for t, row in report["by_type"].items() if row["enabled"])


def format_table(report: CalibrationReport) -> str:
    part = {None: "", 0: " (even task indices)", 1: " (odd task indices)"}[report.get("parity")]
    lines = [
        f"{report['tasks']} tasks{part}, {report['images']} distinct images (x{report['scale']} renders), "
        f"{report['seconds']} s ({report['image_seconds']} s reading images); rule: precision and pass "
        f"precision >= {report['threshold']}, >= {report['min_failures']} known failures",
        f"{'check type':<18} {'tp/fp/fn/tn':>16} {'undec':>5} {'precision':>9} {'recall':>6} {'pass prec':>9}  verdict",
    ]
    for t, row in report["by_type"].items():

        def f(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}"

        counts = f"{row['tp']}/{row['fp']}/{row['fn']}/{row['tn']}"
        verdict = "enabled" if row["enabled"] else f"disabled: {row['why_disabled']}"
        lines.append(
            f"{t:<18} {counts:>16} {row['undecided']:>5} {f(row['precision']):>9} {f(row['recall']):>6} "
            f"{f(row['pass_precision']):>9}  {verdict}"
        )
    return "\n".join(lines)
