"""Pictures of outputs with the failed points drawn on them (`image/pictures.py`), and a picture per loop
step (`prograf-loop`, `output.pictures`): real renders through the sandboxed worker, on reference
solutions and their mutants in all four categories and every drawable format."""

from __future__ import annotations

import asyncio
import base64
import io

import numpy as np
import pytest
from PIL import Image

from environments.prograf.check.graph import GraphView
from environments.prograf.check.verify import verify
from environments.prograf.generate.build import CORPUS
from environments.prograf.image.pictures import MARK, drawing_of, marks_for, picture
from environments.prograf.loop_suite import LoopOptions, ProGrafLoopSuite, StepMock
from environments.prograf.task import load_tasks
from harness.calls import CallPolicy, ManagedModel
from harness.records import RunConfig
from harness.runner import run_one
from harness.suite import parse_options
from leaderboards.viewer_pages import sample_page

@pytest.fixture(scope="module")
def corpus():
    return load_tasks(CORPUS)


def image(pic: dict[str, str]) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(pic["png"]))).convert("RGB"))


def red(img: np.ndarray) -> np.ndarray:
    return np.all(img == np.array(MARK), axis=2)


def pinpointed_mutant(corpus, category: str, fmt: str):
    """The first task of the category with a mutant in `fmt` that fails its target, whose target the
    drawing can place (an object drawn wrong, not one left out)."""
    for task in (t for t in corpus if t.category == category and t.source == "generated"):
        for m in task.mutants:
            if m.needs_render or m.format != fmt:
                continue
            verdict = verify(task, m.format, m.code)
            if m.target not in {p.id for p in verdict.points if not p.passed and not p.gated}:
                continue
            marks = marks_for(task, drawing_of(m.format, m.code, category), verdict)
            if next(k for k in marks if k.id == m.target).box is not None:
                return task, m
    raise AssertionError(f"no placeable {fmt} mutant in {category}")


# one format per way of drawing (a task's DOT and Mermaid draw the same SVG), every category
@pytest.mark.parametrize("category, fmt", [("geometry", "svg"), ("circuit", "schemdraw-json"), ("flowchart", "dot"),
                                           ("flowchart", "svg"), ("diagram", "mermaid")])
def test_the_failed_point_is_the_mutants_target_and_boxed_where_it_is(corpus, renderer, category, fmt):
    task, mutant = pinpointed_mutant(corpus, category, fmt)
    ref = next(r for r in task.reference if r.format == fmt)
    ref_drawing = drawing_of(ref.format, ref.code, category)
    assert marks_for(task, ref_drawing, verify(task, ref.format, ref.code)) == []
    ref_img = image(picture(task, ref.format, ref.code, renderer, "reference"))
    assert not red(ref_img[: ref_drawing.height]).any()  # a passing reference: nothing marked on the render

    drawing = drawing_of(mutant.format, mutant.code, category)
    verdict = verify(task, mutant.format, mutant.code)
    marks = marks_for(task, drawing, verdict)
    boxed = {k.id: k.box for k in marks if k.box is not None}
    # the target is placed; whatever else is boxed failed on its own (a left-out arrow also breaks
    # the arrow count, which has no place); gated points are listed, not boxed
    assert mutant.target in boxed and set(boxed) <= {p.id for p in verdict.points if not p.passed and not p.gated}
    assert {k.id for k in marks} == {p.id for p in verdict.points if not p.passed}
    img = image(picture(task, mutant.format, mutant.code, renderer, "mutant"))
    c, box = drawing.canvas, boxed[mutant.target]
    sx, sy = drawing.width / (c[2] - c[0]), drawing.height / (c[3] - c[1])
    x0, y0 = int((box[0] - c[0]) * sx), int((box[1] - c[1]) * sy)
    x1, y1 = int((box[2] - c[0]) * sx), int((box[3] - c[1]) * sy)
    ring = red(img[max(0, y0 - 6): y1 + 7, max(0, x0 - 6): x1 + 7])
    assert ring.sum() > 2 * ((x1 - x0) + (y1 - y0))  # the box is drawn around the measured place
    assert red(img[drawing.height:]).any()  # the legend, in red, under the render


@pytest.mark.parametrize("category", ["circuit", "flowchart", "diagram"])
def test_every_reference_format_is_drawn_with_everything_placed(corpus, renderer, category):
    """DOT, Mermaid and schemdraw (JSON and Python) are drawn from what we parsed -- every spec node
    and named part placed -- and rendered by the same worker; never by Graphviz or schemdraw."""
    tasks = [t for t in corpus if t.category == category]
    for task in tasks[:1] + tasks[-1:]:  # one generated, one hand-written
        for ref in task.reference:
            drawing = drawing_of(ref.format, ref.code, category)
            if category == "circuit":
                named = {p.id for p in task.spec.parts}
                assert named <= set(drawing.boxes), (task.id, ref.format)
            else:
                view = GraphView(drawing.scene, task.spec)
                assert all(view.node(n.id) is not None and view.node(n.id).key in drawing.boxes
                           for n in task.spec.nodes), (task.id, ref.format)
            pic = picture(task, ref.format, ref.code, renderer, "reference")
            assert pic is not None and not red(image(pic)[: drawing.height]).any()


def test_picture_is_deterministic_and_unreadable_code_gets_none(corpus, renderer):
    task = next(t for t in corpus if t.category == "flowchart")
    ref = task.reference[0]
    a = picture(task, ref.format, ref.code, renderer, "a")
    hits = renderer.stats.cache_hits
    assert a == picture(task, ref.format, ref.code, renderer, "a") and renderer.stats.cache_hits == hits + 1
    assert picture(task, "dot", "digraph { a -> ", renderer, "broken") is None
    hostile = 'digraph { a [label="<script>alert(1)</script>" image="/etc/passwd"]; a -> b }'
    drawing = drawing_of("dot", hostile, "flowchart")
    assert "<script" not in drawing.svg and "/etc/passwd" not in drawing.svg


def test_a_loop_run_pictures_every_step_with_its_failed_checks(corpus):
    suite = ProGrafLoopSuite(parse_options("prograf-loop", LoopOptions, {"subset": "all", "budget": 4}))
    task = max((t for t in corpus if t.category == "circuit" and t.source == "generated"), key=lambda t: t.size)
    sample = next(s for s in suite.load_samples(None) if s.id == task.id)
    model = ManagedModel(StepMock("weak-circuits", corpus), max_connections=2, policy=CallPolicy())
    config = RunConfig(suite="prograf-loop", models={"assistant": model.name})
    record = asyncio.run(run_one(suite, sample, 0, {"assistant": model}, config))
    assert record.status == "ok", record.error
    steps = [t for t in record.output["trace"] if t["node"] in ("commit", "rollback")]
    assert steps and all(isinstance(t["code"], str) and t["checks"] for t in steps)
    pictures = record.output["pictures"]
    assert len(pictures) == len(steps)
    for k, (pic, step) in enumerate(zip(pictures, steps), 1):
        assert pic["caption"].startswith(f"{task.id} step {k}/{len(steps)}") and step["node"] in pic["caption"]
        failed = not all(step["checks"].values())
        assert red(image(pic)).any() == failed  # a failed step is marked; a passing one has no mark
    assert any(not all(t["checks"].values()) for t in steps)  # the weak-circuits mock fails a step here
    page = sample_page("run", 0, 1, record.model_dump(mode="json"))  # `harness view`: output.pictures, inline
    assert page.count('<figure class="picture">') == len(steps) and "not a base64 PNG" not in page
