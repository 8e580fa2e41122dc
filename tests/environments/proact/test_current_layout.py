"""The release's current corpus layout (trigger_points[] = {turn, evaluation_rubric}, no
curation-time verdicts, no trigger_stats): loaded, validated, run, and refused by judge agreement
with where labelled rows come from; rows in neither layout; the release's dataset ids."""

import json
from pathlib import Path

import pytest

from corpora.proact_types import LABELS
from corpora.proactbench import HUB_CORPUS_FILE, RELEASE_DATASET_IDS, load_rows
from harness.errors import HarnessError
from harness.run_folder import RunFolder
from tests.conftest import OWN_PROACT, REPO, harness_cli

CURRENT = REPO / "tests" / "fixtures" / "proact_current_layout.jsonl"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_fixture_is_in_the_current_layout_and_loads_as_such():
    rows, identity = load_rows(CURRENT)
    assert identity["layout"] == "rubrics"
    assert all("trigger_stats" not in r for r in rows)
    assert all(set(tp) == {"turn", "evaluation_rubric"} for r in rows for tp in r["trigger_points"])
    assert load_rows(OWN_PROACT)[1]["layout"] == "labelled"


def test_release_rows_with_their_labels_removed_load_and_validate(real_corpus, tmp_path):
    """The shared copy predates the label removal: stripped here as the release stripped them."""
    rows = _rows(real_corpus)
    for row in rows:
        del row["trigger_stats"]
        row["trigger_points"] = [{"turn": tp["turn"], "evaluation_rubric": tp["evaluation_rubric"]}
                                 for tp in row["trigger_points"]]
    current = _write(tmp_path / "final_dialogues.jsonl", rows)
    loaded, identity = load_rows(current)
    assert len(loaded) == len(rows) and identity["layout"] == "rubrics"
    proc = harness_cli("corpus", "validate", str(current))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"OK: {len(rows)} rows in 1 file(s), 0 errors" in proc.stdout
    assert f"layout: {len(rows)} row(s) rubrics only" in proc.stdout


def test_validate_names_the_layout_of_each_kind_of_corpus():
    current = harness_cli("corpus", "validate", str(CURRENT), "--strict")
    assert current.returncode == 0, current.stdout + current.stderr
    assert "layout: 2 row(s) rubrics only" in current.stdout and "labelled" not in current.stdout
    own = harness_cli("corpus", "validate", str(OWN_PROACT))
    assert own.returncode == 0 and "row(s) labelled" in own.stdout and "rubrics only" not in own.stdout


@pytest.mark.parametrize("breakage, names", [
    ("some_labelled", ("trigger_points[1].evaluation_result` is missing", "trigger_points[0] has one")),
    ("stats_without_labels", ("`trigger_stats` is set but no trigger carries an evaluation_result",)),
    ("no_rubric", ("trigger_points[0].evaluation_rubric` is missing",)),
    ("results_row", ("per-model results row", "harness proact metrics")),
])
def test_a_row_in_neither_layout_is_one_error_naming_file_line_and_what_is_missing(tmp_path, breakage, names):
    rows = _rows(CURRENT)
    bad = rows[1]
    if breakage == "some_labelled":
        bad["trigger_points"][0]["evaluation_result"] = {"status": "EVALUATED", "score": "PASS",
                                                         "rationale": "ok", "evidence": "ok"}
    elif breakage == "stats_without_labels":
        bad["trigger_stats"] = {"EMERGENT": {"PASS": 1, "PARTIAL": 0, "FAIL": 0, "SKIPPED": 0}}
    elif breakage == "no_rubric":
        del bad["trigger_points"][0]["evaluation_rubric"]
    else:
        bad["turn_records"][0]["original_assistant_response"] = bad["turn_records"][0]["assistant_response"]
    path = _write(tmp_path / "corpus.jsonl", rows)
    with pytest.raises(HarnessError) as info:
        load_rows(path)
    message = str(info.value)
    assert f"{path}:2" in message and "\n" not in message
    assert "neither corpus layout" in message
    for name in names:
        assert name in message
    # The validate command reports the same row (and only it) as an error, and fails.
    proc = harness_cli("corpus", "validate", str(path))
    assert proc.returncode == 1
    assert f"{path}:2" in proc.stdout and f"{path}:1" not in proc.stdout and "neither corpus layout" in proc.stdout


def test_eval_refuses_a_corpus_in_neither_layout_before_writing_anything(tmp_path):
    rows = _rows(CURRENT)
    rows[0]["trigger_stats"] = {"EMERGENT": {"PASS": 1, "PARTIAL": 0, "FAIL": 0, "SKIPPED": 0}}
    path = _write(tmp_path / "corpus.jsonl", rows)
    proc = harness_cli("eval", "--suite", "proact", "--corpus", str(path), "--run-dir", str(tmp_path / "runs"))
    assert proc.returncode == 2
    [line] = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert f"{path}:1" in line and "trigger_stats" in line and "neither corpus layout" in line
    assert not (tmp_path / "runs").exists()


