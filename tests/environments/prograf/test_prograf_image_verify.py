"""The image-only verifier (`image/verify.py`): real OCR (rapidocr's bundled models) and real
OpenCV on PNGs we render ourselves with the sandboxed renderer, from hand-written SVG and from the
corpus' references and mutants, where the truth is known."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from environments.prograf.check.render import Renderer
from environments.prograf.image.calibrate import render_png
from environments.prograf.image.ocr import label_matches, read_text
from environments.prograf.image.png import ImageRejected, decode_png
from environments.prograf.image.verify import CHECK_TYPES, NEEDS_JUDGE, Pixels, decide, verify_image

EVERY_TYPE = frozenset(CHECK_TYPES.values())


def svg_png(renderer: Renderer, body: str, w: int = 600, h: int = 400) -> bytes:
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}">'
           f'<rect width="{w}" height="{h}" fill="white"/>{body}</svg>')
    return renderer.png(svg, w, h)


def png_header(width: int, height: int) -> bytes:
    """A PNG signature and IHDR chunk claiming this size, and nothing else (a bomb's header)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))


def test_ocr_reads_a_label_from_our_render(renderer):
    png = svg_png(renderer, '<text x="60" y="120" font-size="28" font-family="sans-serif">Check password</text>'
                            '<text x="60" y="260" font-size="28" font-family="sans-serif">R1 4.7kΩ</text>')
    texts = [line.text for line in read_text(decode_png(png))]
    assert any(label_matches("Check password", t) for t in texts), texts
    assert any(label_matches("R1", t) for t in texts), texts
    assert not any(label_matches("Reset password", t) for t in texts), texts


def test_label_rule_short_labels_are_whole_words_long_ones_fuzzy():
    assert label_matches("A", "A") and label_matches("R1", "R1 2.2kΩ")
    assert not label_matches("A", "Admin console")  # a letter inside a word is not the label
    assert label_matches("Load profile", "Load profle")  # one misread character is forgiven
    assert label_matches("Worker", "W0rker")  # OCR confusables 0/o
    assert not label_matches("Create session", "Delete session")


def test_circle_count_on_a_render_with_three_circles(renderer):
    circles = "".join(f'<circle cx="{x}" cy="{y}" r="{r}" stroke="black" stroke-width="3" fill="none"/>'
                      for x, y, r in ((120, 150, 80), (330, 220, 110), (500, 120, 60)))
    dots = "".join(f'<circle cx="{x}" cy="{y}" r="4" fill="black"/>' for x, y in ((50, 350), (560, 350)))
    from environments.prograf.image.cv import big_circles

    found = big_circles(decode_png(svg_png(renderer, circles + dots)))
    assert len(found) == 3, found  # the two dots are not circles


def test_corpus_circle_count_reference_passes_and_its_mutant_fails(corpus, renderer):
    task = corpus["geometry-002"]
    vp = next(p for p in task.points if p.check == "circle_count")
    mutant = next(m for m in task.mutants if m.target == vp.id)  # an extra circle
    ref = verify_image(task, render_png(task, task.reference[0], renderer)[1], {"cv_circle_count"})
    bad = verify_image(task, render_png(task, mutant, renderer)[1], {"cv_circle_count"})
    assert next(p for p in ref.points if p.id == vp.id).status == "pass"
    failed = next(p for p in bad.points if p.id == vp.id)
    assert failed.status == "fail" and failed.pattern == "extra_element" and failed.measured == 2, failed


def test_mutant_without_a_node_label_fails_its_label_point(corpus, renderer):
    task = corpus["flowchart-003"]
    mutant = next(m for m in task.mutants if task.point(m.target).check == "node")
    ref = verify_image(task, render_png(task, task.reference[0], renderer)[1], {"ocr_node_label"})
    bad = verify_image(task, render_png(task, mutant, renderer)[1], {"ocr_node_label"})
    assert next(p for p in ref.points if p.id == mutant.target).status == "pass"
    failed = next(p for p in bad.points if p.id == mutant.target)
    assert failed.status == "fail" and failed.pattern == "missing_object", failed
    assert ref.passed is None  # edges and shapes are left undecided, so no overall verdict


def test_undecidable_and_disabled_points_are_undecided(corpus, renderer):
    task = corpus["flowchart-003"]
    verdict = verify_image(task, render_png(task, task.reference[0], renderer)[1], frozenset())
    edges = [p for p in verdict.points if p.check == "edge"]
    assert edges and all(p.status == "undecided" and "disabled by calibration" in p.reason for p in edges)
    nodes = [p for p in verdict.points if p.check == "node"]
    assert nodes and all(p.status == "undecided" and "disabled by calibration" in p.reason for p in nodes)
    assert verdict.decided == 0 and verdict.passed is None
    # a point no image check reads (how many parts of a kind: a part's kind is not read) is left to the vision judge
    circuit = next(t for t in corpus.values() if any(vp.check == "kind_count" for vp in t.points))
    vp = next(vp for vp in circuit.points if vp.check == "kind_count")
    got = decide(Pixels(np.zeros((4, 4, 3), np.uint8)), circuit, vp, EVERY_TYPE)
    assert got.status == "undecided" and got.reason == NEEDS_JUDGE and got.check_type is None


@pytest.mark.parametrize("data, words", [
    (b"GIF89a\x01\x00\x01\x00", "not a PNG"),
    (png_header(100_000, 100_000), "100000 x 100000 pixels, over the limit"),
    (b"\x89PNG\r\n\x1a\n", "truncated PNG"),
    ("/etc/passwd", "got str"),
])
def test_bad_image_is_one_clear_rejection(corpus, data, words):
    with pytest.raises(ImageRejected, match=words):
        decode_png(data)
    task = corpus["flowchart-003"]
    verdict = verify_image(task, data, EVERY_TYPE)
    assert verdict.passed is False and words in (verdict.error or "")
    assert all(p.status == "fail" and p.pattern == "rejected_input" for p in verdict.points)


def test_truncated_pixel_data_is_rejected(renderer):
    png = svg_png(renderer, '<circle cx="100" cy="100" r="50" fill="black"/>')
    with pytest.raises(ImageRejected, match="could not be decoded"):
        decode_png(png[: len(png) // 2])


def test_calibrate_image_command_writes_the_table(tmp_path):
    import json

    from typer.testing import CliRunner

    from environments.prograf.commands import prograf_app

    result = CliRunner().invoke(prograf_app, ["calibrate-image", "--limit", "1", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "image_calibration.json").read_text())
    assert report["tasks"] == 1 and report["images"] >= 5  # geometry-000: its reference and mutants
    letters = report["by_type"]["ocr_point_letter"]
    assert letters["tp"] >= 1  # the mutant drawing B without its letter fails B's point
    for row in report["by_type"].values():  # the rule: too few known failures -> disabled
        if row["tp"] + row["fn"] < report["min_failures"]:
            assert not row["enabled"] and "known failures" in row["why_disabled"]
    assert "ocr_point_letter" in result.output
