"""`harness proact metrics` on results files as the ProactBench release ships them: every deviation
the released files show is a warning, no row is dropped, and the metrics file comes out in the
published layout, byte for byte; `--expect` compares field by field."""

import json
import random
from typing import get_args

import pytest

from corpora.proact_types import (
    GRADES,
    LABELS,
    RELEASE_LABELS,
    STATUSES,
    TRIGGER_TYPES,
    Grade,
    Label,
    ReleaseLabel,
    Status,
    TriggerType,
)
from tests.conftest import harness_cli
from tests.environments.proact.release_rows import expected_metrics, synthetic_release, write_jsonl


def test_labels_are_defined_once_and_imported_everywhere():
    import environments.proact.corpus_rules as rules
    import environments.proact.metrics as metrics
    from corpora import proactbench

    assert TRIGGER_TYPES == get_args(TriggerType) == ("EMERGENT", "CRITICAL", "RECOVERY")
    assert GRADES == get_args(Grade) == ("PASS", "PARTIAL", "FAIL")
    assert RELEASE_LABELS == get_args(ReleaseLabel) == (*GRADES, "SKIPPED")
    assert LABELS == get_args(Label) == (*RELEASE_LABELS, "ERROR")
    assert STATUSES == get_args(Status) == ("EVALUATED", "SKIPPED", "ERROR")
    assert metrics.LABELS is LABELS and rules.LABELS is LABELS
    assert metrics.TRIGGER_TYPES is TRIGGER_TYPES and proactbench.TRIGGER_TYPES is TRIGGER_TYPES
    assert proactbench.ROW_SCHEMA["properties"]["trigger_points"]["items"]["properties"]["evaluation_rubric"][
        "properties"]["type"]["enum"] == list(TRIGGER_TYPES)


def _metrics(path, *args):
    return harness_cli("proact", "metrics", str(path), *args)


@pytest.mark.parametrize("tracked_assistant", [True, False])
def test_release_shaped_file_reproduces_its_metrics_file_exactly(tmp_path, tracked_assistant):
    """24 rows with every deviation seen in the release (integer ids, a model name that changes
    between rows, dropped triggers, a null verdict, stored counts that lie, missing fields, a
    repeated key, an extra field): the metrics file computed independently from the labels is
    reproduced byte for byte, and each deviation is counted and named."""
    rows, truths = synthetic_release(random.Random(11), tracked_assistant=tracked_assistant)
    results = write_jsonl(tmp_path / "Syn-7B_proactivity_bench_results.jsonl", rows)
    expected = expected_metrics(truths)
    expect = tmp_path / "Syn-7B_proactivity_bench_metrics.json"
    expect.write_text(json.dumps(expected, indent=2))
    mine = tmp_path / "ours.json"
    proc = _metrics(results, "--json", "--expect", str(expect), "--out", str(mine))
    assert proc.returncode == 0, proc.stderr
    assert mine.read_text() == expect.read_text()  # same keys, same order, same floats
    out = json.loads(proc.stdout)
    assert out["official"] == expected
    assert list(out["official"]["aggregate_trigger_stats"]) == ["CRITICAL", "RECOVERY", "EMERGENT"]  # first seen
    assert out["official"]["metrics"]["eval/proactivity_total_dialogues"] == 24.0  # the repeated key is a row too
    dropped = 2 if tracked_assistant else 0  # only tracked usage reveals a dropped trigger
    assert out["dropped_triggers"] == dropped
    assert out["deviations"] == {"id_int": 2, "id_repeated": 1, "model_varies": 2, "field_missing": 1,
                                 "field_extra": 1, "stats_mismatch": 1, "verdict_missing": 1, "usage_missing": 1,
                                 **({"triggers_dropped": 2} if tracked_assistant else {})}
    assert out["error_trigger_stats"] == {"CRITICAL": 0, "RECOVERY": 0, "EMERGENT": 0}
    err = " ".join(proc.stderr.split())
    assert "24 rows read, none dropped" in err
    assert "id_int x2 [2 row(s), first at line 1]" in err and "unique_id_eval 0, unique_id_eval 3" in err
    assert "stats_mismatch x1 [1 row(s), first at line 10]" in err
    assert "verdict_missing x1 [1 row(s), first at line 7]" in err
    assert "field_missing x1 [1 row(s), first at line 11]" in err and "source_results_path" in err
    assert "usage_missing x1 [1 row(s), first at line 12]" in err
    assert "id_repeated x1 [1 row(s), first at line 13]" in err
    assert "'Syn-7B' (most rows: 'local_model')" in err
    assert f"matches {expect}: 37 fields compared" in err


