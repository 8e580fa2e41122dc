"""The verifier: model output in one format -> a typed scene -> a verdict per verification point.

Never raises on model output: unparseable or hostile code is a `rejected_input` failure, a render
that fails or hangs a `render_error`, recorded on every point. With a renderer, an SVG element
counts only if the render shows it (see `render.py`); without one, only the structural
visibility rules apply (inside the canvas, painted by its style). A point whose parent failed is
not checked (`gated`) and fails with its parent's pattern, as in DSG.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

from environments.prograf.check.findings import Finding
from environments.prograf.check.registry import view_for
from environments.prograf.check.render import Renderer, Visibility, filter_visible, painted_mask, prepare
from environments.prograf.parse.dot import parse_dot
from environments.prograf.parse.mermaid import parse_mermaid
from environments.prograf.parse.scene import InputRejected, Scene
from environments.prograf.parse.schematic import parse_schemdraw_json
from environments.prograf.parse.schematic_source import parse_schemdraw_source
from environments.prograf.parse.svg import parse_svg
from environments.prograf.parse.svg_graph import extract_graph
from environments.prograf.parse.svg_sanitise import sanitise, serialise
from environments.prograf.task import Spec, VerificationPoint

PATTERNS = ("missing_object", "extra_element", "wrong_relation", "broken_connection", "wrong_label",
            "count_mismatch", "render_error", "rejected_input", "layout_overlap")


class PointResult(BaseModel):
    id: str
    kind: str
    component: str
    passed: bool
    measured: Any = None
    reason: str
    pattern: str | None = Field(None, description="on failure: one of PATTERNS")
    gated: bool = Field(False, description="not checked because a point it depends on failed")
    critical: bool = True


class Verdict(BaseModel):
    task_id: str
    format: str
    passed: bool = Field(description="every critical point passed")
    point_rate: float = Field(description="share of points passed (gated ones count as failed)")
    points: list[PointResult]
    error: str | None = Field(None, description="why the output could not be read, if it could not")
    notes: list[str] = Field(default_factory=list, description="what the sanitiser stripped, what was not visible")
    rendered: bool = False
    seconds: float = 0.0


def parse_scene(fmt: str, code: str, category: str, renderer: Renderer | None = None) -> Scene:
    """The typed scene of `code`; InputRejected if it cannot or must not be read."""
    if fmt == "svg":
        scene = parse_svg(code)
        if renderer is not None:
            root, _ = sanitise(code)
            assert scene.canvas is not None
            root, width, height = prepare(root, scene.canvas)
            mask = painted_mask(renderer.png(serialise(root), width, height))
            filter_visible(scene, Visibility(mask, scene.canvas))
        if category in ("flowchart", "diagram"):
            extract_graph(scene)
        return scene
    if fmt == "dot":
        return parse_dot(code)
    if fmt == "mermaid":
        return parse_mermaid(code)
    if fmt == "schemdraw-json":
        return parse_schemdraw_json(code)
    if fmt == "schemdraw-py":
        return parse_schemdraw_source(code)
    raise InputRejected(f"unknown format {fmt!r}")


class Checkable(Protocol):
    """What `verify` reads of a task: a `Task`, or the checks read from its prompt (`prompt.PromptChecks`)."""

    @property
    def id(self) -> str: ...
    @property
    def category(self) -> str: ...
    @property
    def formats(self) -> Sequence[str]: ...
    @property
    def spec(self) -> Spec: ...
    @property
    def points(self) -> Sequence[VerificationPoint]: ...


def verify(task: Checkable, fmt: str, code: str, renderer: Renderer | None = None) -> Verdict:
    """A verdict on every point of `task` for `code` in `fmt`; never raises on the code (see above)."""
    start = time.perf_counter()
    try:
        if fmt not in task.formats:
            raise InputRejected(f"format {fmt!r} is not allowed for this task (allowed: {', '.join(task.formats)})")
        scene = parse_scene(fmt, code, task.category, renderer)
    except InputRejected as exc:
        return _unreadable(task, fmt, str(exc), exc.pattern, start)
    except (RecursionError, ValueError, KeyError, TypeError, IndexError, ZeroDivisionError, OverflowError) as exc:
        # a parser bug met by odd input is still the input's failure, recorded, never raised
        return _unreadable(task, fmt, f"could not read the {fmt}: {type(exc).__name__}: {exc}", "rejected_input", start)
    view, checks = view_for(scene, task.spec)
    results: dict[str, PointResult] = {}
    for vp in task.points:
        failed_parent = next((results[d] for d in vp.depends_on if not results[d].passed), None)
        if failed_parent is not None:
            results[vp.id] = PointResult(id=vp.id, kind=vp.kind, component=vp.component, passed=False, gated=True,
                                         reason=f"not checked: {failed_parent.id} failed", pattern=failed_parent.pattern,
                                         critical=vp.critical)
            continue
        try:
            finding = checks[vp.check](view, vp, task.spec)
        except (ValueError, ZeroDivisionError, OverflowError, KeyError) as exc:
            finding = Finding(False, None, f"check failed on this scene: {type(exc).__name__}: {exc}", "rejected_input")
        results[vp.id] = PointResult(id=vp.id, kind=vp.kind, component=vp.component, passed=finding.passed,
                                     measured=finding.measured, reason=finding.reason, pattern=finding.pattern,
                                     critical=vp.critical)
    points = list(results.values())
    return Verdict(task_id=task.id, format=fmt, passed=all(p.passed for p in points if p.critical),
                   point_rate=sum(p.passed for p in points) / len(points), points=points, notes=scene.notes,
                   rendered=renderer is not None and fmt == "svg", seconds=time.perf_counter() - start)


def _unreadable(task: Checkable, fmt: str, message: str, pattern: str, start: float) -> Verdict:
    points = [PointResult(id=vp.id, kind=vp.kind, component=vp.component, passed=False, reason=message,
                          pattern=pattern, critical=vp.critical) for vp in task.points]
    return Verdict(task_id=task.id, format=fmt, passed=False, point_rate=0.0, points=points, error=message,
                   seconds=time.perf_counter() - start)
