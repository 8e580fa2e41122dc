"""`harness bench runner` runs both paths and reports their rates (figures go in notes, not asserts)."""

import re

from tests.conftest import harness_cli


def test_bench_runner_reports_both_rates_and_writes_every_record():
    proc = harness_cli("bench", "runner", "--samples", "150", "--concurrency", "8")
    assert proc.returncode == 0, proc.stderr
    assert "harness runner (records on, cache off)" in proc.stdout and "raw AsyncOpenAI client" in proc.stdout
    assert re.search(r"runner / raw = \d+\.\d\d", proc.stdout)
    assert "samples.jsonl lines written: 150" in proc.stdout
