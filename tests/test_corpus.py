"""Corpus loading and row validation (official ProactBench format)."""

import json

import pytest

from corpora.proactbench import DEFAULT_CORPUS, load_rows
from harness.errors import HarnessError


def test_real_release_rows_load_with_and_without_curation_labels(real_corpus):
    rows, ident = load_rows(real_corpus)
    assert len(rows) == 30
    assert ident["sha256"] and ident["path"].endswith("final_dialogues.sample.jsonl")
    assert all(r["unique_id_eval"].startswith(r["blueprint_id"] + "__style") for r in rows)


def test_own_corpus_is_the_default_and_covers_all_trigger_types():
    rows, ident = load_rows(None)
    assert ident["path"] == str(DEFAULT_CORPUS)
    assert len(rows) >= 6
    types = {tp["evaluation_rubric"]["type"] for r in rows for tp in r["trigger_points"]}
    assert types == {"EMERGENT", "CRITICAL", "RECOVERY"}


def _write(tmp_path, rows):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_missing_field_names_file_line_and_field(tmp_path):
    rows, _ = load_rows(None)
    bad = json.loads(json.dumps(rows[1]))
    del bad["trigger_points"][0]["evaluation_rubric"]["fail_criteria"]
    path = _write(tmp_path, [rows[0], bad])
    with pytest.raises(HarnessError) as info:
        load_rows(path)
    msg = str(info.value)
    assert f"{path}:2" in msg
    assert "trigger_points[0].evaluation_rubric.fail_criteria" in msg
    assert "\n" not in msg


def test_bad_enum_and_bad_json_and_dangling_trigger(tmp_path):
    rows, _ = load_rows(None)
    bad = json.loads(json.dumps(rows[0]))
    bad["trigger_points"][0]["evaluation_rubric"]["type"] = "SURPRISE"
    with pytest.raises(HarnessError, match=r":1: field `trigger_points\[0\].evaluation_rubric.type`"):
        load_rows(_write(tmp_path, [bad]))
    (tmp_path / "broken.jsonl").write_text(json.dumps(rows[0]) + "\n{not json\n")
    with pytest.raises(HarnessError, match=r"broken.jsonl:2: not valid JSON"):
        load_rows(tmp_path / "broken.jsonl")
    dangling = json.loads(json.dumps(rows[0]))
    dangling["trigger_points"][0]["turn"] = 99
    with pytest.raises(HarnessError, match=r"turn_records has no such turn"):
        load_rows(_write(tmp_path, [dangling]))


def test_duplicate_ids_and_missing_file(tmp_path):
    rows, _ = load_rows(None)
    with pytest.raises(HarnessError, match=r"repeats .*corpus.jsonl:1"):
        load_rows(_write(tmp_path, [rows[0], rows[0]]))
    with pytest.raises(HarnessError, match="corpus file .*nope.jsonl not found: pass --corpus PATH"):
        load_rows(tmp_path / "nope.jsonl")


def test_own_corpus_meets_the_protocol_strictly_and_covers_everything():
    from collections import Counter

    from environments.proact.corpus_rules import check_row

    rows, _ = load_rows(None)
    problems = [(r["unique_id_eval"], p) for r in rows for p in check_row(r, strict=True)]
    assert problems == []
    types = Counter(tp["evaluation_rubric"]["type"] for r in rows for tp in r["trigger_points"])
    assert len(rows) >= 48 and sum(types.values()) >= 150
    assert min(types.values()) / max(types.values()) > 0.7  # balanced over the three types
    assert {r["style_combination_index"] for r in rows} == set(range(1, 25))
    assert {r["category_key"] for r in rows} == {f"{c}_persona" for c in ("professional", "sports", "arts", "travel", "culinary")}
    assert all(tp["evaluation_result"]["status"] == "EVALUATED" for r in rows for tp in r["trigger_points"])


def test_validate_command_passes_own_corpus_folder_strict():
    from tests.conftest import harness_cli

    proc = harness_cli("corpus", "validate", "corpora/proact/", "--strict")
    assert proc.returncode == 0, proc.stdout
    assert "OK: 54 rows" in proc.stdout
