"""`harness leaderboard export --format eee`: EvalEval's every-eval-ever schema, each document
checked here again with the package itself (its JSON schema and its pydantic model)."""

from __future__ import annotations

import io
import json
import sys

import jsonschema
import pandas as pd
import pytest
from every_eval_ever.eval_types import EvaluationLog
from every_eval_ever.schema import schema_json

from harness.errors import HarnessError
from harness.run_folder import RunFolder
from leaderboards.aggregate import build_leaderboard
from leaderboards.eee import to_eee
from tests.conftest import harness_cli
from tests.leaderboards.runs import write_run

HEADLINE = "proactivity_overall_weighted_score"


def _export(*args: str) -> str:
    proc = harness_cli("leaderboard", "export", "--suite", "proact", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def panel_run_dir(loopback_runs, tmp_path_factory):
    """One run judged by a two-model panel, the loopback run a0's samples under another config."""
    run_dir = tmp_path_factory.mktemp("eee-panel")
    records = RunFolder(loopback_runs.main, loopback_runs.ids["a0"]).read_samples()
    write_run(run_dir, "panel-run", records,
              models={"assistant": "openai/p", "judge": "openai/j1", "judge_2": "anthropic/j2"})
    return run_dir


def test_each_row_is_one_document_the_package_accepts_with_metric_ci_n_model_and_judge(loopback_runs):
    runs = loopback_runs
    args = ("--run-dir", str(runs.main), "--run-dir", str(runs.other))
    docs = [json.loads(line) for line in _export(*args, "--format", "eee").splitlines()]
    frame = pd.read_csv(io.StringIO(_export(*args, "--format", "csv")))
    assert len(docs) == len(frame) == 5  # one document per leaderboard row
    schema = schema_json("eval.schema.json")
    for doc in docs:
        jsonschema.validate(doc, schema)  # raises on the first violation
        EvaluationLog.model_validate(doc)
        assert doc["schema_version"] == schema["version"] == "0.3.0"

    by_key = {(d["model_info"]["id"], d["eval_library"]["additional_details"]["judge"],
               d["eval_library"]["additional_details"]["suite_version"]): d for d in docs}
    row = frame[(frame["model"] == "openai/a") & (frame["judge"] == "openai/k")].iloc[0]
    doc = by_key[("openai/a", "openai/k", row["suite_version"])]
    assert doc["eval_library"]["additional_details"]["run_ids"] == row["run_ids"]
    results = {r["metric_config"]["metric_id"]: r for r in doc["evaluation_results"]}
    assert list(results)[0] == HEADLINE  # the ranking metric first
    head = results[HEADLINE]
    assert head["score_details"]["score"] == pytest.approx(row[HEADLINE])
    ci = head["score_details"]["uncertainty"]["confidence_interval"]
    assert (ci["lower"], ci["upper"]) == (pytest.approx(row[f"{HEADLINE}_ci_low"]),
                                          pytest.approx(row[f"{HEADLINE}_ci_high"]))
    assert ci["confidence_level"] == 0.95 and "bootstrap" in ci["method"]
    assert head["score_details"]["uncertainty"]["num_samples"] == row["n"] == 3
    assert head["metric_config"]["lower_is_better"] is False
    # The judge, named from the run's config roles: the loopback run was judged by openai/k.
    [judge] = head["metric_config"]["llm_scoring"]["judges"]
    assert judge["model_info"]["id"] == "openai/k" and judge["additional_details"]["role"] == "judge"
    assert doc["model_info"] == {"name": "a", "id": "openai/a", "inference_platform": "openai",
                                 "additional_details": {"deployment_type": "unknown", "model_availability": "unknown"}}


def test_a_judge_panel_names_every_judge(panel_run_dir):
    [line] = _export("--run-dir", str(panel_run_dir), "--format", "eee").splitlines()
    doc = json.loads(line)
    for result in doc["evaluation_results"]:
        judges = result["metric_config"]["llm_scoring"]["judges"]
        assert [(j["model_info"]["id"], j["additional_details"]["role"]) for j in judges] == \
            [("openai/j1", "judge"), ("anthropic/j2", "judge_2")]


def test_a_document_the_package_rejects_is_an_error_and_nothing_is_written(loopback_runs, monkeypatch):
    import leaderboards.eee as eee

    board = build_leaderboard([loopback_runs.other], "proact")
    real = eee.document

    def broken(*args, **kwargs):
        doc = real(*args, **kwargs)
        doc["evaluation_results"][0]["score_details"]["score"] = "high"  # the schema wants a number
        return doc

    monkeypatch.setattr(eee, "document", broken)
    with pytest.raises(HarnessError, match=r"fails the every-eval-ever 0\.3\.0 checks: .*score"):
        to_eee(board)


def test_without_the_package_the_export_refuses_and_says_how_to_install_it(loopback_runs, monkeypatch):
    board = build_leaderboard([loopback_runs.other], "proact")
    monkeypatch.setitem(sys.modules, "every_eval_ever", None)  # import fails as if not installed
    monkeypatch.setitem(sys.modules, "every_eval_ever.eval_types", None)
    with pytest.raises(HarnessError, match=r"every-eval-ever package.*make install"):
        to_eee(board)


def test_unknown_format_is_one_error_naming_the_formats(loopback_runs):
    proc = harness_cli("leaderboard", "export", "--suite", "proact", "--run-dir", str(loopback_runs.other),
                       "--format", "eve")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    [line] = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert line.startswith("error: --format 'eve'") and "eee" in line and "csv" in line