def _published_like(real_rows):
    """The real rows as a per-model results file: trigger turns only, the curated reply in both
    reply fields, their curation labels as the verdicts, token usage for assistant and judge."""
    rows = []
    for i, row in enumerate(real_rows):
        turns = {t["turn"]: t for t in row["turn_records"]}
        tps = row["trigger_points"]
        rows.append({
            "blueprint_id": row["blueprint_id"], "scenario_id": row["scenario_id"],
            "unique_id_eval": i if i == 0 else row["unique_id_eval"], "uuid": row["uuid"],
            "category_key": row["category_key"], "style_combination_index": row["style_combination_index"],
            "evaluated_model": "replay", "source_evaluated_model": row["evaluated_model"],
            "num_trigger_points": len(tps), "trigger_stats": row["trigger_stats"], "trigger_points": tps,
            "turn_records": [{"turn": tp["turn"], "user_message": turns[tp["turn"]]["user_message"],
                              "assistant_response": turns[tp["turn"]]["assistant_response"],
                              "original_assistant_response": turns[tp["turn"]]["assistant_response"]} for tp in tps],
            "token_usage": {"assistant": {"prompt_tokens": 1000 * len(tps) + i, "completion_tokens": 300 + i, "calls": len(tps)},
                            "judge": {"prompt_tokens": 5000 + 7 * i, "completion_tokens": 500, "calls": len(tps)}},
            "source_results_path": "dataset/final_dialogues.jsonl",
        })
    return rows


def test_real_rows_as_a_results_file_re_aggregate_exactly(real_corpus, tmp_path):
    real = [json.loads(ln) for ln in real_corpus.read_text(encoding="utf-8").splitlines() if ln.strip()]
    rows = _published_like(real)
    results = write_jsonl(tmp_path / "replay_proactivity_bench_results.jsonl", rows)
    # Independently: from the rows' stored trigger_stats (not their labels) and the usage written.
    order = list(dict.fromkeys(t for r in real for t in r["trigger_stats"]))
    agg = {t: {lab: sum(r["trigger_stats"][t][lab] for r in real if t in r["trigger_stats"])
               for lab in ("PASS", "PARTIAL", "FAIL", "SKIPPED")} for t in order}
    metrics = {}
    for t in order:
        tot = agg[t]["PASS"] + agg[t]["PARTIAL"] + agg[t]["FAIL"]
        metrics |= {f"eval/proactivity_{t.lower()}_pass_rate": agg[t]["PASS"] / tot,
                    f"eval/proactivity_{t.lower()}_partial_rate": agg[t]["PARTIAL"] / tot,
                    f"eval/proactivity_{t.lower()}_weighted_score": (agg[t]["PASS"] + 0.5 * agg[t]["PARTIAL"]) / tot,
                    f"eval/proactivity_{t.lower()}_total": float(tot)}
    p = sum(a["PASS"] for a in agg.values())
    pa = sum(a["PARTIAL"] for a in agg.values())
    tot = p + pa + sum(a["FAIL"] for a in agg.values())
    metrics |= {"eval/proactivity_overall_pass_rate": p / tot, "eval/proactivity_overall_weighted_score": (p + 0.5 * pa) / tot,
                "eval/proactivity_total_dialogues": 30.0}
    usage = {}
    for agent in ("assistant", "judge"):
        pt = sum(r["token_usage"][agent]["prompt_tokens"] for r in rows)
        ct = sum(r["token_usage"][agent]["completion_tokens"] for r in rows)
        calls = sum(r["token_usage"][agent]["calls"] for r in rows)
        usage[agent] = {"mean_prompt_tokens_per_conversation": pt / 30, "mean_completion_tokens_per_conversation": ct / 30,
                        "mean_calls_per_conversation": calls / 30, "total_prompt_tokens": pt, "total_completion_tokens": ct}
    expect = tmp_path / "replay_metrics.json"
    expect.write_text(json.dumps({"aggregate_trigger_stats": agg, "metrics": metrics, "token_usage": usage}, indent=2))
    mine = tmp_path / "ours.json"
    proc = _metrics(results, "--expect", str(expect), "--out", str(mine))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert mine.read_text() == expect.read_text()
    assert "id_int x1 [1 row(s), first at line 1]" in proc.stderr
    assert "stats_mismatch" not in proc.stderr  # the sample's stored counts agree with its labels
    assert "weighted score by category" in proc.stdout


