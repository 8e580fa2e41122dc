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


def test_a_folder_is_a_corpus_with_ids_unique_across_its_files(tmp_path):
    rows, _ = load_rows(None)
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[3:5]))
    (tmp_path / "blueprints.jsonl").write_text("not a dialogue file, skipped\n")
    loaded, ident = load_rows(tmp_path)
    assert [r["unique_id_eval"] for r in loaded] == [r["unique_id_eval"] for r in rows[:5]]
    assert ident["path"] == str(tmp_path.resolve()) and len(ident["files"]) == 2 and len(ident["sha256"]) == 64
    (tmp_path / "c.jsonl").write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(HarnessError, match=r"c.jsonl:1: field `unique_id_eval` .* repeats .*a.jsonl:1"):
        load_rows(tmp_path)


def test_raw_line_separators_inside_strings_and_a_bom_are_read(tmp_path):
    rows, _ = load_rows(None)
    row = json.loads(json.dumps(rows[0]))
    row["turn_records"][0]["assistant_response"] += " a\u2028b\u0085c"
    path = tmp_path / "utf8.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
    [loaded], _ = load_rows(path)
    assert loaded["turn_records"][0]["assistant_response"].endswith("a\u2028b\u0085c")


def test_rows_are_typed_and_the_model_catches_what_the_schema_lets_through(real_corpus, tmp_path):
    from corpora.proact_types import CorpusRow

    rows, _ = load_rows(real_corpus)
    typed = [CorpusRow.model_validate(r) for r in rows]
    assert {tp.evaluation_rubric.type for r in typed for tp in r.trigger_points} == {"EMERGENT", "CRITICAL", "RECOVERY"}
    assert all(tp.evaluation_result is not None and tp.evaluation_result.label in ("PASS", "PARTIAL", "FAIL")
               for r in typed for tp in r.trigger_points)
    assert typed[0].turn_records[0].planner.state_audit.current_turn == 1
    bad = json.loads(json.dumps(rows[0]))
    bad["trigger_stats"]["EMERGENT"]["PASS"] = "one"  # the schema only asks for an object here
    with pytest.raises(HarnessError, match=r":1: field `trigger_stats.EMERGENT.PASS` is invalid"):
        load_rows(_write(tmp_path, [bad]))