def test_judge_agreement_says_the_current_layout_has_no_labels_and_where_they_come_from(tmp_path):
    proc = harness_cli("judge", "agreement", "--corpus", str(CURRENT), "--run-dir", str(tmp_path / "runs"),
                       "--no-progress")
    assert proc.returncode == 2
    text = " ".join(proc.stderr.split())
    assert f"corpus {CURRENT} has no stored labels" in text and "current layout" in text
    assert "corpora/proact/dialogues.jsonl" in text and "harness corpus build" in text
    assert "kappa" not in proc.stdout  # no empty confusion tables, no summary
    assert not (tmp_path / "runs").exists()


def test_both_release_dataset_ids_fetch_the_corpus_file(monkeypatch):
    import huggingface_hub

    asked = []

    def fake_download(repo_id: str, filename: str, repo_type: str) -> str:
        asked.append((repo_id, filename, repo_type))
        return str(CURRENT)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    assert RELEASE_DATASET_IDS == ("bosonai/proactbench", "boson-ai/proactbench-data")
    _, local = load_rows(CURRENT)
    for dataset_id in RELEASE_DATASET_IDS:
        rows, identity = load_rows(dataset_id)
        assert len(rows) == 2
        # Hashed like the file it is, so a run on the hub copy is as reproducible as a local one.
        assert identity["path"] == f"hf:{dataset_id}" and identity["sha256"] == local["sha256"]
        assert identity["layout"] == "rubrics"
    assert asked == [(i, HUB_CORPUS_FILE, "dataset") for i in RELEASE_DATASET_IDS]


def test_an_unreachable_hub_names_the_release_ids_and_the_offline_fix(monkeypatch):
    import huggingface_hub

    def offline(**_: str) -> str:
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(HarnessError) as info:
        load_rows("boson-ai/proactbench-data")
    message = str(info.value)
    assert "'boson-ai/proactbench-data'" in message and "bosonai/proactbench" in message
    assert "--corpus PATH" in message and "OSError" in message


@pytest.mark.slow
def test_the_current_layout_runs_end_to_end_on_the_embedded_model(tmp_path, judge_pass_server):
    """SmolLM2-135M regenerates every trigger turn of the first rubric-only dialogue; the judge is
    an instant loopback server with a fixed PASS verdict. (The 135M judge's three attempts per
    trigger, which rarely parse, were three quarters of this test's CPU time and made its labels
    unpredictable; the embedded judge is exercised in tests/leaderboards/test_leaderboard_embedded.py
    and the live suite's embedded test.) Short replies keep the assistant to CPU prefill."""
    run_dir = tmp_path / "runs"
    proc = harness_cli("eval", "--suite", "proact", "--corpus", str(CURRENT), "--limit", "1", "--max-tokens", "16",
                       "--judge-model", "openai/judge", "--base-url", judge_pass_server, "--run-dir", str(run_dir),
                       "--no-progress", env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    [folder] = [RunFolder(run_dir, p.name) for p in run_dir.iterdir() if p.is_dir()]
    manifest = folder.read_manifest()
    assert manifest.status == "complete"
    assert manifest.config.models == {"assistant": "local/smollm2-135m", "judge": "openai/judge"}
    assert manifest.corpus["layout"] == "rubrics"
    assert manifest.corpus["judge_prompt"]["name"] == "harness" and manifest.corpus["judge_prompt"]["sha256"]
    [record] = folder.read_samples()
    first = _rows(CURRENT)[0]
    assert record.sample_id == first["unique_id_eval"] and record.status == "ok", record.errors
    turns = [tp["turn"] for tp in first["trigger_points"]]
    # Every trigger regenerated by the embedded model (never read from the corpus) and judged once.
    assert [t["turn"] for t in record.output["turn_records"]] == turns
    assert all(t["assistant_response"] is not None for t in record.output["turn_records"])
    assert {c.model for c in record.calls if c.role == "assistant"} == {"local/smollm2-135m"}
    assert not any(c.cached for c in record.calls)
    assert record.usage["assistant"].calls == len(turns) and record.usage["judge"].calls == len(turns)
    assert 0 < record.usage["assistant"].completion_tokens <= 16 * len(turns)
    assert [(t["turn"], t["label"]) for t in record.scores["triggers"]] == [(turn, "PASS") for turn in turns]
    summary = folder.read_summary()
    assert summary.counts["dialogues"] == 1 and summary.counts["triggers_error"] == 0
    assert summary.counts["triggers_pass"] == len(turns)
    assert sum(summary.counts[f"triggers_{label.lower()}"] for label in LABELS) == len(turns)
