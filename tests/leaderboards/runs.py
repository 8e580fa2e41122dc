"""Runs for the leaderboard, report and viewer tests, made once per session.

Real runs come from `harness eval` against loopback judges (instant, deterministic verdicts: one
server always says PASS, one always FAIL). Where a test needs records no CLI flag can produce (an
older suite version, 10k samples, a reply that tries to inject a script), they are written with
the harness's own records writer and summarised by the suite's own metrics code.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.loopback import running_server
from harness.records import RunConfig, RunManifest, RunSummary, SampleRecord, now_iso
from harness.run_folder import RunFolder, RunIndex
from tests.conftest import CHROMIUM, JUDGE_PASS, harness_cli

JUDGE_FAIL = '{"score": "FAIL", "rationale": "it ignored the anchor", "evidence": "FAIL"}'


@dataclass
class LoopbackRuns:
    """Two run dirs. main: model a under judge j (two seeds: one pooled row), model c under j with
    FAIL verdicts, model a under judge k, and an older-suite-version copy of a's run. other: model b
    under j. `ids` maps a short name to the run id."""

    main: Path
    other: Path
    ids: dict[str, str]


def _run_ids(run_dir: Path) -> set[str]:
    return {p.name for p in run_dir.iterdir() if (p / "manifest.json").exists()}


def _eval(run_dir: Path, url: str, model: str, judge: str, *extra: str) -> str:
    before = _run_ids(run_dir) if run_dir.exists() else set()
    proc = harness_cli("eval", "--suite", "proact", "--model", model, "--judge-model", judge, "--base-url", url,
                       "--limit", "3", "--run-dir", str(run_dir), "--no-progress", *extra)
    assert proc.returncode == 0, proc.stderr
    [new] = _run_ids(run_dir) - before
    return new


def write_run(run_dir: Path, run_id: str, records: list[SampleRecord], *, suite_version: str | None = None,
              models: dict[str, str] | None = None, status: str = "complete", summarise: bool = True) -> RunFolder:
    """A run written through the harness's records API, summarised by the installed suite
    (`summarise=False`: no summary, as for a run still in progress)."""
    from harness.suite import get_suite

    suite = get_suite("proact")
    config = RunConfig(suite="proact", models=models or {"assistant": "openai/a", "judge": "openai/j"})
    manifest = RunManifest(run_id=run_id, suite="proact", suite_version=suite_version or suite.version,
                           config=config, config_hash=run_id, started=now_iso(), ended=now_iso(), status=status)
    folder = RunFolder(run_dir, run_id)
    folder.write_manifest(manifest)
    for rec in records:
        folder.append(rec)
    folder.close()
    if not summarise:
        index = RunIndex(run_dir)
        index.record(manifest, None, len(records), sum(r.status == "error" for r in records))
        index.close()
        return folder
    usage: dict = {}
    for rec in records:
        for role, u in rec.usage.items():
            usage.setdefault(role, type(u)()).add(u)
    summary = RunSummary(run_id=run_id, suite="proact", suite_version=manifest.suite_version,
                         headline_metric=suite.headline_metric, metrics=suite.metrics(records),
                         breakdowns=suite.breakdowns(records), usage=usage,
                         counts={"samples": len(records), "sample_errors": sum(r.status == "error" for r in records)})
    folder.write_summary(summary)
    index = RunIndex(run_dir)
    index.record(manifest, summary, len(records), sum(r.status == "error" for r in records))
    index.close()
    return folder


def make_loopback_runs(base: Path) -> LoopbackRuns:
    """Made once per session (the folder is the cache: a second caller finds ids.json)."""
    done = base / "ids.json"
    if done.exists():
        return LoopbackRuns(base / "main", base / "other", json.loads(done.read_text()))
    if base.exists():
        shutil.rmtree(base)
    main, other = base / "main", base / "other"
    ids: dict[str, str] = {}
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        ids["a0"] = _eval(main, url, "openai/a", "openai/j", "--seed", "0")
        ids["a1"] = _eval(main, url, "openai/a", "openai/j", "--seed", "1")
        ids["ak"] = _eval(main, url, "openai/a", "openai/k")
        ids["b"] = _eval(other, url, "openai/b", "openai/j")
    with running_server("--echo", "--reply", JUDGE_FAIL) as url:
        ids["c"] = _eval(main, url, "openai/c", "openai/j")
    # The same samples as a0, recorded by an older suite version: must never join a0's row.
    old = RunFolder(main, ids["a0"]).read_samples()
    ids["old"] = "proact-old-version-run"
    write_run(main, ids["old"], old, suite_version="0.9.0")
    done.write_text(json.dumps(ids))
    return LoopbackRuns(main, other, ids)


def launch_chromium(playwright):
    """Debian's Chromium, headless, no sandbox (root in CI), no background network traffic. A
    `browser` test without it has already failed, or been skipped on request (tests/conftest.py)."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True,
        args=["--no-sandbox", "--disable-background-networking", "--disable-component-update",
              "--disable-default-apps", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"])


def torch_env() -> dict[str, str]:
    """One torch thread: tests share this 2-core machine with other heavy jobs."""
    return {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