def test_expect_names_the_first_differing_field(tmp_path):
    from environments.proact.results import differences

    rows, truths = synthetic_release(random.Random(5))
    expected = expected_metrics(truths)
    ours = json.loads(json.dumps(expected))
    assert differences(ours, expected) == []
    key = "eval/proactivity_critical_pass_rate"
    near = json.loads(json.dumps(expected))
    near["metrics"][key] += 1e-13  # within the tolerance
    assert differences(ours, near) == []
    off = json.loads(json.dumps(expected))
    off["metrics"][key] += 1e-9
    assert differences(ours, off)[0].startswith(f"`metrics.{key}` is ")
    as_int = json.loads(json.dumps(expected))
    as_int["metrics"]["eval/proactivity_critical_total"] = int(as_int["metrics"]["eval/proactivity_critical_total"])
    assert "(float), expected" in differences(ours, as_int)[0] and "(int)" in differences(ours, as_int)[0]
    more = json.loads(json.dumps(expected))
    more["aggregate_trigger_stats"]["EMERGENT"]["ERROR"] = 0
    assert differences(ours, more) == ["`aggregate_trigger_stats.EMERGENT.ERROR` is missing (expected 0 (int))"]
    less = json.loads(json.dumps(expected))
    del less["token_usage"]["judge"]["total_prompt_tokens"]
    assert differences(ours, less)[0].startswith("`token_usage.judge.total_prompt_tokens` is not in the expected file")

    results = write_jsonl(tmp_path / "r.jsonl", rows)
    (tmp_path / "off.json").write_text(json.dumps(off, indent=2))
    proc = _metrics(results, "--expect", str(tmp_path / "off.json"))
    assert proc.returncode == 1
    assert f"first difference: `metrics.{key}` is" in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr


