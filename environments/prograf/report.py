"""ProGraf's section of the offline HTML report: per run, each task's render next to its
verification points (passed or failed, with the measured value and the reason).

The render is made here from the recorded code, the way the verifier made it (sanitised SVG,
pinned viewBox, resvg in the worker process; cached by content hash, so a scored run's renders are
cache hits). Only SVG has a renderer: DOT, Mermaid and schemdraw are parsed into scenes, not
drawn, so their tasks show their points alone.
"""

from __future__ import annotations

import base64
from html import escape
from typing import Any

from environments.prograf.render import Renderer, cache_dir, prepare
from environments.prograf.scene import InputRejected
from environments.prograf.svg import parse_svg, sanitise, serialise
from harness.records import RunFolder, SampleRecord
from harness.suite import ReportInput, ReportSection, picture_html

MAX_TASKS_PER_RUN = 16  # failed tasks first; the rest are in `harness view`


def render_png(code: str, renderer: Renderer) -> bytes | None:
    """The PNG the verifier saw for this SVG, or None when it cannot be read or rendered."""
    try:
        scene = parse_svg(code)
        root, _ = sanitise(code)
        if scene.canvas is None:
            return None
        root, width, height = prepare(root, scene.canvas)
        return renderer.png(serialise(root), width, height)
    except (InputRejected, ValueError, KeyError, TypeError, IndexError, ZeroDivisionError, RecursionError):
        return None  # the scores already record why (rejected_input / render_error)


def _measured(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def points_table(points: list[dict[str, Any]]) -> str:
    """Every point with its outcome; when all failed for one reason (unreadable output), one line."""
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


def _task_html(record: SampleRecord, renderer: Renderer) -> str:
    output, scores = record.output or {}, record.scores or {}
    fmt, code = str(output.get("format") or scores.get("format") or "?"), output.get("code")
    points = [p for p in scores.get("points") or [] if isinstance(p, dict)]
    passed = sum(bool(p.get("passed")) for p in points)
    caption = (f"{record.sample_id} ({fmt}): {'passed' if scores.get('passed') else 'failed'}, "
               f"{passed}/{len(points)} points")
    png = render_png(code, renderer) if fmt == "svg" and isinstance(code, str) else None
    if png is not None:
        picture = picture_html(base64.b64encode(png).decode("ascii"), caption)
    elif fmt == "svg":  # the points below carry the reason (rejected input, render error, no output)
        picture = f'<p class="note">{escape(caption)}; no render: the output could not be read or drawn</p>'
    else:
        picture = f'<p class="note">{escape(caption)}; no render: {escape(fmt)} is parsed into a scene, not drawn</p>'
    trace = trace_line(output.get("trace") or [])
    return (f'<div class="task wide side" data-sample="{escape(record.sample_id)}"><div>{picture}{trace}</div>'
            f"{points_table(points)}</div>")


def _run_html(folder: RunFolder, renderer: Renderer) -> tuple[str, int]:
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
    return head + '<div class="pictures">' + "".join(_task_html(r, renderer) for r in shown) + "</div>", len(shown)


def renders_section(found: ReportInput) -> ReportSection | None:
    runs = [folder for suite in found.suites for folder in found.runs.get(suite, [])]
    if not runs:
        return None
    renderer = Renderer(disk_cache=cache_dir())
    try:
        parts = [_run_html(folder, renderer) for folder in runs]
    finally:
        renderer.close()
    note = ('<p class="note">Each task: the render of what the generator wrote (SVG: as the verifier saw it) and '
            "its verification points; FAIL with the verifier's reason, gated: not checked because a point it "
            "depends on failed.</p>")
    return ReportSection(title="ProGraf: renders and their points", html=note + "".join(h for h, _ in parts),
                         summary=f"{sum(n for _, n in parts)} tasks shown with their points")
