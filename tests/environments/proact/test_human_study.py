"""`harness judge human-study`: the release's human study reproduced from the shared folder (read
there, never copied), the majority vote's tie rule, a re-judging judge beside the published one,
and each kind of bad folder as one error naming the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from corpora.proactbench import validate_row
from environments.proact.human_study import (
    PUBLISHED,
    SCALE,
    agreement_table,
    judge_items_corpus,
    load_study,
    majority_vote,
    ordinal_alpha,
    published_differences,
    rater_quality,
    without_raters,
)
from harness.errors import HarnessError
from harness.stats import resampled_metric
from harness.loopback import running_server
from tests.conftest import JUDGE_PASS, SHARED_DATA, harness_cli

STUDY = SHARED_DATA / "proactbench" / "release" / "dataset" / "human_eval"


@pytest.fixture(scope="module")
def study_dir() -> Path:
    if not (STUDY / "sample_items.json").is_file():
        pytest.skip(f"the release's human study not found at {STUDY}; set HARNESS_SHARED_DATA")
    return STUDY


@pytest.fixture(scope="module")
def study_rows(study_dir):
    return agreement_table(load_study(study_dir))  # the study's own seed and 10,000 resamples


def test_the_studys_stored_figures_are_reproduced(study_dir, study_rows):
    """Every per-type figure of analysis_stats.json -- items, ratings, alpha and its CI, kappa and its
    CI, the confusion matrix -- at full stored precision (the JSON prints 16 digits: 1e-9 is far
    finer than the 3 decimals the study's summary prints)."""
    assert published_differences(study_dir, study_rows) == []
    stored = json.loads((study_dir / "analysis_stats.json").read_text())["per_trigger_type"]
    ours = {r.group: r for r in study_rows}
    for kind, figures in stored.items():
        assert ours[kind].alpha.value == pytest.approx(figures["krippendorff_alpha"], abs=1e-9)
        assert ours[kind].kappa[PUBLISHED].ci_low == pytest.approx(figures["cohen_kappa_ci95"][0], abs=1e-9)
    # The overall row pools every rated item; the study printed none, so it is only checked for shape.
    overall = ours["OVERALL"]
    assert overall.ratings == sum(f["n_ratings"] for f in stored.values())
    assert overall.items == sum(f["n_items"] for f in stored.values())


def test_a_perturbed_rating_is_not_reproduced(study_dir, tmp_path):
    """The comparison can fail: one rating moved changes alpha, and the differences name it."""
    copy = _copy(study_dir, tmp_path)
    file = copy / "results" / "A03.jsonl"
    lines = file.read_text().splitlines()
    first = json.loads(lines[0])
    first["score"] = next(s for s in SCALE if s != first["score"])
    file.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    diffs = published_differences(copy, agreement_table(load_study(copy), resamples=200))
    assert any("krippendorff_alpha" in d for d in diffs)


def test_majority_vote_breaks_ties_middle_first_then_pass():
    assert majority_vote(["Pass", "Fail", "Partial"]) == "Partial"
    assert majority_vote(["Pass", "Fail"]) == "Pass"
    assert majority_vote(["Partial", "Fail"]) == "Partial"
    assert majority_vote(["Fail", "Fail", "Pass"]) == "Fail"  # a majority is never overruled by the tie order


def test_alpha_is_the_packages_and_the_bootstrap_resamples_items():
    perfect = np.array([[0, 0], [1, 1], [2, 2], [2, 2]], dtype=float)
    assert ordinal_alpha(perfect) == pytest.approx(1.0)
    assert ordinal_alpha(np.array([[1, 1], [1, 1]], dtype=float)) is None  # one value: alpha undefined
    m = resampled_metric(perfect, ordinal_alpha, seed=3, resamples=50)
    assert m.value == pytest.approx(1.0) and m.ci_low == pytest.approx(1.0) and m.n == 4


def test_items_become_corpus_rows_the_judge_suite_accepts(study_dir):
    study = load_study(study_dir)
    rows = judge_items_corpus(study)
    assert len(rows) == len(study.items)
    for item, row in zip(study.items, rows):
        validate_row(row, f"item {item.item_id}")
        assert row["unique_id_eval"].endswith("__" + item.item_id)
        turn = {t["turn"]: t for t in row["turn_records"]}[item.turn_index]
        assert turn["assistant_response"] == item.model_response
        assert turn["user_message"] == item.dialogue_history[-1].content
        assert row["trigger_points"][0]["evaluation_result"]["score"] == item.judge_score.upper()


def test_a_rejudging_judge_sits_beside_the_published_one(study_dir, tmp_path):
    """A judge that always says PASS agrees with the raters only by chance: kappa 0 in every row,
    and every rated item lands in its PASS column; the published judge's column is unchanged."""
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("judge", "human-study", str(study_dir), "--judge-model", "openai/constant", "--base-url",
                           url, "--bootstrap", "200", "--run-dir", str(tmp_path), "--no-progress", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["group"] for r in rows] == ["EMERGENT", "CRITICAL", "RECOVERY", "OVERALL"]
    for r in rows:
        assert list(r["kappa"]) == [PUBLISHED, "openai/constant"]
        assert r["kappa"]["openai/constant"]["value"] == pytest.approx(0.0)
        matrix = np.array(r["confusion"]["openai/constant"])
        assert matrix[:, SCALE.index("Pass")].sum() == matrix.sum() == r["items"]


def test_the_command_prints_the_table_and_says_it_reproduced(study_dir):
    proc = harness_cli("judge", "human-study", str(study_dir), env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    for kind in ("EMERGENT", "CRITICAL", "RECOVERY", "OVERALL"):
        assert kind in proc.stdout
    assert "reproduced: every per-type figure" in proc.stderr


def test_the_quality_criterion_excludes_the_one_rater_the_readme_says_it_did(study_dir):
    # The study's README: 18 raters, "one was excluded under the pre-registered quality criterion"
    # (quadratic-weighted kappa < 0.10 against the judge with n >= 5), 17 retained.
    study = load_study(study_dir)
    quality = rater_quality(study)
    assert len(quality) == 18
    [out] = [q for q in quality if q.excluded]
    assert out.items >= 5 and out.kappa_quadratic is not None and out.kappa_quadratic < 0.10
    partial = [q for q in quality if q.items < 5]  # the README's "two contributed partial slates"
    assert len(partial) == 2 and not any(q.excluded for q in partial)
    kept = without_raters(study, [out.rater])
    assert len({r.annotator_id for r in kept.ratings}) == 17 and out.rater not in {r.annotator_id for r in kept.ratings}
    rows = agreement_table(kept, seed=2026, resamples=200)
    assert rows[-1].ratings == len(study.ratings) - out.items  # every one of its ratings left out


def test_the_command_with_the_exclusion_does_not_claim_the_stored_figures(study_dir):
    proc = harness_cli("judge", "human-study", str(study_dir), "--quality-exclusion", "--bootstrap", "200",
                       env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "excluded by the quality criterion" in proc.stderr and "17 raters" in proc.stdout
    assert "reproduced: every per-type figure" not in proc.stderr
    bad = harness_cli("judge", "human-study", str(study_dir), "--exclude-rater", "A99")
    assert bad.returncode != 0 and "--exclude-rater A99: no such rater" in bad.stderr and "Traceback" not in bad.stderr


# ---------------------------------------------------------------- bad folders
def _copy(study_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "human_eval"
    (copy / "results").mkdir(parents=True)
    for name in ("sample_items.json", "analysis_stats.json"):
        shutil.copy(study_dir / name, copy / name)
    for file in (study_dir / "results").glob("*.jsonl"):
        shutil.copy(file, copy / "results" / file.name)
    return copy


def test_a_missing_rater_file_is_named(study_dir, tmp_path):
    copy = _copy(study_dir, tmp_path)
    (copy / "results" / "A07.jsonl").unlink()
    with pytest.raises(HarnessError, match=r"A07\.jsonl: missing; analysis_stats\.json lists rater A07"):
        load_study(copy)
    proc = harness_cli("judge", "human-study", str(copy))
    assert proc.returncode != 0 and "A07.jsonl: missing" in proc.stdout + proc.stderr


def test_an_item_rated_by_nobody_is_named(study_dir, tmp_path):
    """The study left one item unrated and says so; a second unrated item means lost ratings."""
    copy = _copy(study_dir, tmp_path)
    victim = json.loads((copy / "results" / "A02.jsonl").read_text().splitlines()[0])["item_id"]
    for file in (copy / "results").glob("*.jsonl"):
        kept = [ln for ln in file.read_text().splitlines() if json.loads(ln)["item_id"] != victim]
        file.write_text("".join(ln + "\n" for ln in kept))
    stats = json.loads((copy / "analysis_stats.json").read_text())
    # Keep the roster's counts in step with the files, so the unrated item is what the error is about.
    for rater, figures in stats["per_annotator"].items():
        figures["n_ratings"] = len((copy / "results" / f"{rater}.jsonl").read_text().splitlines())
    (copy / "analysis_stats.json").write_text(json.dumps(stats))
    with pytest.raises(HarnessError, match=r"2 items of sample_items\.json are rated by nobody where the study "
                                           r"records 1") as caught:
        load_study(copy)
    assert victim in str(caught.value)


def test_a_score_outside_the_scale_is_named(study_dir, tmp_path):
    copy = _copy(study_dir, tmp_path)
    file = copy / "results" / "A04.jsonl"
    lines = file.read_text().splitlines()
    bad = json.loads(lines[2]) | {"score": "Excellent"}
    file.write_text("\n".join([*lines[:2], json.dumps(bad), *lines[3:]]) + "\n")
    with pytest.raises(HarnessError, match=r"A04\.jsonl:3: field `score`.*'Excellent'.*Fail, Partial, Pass"):
        load_study(copy)
