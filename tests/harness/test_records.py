"""Records on disk: torn-line repair, secrets masked, the HF-id corpus path fails clearly offline."""

import json

import pytest

from corpora.proactbench import load_rows
from harness.errors import HarnessError
from harness.records import RunConfig, RunManifest, SampleRecord
from harness.run_folder import RunFolder


def _rec(i: int) -> SampleRecord:
    return SampleRecord(sample_id=f"s{i}", epoch=0, seed=i, status="ok", started="t", duration_s=0.1)


def test_torn_last_line_is_dropped_and_file_repaired(tmp_path):
    folder = RunFolder(tmp_path, "r1")
    for i in range(3):
        folder.append(_rec(i))
    folder.close()
    whole = folder.samples_path.read_bytes()
    folder.samples_path.write_bytes(whole + b'{"sample_id": "s3", "ep')
    records = folder.repair_and_read_samples()
    assert [r.sample_id for r in records] == ["s0", "s1", "s2"]
    assert folder.samples_path.read_bytes() == whole  # appends after repair start on a fresh line
    folder.append(_rec(3))
    folder.close()
    assert [r.sample_id for r in folder.read_samples()] == ["s0", "s1", "s2", "s3"]


def test_duplicate_lines_count_once(tmp_path):
    folder = RunFolder(tmp_path, "r1")
    folder.append(_rec(0))
    folder.append(_rec(0))
    folder.close()
    assert len(folder.repair_and_read_samples()) == 1


def test_api_keys_and_url_passwords_never_reach_the_manifest(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-very-secret-123")
    config = RunConfig(suite="proact", models={"assistant": "openai/x"}, base_url="http://bob:hunter22@127.0.0.1:9/v1")
    manifest = RunManifest(run_id="r1", suite="proact", suite_version="1", config=config, config_hash="h",
                           started="t", command=["harness", "eval", "--note", "sk-test-very-secret-123"])
    folder = RunFolder(tmp_path, "r1")
    folder.write_manifest(manifest)
    text = folder.manifest_path.read_text()
    assert "sk-test-very-secret-123" not in text and "hunter22" not in text
    assert json.loads(text)["config"]["base_url"] == "http://bob:***@127.0.0.1:9/v1"
    assert manifest.config.base_url.startswith("http://bob:hunter22@")  # the live config still works


def test_hub_dataset_id_fails_with_one_clear_line_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(HarnessError) as info:
        load_rows("nobody-here/no-such-dataset")
    msg = str(info.value)
    assert "nobody-here/no-such-dataset" in msg and "--corpus PATH" in msg and "\n" not in msg