def test_strict_fails_on_any_deviation_but_reports_the_metrics(tmp_path):
    rows, _ = synthetic_release(random.Random(3))
    results = write_jsonl(tmp_path / "r.jsonl", rows)
    proc = _metrics(results, "--strict", "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["official"]["metrics"]["eval/proactivity_total_dialogues"] == 24.0
    clean = write_jsonl(tmp_path / "clean.jsonl", [rows[1], rows[2]])
    assert _metrics(clean, "--strict").returncode == 0


def test_our_error_triggers_are_reported_beside_the_layout_never_inside_it():
    from environments.proact.metrics import official_metrics
    from environments.proact.results import release_layout
    from harness.providers.base import Usage
    from harness.records import SampleRecord

    def rec(sid, labels, usage):
        return SampleRecord(sample_id=sid, epoch=0, seed=0, status="ok", started="", duration_s=0.0,
                            scores={"triggers": [{"turn": i + 1, "type": t, "label": lab} for i, (t, lab) in enumerate(labels)]},
                            usage={role: Usage(prompt_tokens=p, completion_tokens=c, calls=n) for role, (p, c, n) in usage.items()})

    records = [rec("d1", [("RECOVERY", "ERROR"), ("EMERGENT", "PASS")], {"assistant": (10, 5, 2), "judge": (7, 3, 1)}),
               rec("d2", [("EMERGENT", "FAIL"), ("RECOVERY", "PARTIAL")], {"judge": (9, 1, 2), "judge_2": (4, 4, 2)})]
    official = official_metrics(records)
    assert official["aggregate_trigger_stats"] == {"RECOVERY": {"PASS": 0, "PARTIAL": 1, "FAIL": 0, "SKIPPED": 0},
                                                   "EMERGENT": {"PASS": 1, "PARTIAL": 0, "FAIL": 1, "SKIPPED": 0}}
    assert official["error_trigger_stats"] == {"RECOVERY": 1, "EMERGENT": 0}
    assert official["metrics"]["eval/proactivity_recovery_total"] == 1.0
    assert isinstance(official["metrics"]["eval/proactivity_recovery_total"], float)
    assert official["metrics"]["eval/proactivity_overall_weighted_score"] == (1 + 0.5) / 3
    assert "eval/proactivity_critical_total" not in official["metrics"]  # no CRITICAL trigger at all
    assert list(official["token_usage"]) == ["assistant", "judge", "judge_2"]
    assert official["token_usage"]["judge"] == {"mean_prompt_tokens_per_conversation": 8.0,
                                                "mean_completion_tokens_per_conversation": 2.0,
                                                "mean_calls_per_conversation": 1.5,
                                                "total_prompt_tokens": 16, "total_completion_tokens": 4}
    assert official["token_usage"]["assistant"]["mean_calls_per_conversation"] == 1.0
    layout = release_layout(official)
    assert list(layout) == ["aggregate_trigger_stats", "metrics", "token_usage", "error_trigger_stats"]
    no_errors = release_layout(official_metrics(records[1:]))
    assert list(no_errors) == ["aggregate_trigger_stats", "metrics", "token_usage"]


def _one_error_line(proc) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_unusable_results_input_is_one_line_naming_file_and_fix(tmp_path):
    rows, _ = synthetic_release(random.Random(2), n_rows=3)
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text(json.dumps(rows[0]) + "\n{oops\n")
    assert f"{bad_json}:2: not valid JSON" in _one_error_line(_metrics(bad_json))
    array = write_jsonl(tmp_path / "array.jsonl", [rows[0], [1, 2]])
    assert f"{array}:2: a results row is a JSON object" in _one_error_line(_metrics(array))
    rows[1]["trigger_points"][0]["evaluation_rubric"]["type"] = "SURPRISE"
    bad_type = write_jsonl(tmp_path / "type.jsonl", rows)
    line = _one_error_line(_metrics(bad_type))
    assert f"{bad_type}:2: field `trigger_points[0].evaluation_rubric.type` is invalid" in line
    binary = tmp_path / "r.jsonl"
    binary.write_bytes(b"\x00\x01\x02 not text")
    assert "binary file" in _one_error_line(_metrics(binary))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert "has no rows" in _one_error_line(_metrics(empty))
    assert "not found" in _one_error_line(_metrics(tmp_path / "none.jsonl"))
    ok = write_jsonl(tmp_path / "ok.jsonl", rows[:1])
    line = _one_error_line(_metrics(ok, "--expect", str(tmp_path / "nope.json")))
    assert "metrics file" in line and "nope.json" in line and "--expect" in line


def test_a_results_file_of_our_own_keeps_its_error_triggers_apart(tmp_path):
    """Our rows keep a failed trigger as an ERROR verdict and count it in trigger_stats: read
    back, it lands in `error_trigger_stats`, in no denominator, and in no deviation."""
    from corpora.proact_results import load_results
    from environments.proact.results import release_layout, release_metrics

    rows, _ = synthetic_release(random.Random(9), n_rows=3)
    row = rows[1]
    row["trigger_points"][0]["evaluation_result"] = {"status": "ERROR", "error": "assistant: HTTP 500"}
    row["turn_records"][0]["assistant_response"] = None
    kind = row["trigger_points"][0]["evaluation_rubric"]["type"]
    row["trigger_stats"] = {t: {"PASS": 0, "PARTIAL": 0, "FAIL": 0, "SKIPPED": 0, "ERROR": 0} for t in TRIGGER_TYPES}
    for tp in row["trigger_points"]:
        res = tp["evaluation_result"]
        row["trigger_stats"][tp["evaluation_rubric"]["type"]][res["score"] if res["status"] == "EVALUATED" else res["status"]] += 1
    results = load_results(write_jsonl(tmp_path / "ours.jsonl", [row]))
    assert results.deviation_counts() == {}
    _, official = release_metrics(results)
    assert official["error_trigger_stats"][kind] == 1
    listed = sum(1 for tp in row["trigger_points"] if tp["evaluation_rubric"]["type"] == kind)
    assert sum(official["aggregate_trigger_stats"][kind].values()) == listed - 1
    assert release_layout(official)["error_trigger_stats"][kind] == 1
