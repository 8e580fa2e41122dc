"""ProGraf's section of the offline HTML report: per run, each task's render next to its
verification points (passed or failed, with the measured value and the reason).

The picture is made here from the recorded code through `image/pictures.py` (the sandboxed render path,
cached by content hash, so a scored run's SVG renders are cache hits): SVG as the verifier rendered
it; DOT, Mermaid and schemdraw drawn from what the verifier parsed, by our own writer. The failed
hidden points of the recorded verdict are boxed where the drawing places them, with a legend.
"""

from __future__ import annotations

from html import escape
from typing import Any

from pydantic import JsonValue

from environments.prograf.check.render import Renderer, cache_dir
from environments.prograf.check.verify import PointResult, Verdict
from environments.prograf.generate.build import CORPUS
from environments.prograf.image.pictures import picture
from environments.prograf.task import Task, load_tasks
from harness.records import SampleRecord
from harness.run_folder import RunFolder
from harness.presenter import Presenter, ReportInput, ReportSection, picture_html

MAX_TASKS_PER_RUN = 16  # failed tasks first; the rest are in `harness view`


def recorded_verdict(record: SampleRecord) -> Verdict | None:
    """The verdict the scorer recorded (its points), or None when the record has none readable."""
    scores = record.scores or {}
    try:
        points = [PointResult(**p) for p in scores.get("points") or []]
    except (TypeError, ValueError):
        return None
    return Verdict(task_id=record.sample_id, format=str(scores.get("format", "")), passed=bool(scores.get("passed")),
                   point_rate=float(scores.get("point_rate") or 0.0), points=points)


def task_picture(record: SampleRecord, tasks: dict[str, Task], renderer: Renderer, caption: str) -> str | None:
    """The base64 PNG of the record's code, its failed points marked; None when it cannot be drawn."""
    output = record.output or {}
    fmt, code = output.get("format") or (record.scores or {}).get("format"), output.get("code")
    task, verdict = tasks.get(record.sample_id), recorded_verdict(record)
    if task is None or verdict is None or not isinstance(code, str) or not isinstance(fmt, str):
        return None
    pic = picture(task, fmt, code, renderer, caption, verdict=verdict)
    return pic["png"] if pic else None


