"""Suite `prograf-image` end to end: the real `harness eval` asks an OpenAI-compatible images
endpoint (the project's loopback server, answering with PNGs we rendered from the corpus'
references and mutants) for each task's picture, and the image-only verifier scores it. Also:
a model without an images endpoint is refused before any call, and an image request carries no
text constraint."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from environments.prograf.check.render import Renderer
from environments.prograf.generate.build import CORPUS
from environments.prograf.image.calibrate import render_png
from environments.prograf.image.verify import verify_image
from environments.prograf.image_suite import image_prompt
from environments.prograf.task import load_tasks
from harness.calls import CallPolicy, ManagedModel
from harness.loopback import prompt_key, running_server
from harness.providers.base import ConstraintError, GenerateConfig, ModelOutput, check_constraint
from harness.run_folder import RunFolder
from tests.conftest import harness_cli


@pytest.fixture(scope="module")
def geometry():
    return {t.id: t for t in load_tasks(CORPUS) if t.category == "geometry"}


def test_an_eval_draws_through_the_images_endpoint_and_scores_from_pixels(tmp_path, geometry):
    # --suite-option category=geometry --limit 3 runs geometry-000, -001, -002 (corpus order).
    t0, t1, t2 = geometry["geometry-000"], geometry["geometry-001"], geometry["geometry-002"]
    circle_left_out = next(m for m in t2.mutants if "circle" in m.fault and "left out" in m.fault)
    renderer = Renderer()
    try:
        pictures = {t0.id: render_png(t0, t0.reference[0], renderer)[1],
                    t2.id: render_png(t2, circle_left_out, renderer)[1]}
    finally:
        renderer.close()
    images = tmp_path / "images"
    images.mkdir()
    for task_id, png in pictures.items():
        (images / f"{prompt_key(image_prompt(geometry[task_id]))}.png").write_bytes(png)
    (images / "default.png").write_bytes(b"GIF89a not a png")  # what geometry-001 gets: unreadable
    runs = tmp_path / "runs"
    with running_server("--echo", "--images", str(images)) as url:
        res = harness_cli("eval", "--suite", "prograf-image", "--model", "openai/painter", "--base-url", url,
                          "--suite-option", "category=geometry", "--limit", "3", "--run-dir", str(runs),
                          "--no-progress", "--no-cache")
    assert res.returncode == 0, res.stderr
    run_id = next(p.name for p in runs.iterdir() if p.name.startswith("prograf-image-"))
    folder = RunFolder(runs, run_id)
    records = {r.sample_id: r for r in folder.read_samples()}
    assert sorted(records) == [t0.id, t1.id, t2.id]

    # The suite passes the endpoint's bytes to the verifier unchanged: same verdict as verifying
    # the picture here.
    for task_id, png in pictures.items():
        rec = records[task_id]
        assert base64.b64decode(rec.output["png_base64"]) == png
        direct = verify_image(geometry[task_id], png)
        assert rec.scores["passed"] == direct.passed
        assert [(p["id"], p["status"]) for p in rec.scores["points"]] == [(p.id, p.status) for p in direct.points]
    circle_points = [p for p in records[t2.id].scores["points"] if p["kind"] == "count" or "circle" in p["id"]]
    assert records[t2.id].scores["passed"] is False and any(p["status"] == "fail" for p in circle_points)
    # An unreadable picture fails every point as rejected input; nothing raised.
    bad = records[t1.id].scores
    assert bad["passed"] is False and bad["error"]
    assert all(p["status"] == "fail" and p["pattern"] == "rejected_input" for p in bad["points"])

    # Bounds: lower counts undecided as failed, upper as passed.
    verdicts = [records[t].scores["passed"] for t in (t0.id, t1.id, t2.id)]
    summary = json.loads(folder.summary_path.read_text())
    metrics = summary["metrics"]
    assert metrics["pass_rate_lower"]["value"] == pytest.approx(sum(v is True for v in verdicts) / 3)
    assert metrics["pass_rate_upper"]["value"] == pytest.approx(sum(v is not False for v in verdicts) / 3)
    assert metrics["decided_share"]["value"] == pytest.approx(sum(v is not None for v in verdicts) / 3)
    assert metrics["point_rate_lower"]["value"] <= metrics["point_rate_upper"]["value"]


class TextOnly:
    name = "text-only/model"
    calls = 0

    async def generate(self, messages, config):
        self.calls += 1
        return ModelOutput(text="a picture, in words")

    async def aclose(self):
        pass


def test_a_model_without_an_images_endpoint_is_refused_before_any_call():
    model = TextOnly()
    managed = ManagedModel(model, max_connections=1, policy=CallPolicy())
    with pytest.raises(ConstraintError, match="no images endpoint"):
        asyncio.run(managed.generate([{"role": "user", "content": "draw"}], GenerateConfig(output="image")))
    assert model.calls == 0


def test_an_image_request_takes_no_text_constraint():
    with pytest.raises(ConstraintError, match="takes no json_schema"):
        check_constraint(GenerateConfig(output="image", json_schema={"type": "object"}))
