"""How the image-only verifier reads labels (session 12's fixes, `image/ocr.py`): real OCR
(rapidocr's bundled models) on PNGs drawn by our own renderer from the corpus and from
hand-written SVG, and the matching rule on the texts OCR returned in the calibration."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from environments.prograf.image.calibrate import render_png, subset
from environments.prograf.image.ocr import copies, read_text, split_merged
from environments.prograf.image.png import decode_png
from environments.prograf.image.verify import CHECK_TYPES, NEEDS_JUDGE, verify_image, vocabulary

EVERY_TYPE = frozenset(CHECK_TYPES.values())


def test_short_words_are_read_upright_and_at_a_readable_scale(corpus, renderer):
    """flowchart-004's 'End' was read 'ud' and a 'no' 'ou' before: the orientation classifier
    turned these short upright words upside down; with it off they read as written."""
    task = corpus["flowchart-004"]
    texts = [line.text for line in read_text(decode_png(render_png(task, task.reference[0], renderer)[1]))]
    assert "End" in texts, texts
    assert texts.count("no") == 2 and texts.count("yes") == 2, texts  # both arrows' labels, not 'ou'


def test_a_lone_point_letter_by_its_dot_is_read(corpus, renderer):
    """geometry-000's mutant 1 draws A alone above its dot; rapidocr's default box threshold
    (0.5) dropped that box, so A's point failed on a picture that shows A clearly."""
    task = corpus["geometry-000"]
    lines = read_text(decode_png(render_png(task, task.mutants[1], renderer)[1]))
    assert sorted(line.text for line in lines) == ["A", "B", "C"], lines
    a = next(line for line in lines if line.text == "A")
    assert 440 <= a.box[0] <= 470 and 40 <= a.box[1] <= 70, a.box  # where the letter is drawn (800 px render)


def test_labels_run_together_count_as_each_label_of_the_task():
    labels = frozenset({"yes", "no", "R2", "10kΩ", "V1", "9V"})
    assert split_merged("yesno", frozenset({"yes", "no"})) == ["yes", "no"]
    assert copies("no", "yesno", labels) == 1 and copies("yes", "yesno", labels) == 1
    assert copies("R2", "R210kΩ", labels) == 1 and copies("9V", "V19V", labels) == 1
    assert copies("no", "yesno") == 0  # without the task's labels a piece of a word is never a label
    assert copies("no", "nobody", labels) == 0  # 'body' is no label of the task
    assert copies("A", "Admin", frozenset({"A", "B"})) == 0


def test_a_long_label_counts_once_per_copy_in_a_line():
    assert copies("fault", "fault fault") == 2
    assert copies("night mode", "reseght mode") == 0  # two labels drawn over each other stay unread
    assert copies("Load profile", "Load profle") == 1


def test_slash_reads_as_its_ocr_confusables():
    assert copies("/", "1") == 1 and copies("/", "l") == 1
    assert copies("/", "7") == 0


def test_edge_label_written_too_few_times_is_undecided_not_failed(corpus, renderer):
    """flowchart-004's mutant 3 writes 'maybe' where one of two 'yes' arrows was: which 'yes'
    arrow lost its label is not in the pixels, so both 'yes' points are undecided."""
    task = corpus["flowchart-004"]
    mutant = task.mutants[3]
    ref = verify_image(task, render_png(task, task.reference[0], renderer)[1], {"ocr_edge_label"})
    bad = verify_image(task, render_png(task, mutant, renderer)[1], {"ocr_edge_label"})
    assert [p.status for p in ref.points if p.check == "edge_label"] == ["pass"] * 4
    by_id = {p.id: p for p in bad.points}
    for vp_id in ("vp23", "vp24"):  # the two 'yes' arrows
        assert by_id[vp_id].status == "undecided" and by_id[vp_id].reason.startswith(NEEDS_JUDGE), by_id[vp_id]
    assert by_id["vp25"].status == "pass" and by_id["vp26"].status == "pass"


def test_an_edge_label_written_nowhere_fails(corpus, renderer):
    task = corpus["flowchart-004"]
    img = decode_png(render_png(task, task.reference[0], renderer)[1]).copy()
    img[:, :] = 255  # every label erased: a white picture of the same size
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    verdict = verify_image(task, buf.getvalue(), {"ocr_edge_label"})
    labels = [p for p in verdict.points if p.check == "edge_label"]
    assert labels and all(p.status == "fail" and "written nowhere" in p.reason for p in labels), labels


def test_a_zero_read_for_the_letter_o_counts_as_a_point_letter(corpus, renderer):
    task = corpus["geometry-016"]  # points A, B, C and the centre O; mutant 4 leaves the circle out
    png = render_png(task, task.mutants[4], renderer)[1]
    assert "0" in [line.text for line in read_text(decode_png(png))]  # OCR reads the O as a zero here
    verdict = verify_image(task, png, {"ocr_letter_count"})
    count = next(p for p in verdict.points if p.check == "point_count")
    assert count.status == "pass" and "O" in count.measured, count


def test_vocabulary_holds_the_tasks_label_texts(corpus):
    assert {"V1", "24V", "R3", "330Ω"} <= vocabulary(corpus["circuit-044"].spec)
    assert {"yes", "no", "End"} <= vocabulary(corpus["flowchart-004"].spec)


def test_subset_takes_one_parity_of_task_indices(corpus):
    tasks = list(corpus.values())
    even, odd = subset(tasks, 0, None), subset(tasks, 1, None)
    assert len(even) == len(odd) == len(tasks) // 2
    assert {t.id for t in even}.isdisjoint(t.id for t in odd)
    assert subset(tasks, 1, 4)[0].id == tasks[1].id
    with pytest.raises(ValueError, match="parity must be 0"):
        subset(tasks, 2, None)


@pytest.mark.parametrize("args, words", [
    (["--tasks", "third"], "--tasks must be 'even' or 'odd'"),
    (["--check-types", "ocr_node_label,ocr_shoe_size"], "unknown check type(s) ocr_shoe_size"),
    (["--categories", "flowchart,poetry"], "unknown category poetry"),
])
def test_calibrate_image_refuses_a_bad_subset(tmp_path, args, words):
    from typer.testing import CliRunner

    from environments.prograf.commands import prograf_app

    result = CliRunner().invoke(prograf_app, ["calibrate-image", *args, "--out", str(tmp_path)])
    assert result.exit_code != 0 and words in " ".join(result.output.split()), result.output
    assert not (tmp_path / "image_calibration.json").exists()


def test_calibrate_image_on_one_check_type_of_the_odd_tasks(tmp_path):
    import json

    from typer.testing import CliRunner

    from environments.prograf.commands import prograf_app

    result = CliRunner().invoke(prograf_app, ["calibrate-image", "--tasks", "odd", "--limit", "1",
                                              "--check-types", "ocr_point_letter", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "image_calibration.json").read_text())
    assert report["parity"] == 1 and report["tasks"] == 1 and list(report["by_type"]) == ["ocr_point_letter"]
    row = report["by_type"]["ocr_point_letter"]
    assert row["tp"] + row["fp"] + row["fn"] + row["tn"] > 0 and "(odd task indices)" in result.output