def _measured(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def points_table(points: list[dict[str, JsonValue]]) -> str:
    """Every point with its outcome; when all failed for one reason (unreadable output), one line.
    The points are a record's as read from disk, of any version: each key is read defensively."""
    reasons = {str(p.get("reason", "")) for p in points}
    if len(points) > 1 and len(reasons) == 1 and not any(p.get("passed") for p in points):
        return (f'<p class="note"><span class="bad">all {len(points)} points FAIL</span>: '
                f"{escape(reasons.pop())}</p>")
    rows = []
    for p in points:
        ok = bool(p.get("passed"))
        mark = '<span class="good">pass</span>' if ok else (
            '<span class="unsure">gated</span>' if p.get("gated") else '<span class="bad">FAIL</span>')
        rows.append(f'<tr class="{"passed" if ok else "failed"}"><td><code>{escape(str(p.get("id", "")))}</code></td>'
                    f"<td>{escape(str(p.get('kind', '')))}</td><td>{escape(str(p.get('component', '')))}</td>"
                    f"<td>{mark}</td><td>{escape(_measured(p.get('measured')))}</td>"
                    f"<td>{'' if ok else escape(str(p.get('reason', '')))}</td></tr>")
    return ('<table class="points compact"><thead><tr><th>point</th><th>kind</th><th>component</th><th></th><th>measured</th>'
            f"<th>reason</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def trace_line(trace: list[Any]) -> str:
    """The loop's steps as recorded (`prograf-loop`): plan, commit, rollback, replan, finalize."""
    steps = []
    for t in trace:
        if not isinstance(t, dict):
            continue
        extra = {k: v for k, v in t.items() if k in ("call", "accepted", "failed", "calls")}
        if "steps" in t and isinstance(t["steps"], list):
            extra["steps"] = len(t["steps"])
        steps.append(str(t.get("node", "?")) + (f"({', '.join(f'{k} {v}' for k, v in extra.items())})" if extra else ""))
    return f'<p class="note">loop: {escape(" -> ".join(steps))}</p>' if steps else ""


def _task_html(record: SampleRecord, renderer: Renderer, tasks: dict[str, Task]) -> str:
    output, scores = record.output or {}, record.scores or {}
    fmt, code = str(output.get("format") or scores.get("format") or "?"), output.get("code")
    points = [p for p in scores.get("points") or [] if isinstance(p, dict)]
    passed = sum(bool(p.get("passed")) for p in points)
    caption = (f"{record.sample_id} ({fmt}): {'passed' if scores.get('passed') else 'failed'}, "
               f"{passed}/{len(points)} points")
    png = task_picture(record, tasks, renderer, caption) if isinstance(code, str) else None
    if png is not None:
        shown = picture_html(png, caption)
    else:  # the points below carry the reason (rejected input, render error, no output)
        shown = f'<p class="note">{escape(caption)}; no render: the output could not be read or drawn</p>'
    trace = trace_line(output.get("trace") or [])
    return (f'<div class="task wide side" data-sample="{escape(record.sample_id)}"><div>{shown}{trace}</div>'
            f"{points_table(points)}</div>")


def _run_html(folder: RunFolder, renderer: Renderer, tasks: dict[str, Task]) -> tuple[str, int]:
    manifest = folder.read_manifest()
    records = [r for r in folder.read_samples() if r.scores]
    records.sort(key=lambda r: bool(r.scores.get("passed")))  # failures first: they are what to look at
    options = ", ".join(f"{k}={v}" for k, v in sorted(manifest.config.suite_options.items()))
    shown = records[:MAX_TASKS_PER_RUN]
    head = (f"<h4>Run <code>{escape(folder.run_id)}</code>: {escape(manifest.config.models.get('assistant', '-'))}"
            f"{' (' + escape(options) + ')' if options else ''}</h4>"
            f'<p class="note">{sum(not r.scores.get("passed") for r in records)} of {len(records)} tasks failed'
            + (f"; {len(shown)} shown (failures first), the rest in <code>harness view</code>"
               if len(records) > len(shown) else "") + ".</p>")
    return head + '<div class="pictures">' + "".join(_task_html(r, renderer, tasks) for r in shown) + "</div>", len(shown)


def renders_section(found: ReportInput) -> ReportSection | None:
    runs = [folder for suite in found.suites for folder in found.runs.get(suite, [])]
    if not runs:
        return None
    tasks = {t.id: t for t in load_tasks(CORPUS)}
    renderer = Renderer(disk_cache=cache_dir())
    try:
        parts = [_run_html(folder, renderer, tasks) for folder in runs]
    finally:
        renderer.close()
    note = ('<p class="note">Each task: the render of what the generator wrote (SVG as the verifier saw it; DOT, '
            "Mermaid and schemdraw drawn from what the verifier parsed), failed points boxed on it and listed under "
            "it, and its verification points; FAIL with the verifier's reason, gated: not checked because a point "
            "it depends on failed.</p>")
    from environments.prograf.check.audit import audit_html, cached_audit  # the verifier's audit, beside every result

    return ReportSection(title="ProGraf: renders and their points",
                         html=audit_html(cached_audit()) + note + "".join(h for h, _ in parts),
                         summary=f"{sum(n for _, n in parts)} tasks shown with their points")


class ProGrafPresenter(Presenter):
    """ProGraf's presenter (entry points `prograf` and `prograf-loop` under `harness.presenters`): the
    report's renders section. The image suite has none: its runs hold no code to render."""

    def report_section(self, found: ReportInput) -> ReportSection | None:
        return renders_section(found)
