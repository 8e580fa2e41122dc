"""Per-role models and endpoints (`--role`, `--role-base-url`) and `HARNESS_*` environment variables."""

from __future__ import annotations

import json
import urllib.request

from harness.loopback import running_server
from harness.run_folder import RunFolder
from tests.conftest import JUDGE_PASS, harness_cli


def _served(url: str) -> int:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as resp:
        return json.load(resp)["served"]


def test_each_role_on_its_own_endpoint_and_flags_from_the_environment(tmp_path):
    run_dir = tmp_path / "runs"
    with running_server("--echo") as assistant, running_server("--echo", "--reply", JUDGE_PASS) as judge:
        env = {"HARNESS_EVAL_MODEL": "openai/a", "HARNESS_EVAL_LIMIT": "2", "HARNESS_EVAL_BASE_URL": assistant}
        proc = harness_cli("eval", "--suite", "proact", "--role", "judge=openai/j", "--role-base-url", f"judge={judge}",
                           "--run-dir", str(run_dir), "--no-progress", env=env)
        assert proc.returncode == 0, proc.stderr
        [run_id] = [p.name for p in run_dir.iterdir() if (p / "manifest.json").exists()]
        records = RunFolder(run_dir, run_id).read_samples()
        triggers = sum(len(r.scores["triggers"]) for r in records)
        assert len(records) == 2 and _served(assistant) == triggers and _served(judge) == triggers
    assert all(lab["label"] == "PASS" for r in records for lab in r.scores["triggers"])
    manifest = RunFolder(run_dir, run_id).read_manifest()
    assert manifest.config.models == {"assistant": "openai/a", "judge": "openai/j"}
    assert manifest.config.base_urls == {"judge": judge}


def test_bad_role_flags_are_one_line(tmp_path):
    for args, must in ((("--role", "nosuch=openai/x"), "no role 'nosuch'"),
                       (("--role", "judge"), "ROLE=VALUE"),
                       (("--role-base-url", "planner=http://127.0.0.1:9/v1"), "no role 'planner'")):
        proc = harness_cli("eval", "--suite", "proact", *args, "--run-dir", str(tmp_path / "runs"), "--no-progress")
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and must in lines[0], proc.stderr
