"""Leaderboard export keeps ProGraf's labelled non-results off the board: a loop run with
`checker=oracle` (an upper bound) and a run of the synthetic mock generator are each refused with
one error naming the run and the fix; a `checker=prompt` run of a real model ranks.

The run folders are written with the harness's records API (a real run of the loop would take
seconds per task and is not what this test is about)."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.records import Metric, RunConfig, RunManifest, RunSummary, now_iso
from harness.run_folder import RunFolder, RunIndex
from leaderboards.aggregate import build_leaderboard

SUITE = "prograf-loop"


def write_run(run_dir, run_id: str, model: str, options: dict) -> None:
    config = RunConfig(suite=SUITE, models={"assistant": model}, suite_options=options)
    manifest = RunManifest(run_id=run_id, suite=SUITE, suite_version="0.3.0", config=config, config_hash=run_id,
                           started=now_iso(), ended=now_iso(), status="complete")
    folder = RunFolder(run_dir, run_id)
    folder.write_manifest(manifest)
    folder.close()
    summary = RunSummary(run_id=run_id, suite=SUITE, suite_version="0.3.0", headline_metric="recovery",
                         metrics={"recovery": Metric(value=0.5, ci_low=0.2, ci_high=0.8, n=10)})
    folder.write_summary(summary)
    index = RunIndex(run_dir)
    index.record(manifest, summary, 10, 0)
    index.close()


def test_a_prompt_checker_run_of_a_model_ranks(tmp_path):
    write_run(tmp_path, "run-prompt", "openai/gen", {"checker": "prompt", "method": "loop"})
    board = build_leaderboard([tmp_path], SUITE)
    assert [r.run_ids for r in board.rows] == [["run-prompt"]] and board.rows[0].rank == 1


def test_an_oracle_checker_run_is_refused_by_name_with_the_fix(tmp_path):
    write_run(tmp_path, "run-prompt", "openai/gen", {"checker": "prompt"})
    write_run(tmp_path, "run-oracle", "openai/gen", {"checker": "oracle"})
    with pytest.raises(HarnessError) as err:
        build_leaderboard([tmp_path], SUITE)
    message = str(err.value)
    assert "run run-oracle" in message and "checker=oracle" in message and "upper bound" in message
    assert "rerun it with checker=prompt" in message and "refuses" in message and "run-prompt" not in message


def test_a_synthetic_generator_run_is_refused_by_name_with_the_fix(tmp_path):
    write_run(tmp_path, "run-mock", "synthetic/prograf-weak-circuits", {"checker": "prompt"})
    with pytest.raises(HarnessError) as err:
        build_leaderboard([tmp_path], SUITE)
    message = str(err.value)
    assert "run run-mock" in message and "synthetic/prograf-weak-circuits" in message
    assert "move them out of --run-dir" in message


def test_synthetic_is_the_providers_label_not_a_name_prefix():
    """The leaderboard asks the provider registry (the mock's provider says `synthetic = True`);
    leaderboards/ names no provider."""
    from harness.providers import is_synthetic

    assert is_synthetic("synthetic/prograf-weak-circuits")
    assert not is_synthetic("openai/synthetic-data-model") and not is_synthetic("local/smollm2-135m")
    assert not is_synthetic("nosuch/model")  # a provider not installed here is not known to be one
