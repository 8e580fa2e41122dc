"""The whole report: each suite's own section through its hook (adv0's filmstrips, ProGraf's renders,
the papers' claims table), the serving benchmarks, the overview; and the claims table as CSV/Markdown."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from harness.errors import HarnessError
from harness.suite import ReportInput, ReportSection, Suite
from leaderboards.combined import combined_report
from leaderboards.sections import Family, hook_section, unsafe_markup


@pytest.fixture(scope="module")
def report(report_run_dir) -> str:
    return combined_report([report_run_dir], bench=[])


def _section(html: str, family: str) -> str:
    start = html.index(f'data-family="{family}"')
    end = html.find('<section class="family"', start)
    return html[start:end if end > 0 else None]


def test_every_suite_has_its_section_and_a_card(report):
    families = re.findall(r'<section class="family" id="[^"]+" data-family="([^"]+)"', report)
    assert families == ["adv0", "papers.made_up_task", "papers", "prograf", "serving"]
    assert 'id="s-serving"' in report and "none given" in report  # no --bench: the section says how to add one
    overview = report[report.index('<nav class="overview">'):report.index("</nav>")]
    for anchor in ("#s-adv0", "#s-papers", "#s-prograf", "#s-serving"):
        assert f'href="{anchor}"' in overview
    assert "3 claims: 1 reproduced, 1 not reproduced, 1 inconclusive" in overview
    assert "2 crashes in 3 episodes, 2 with a filmstrip" in overview
    # a saved check of a task not installed here: a note, and its row still in the claims table
    assert "&#x27;papers.made_up_task&#x27; is not installed here" in _section(report, "papers.made_up_task")


def test_claims_table_says_each_verdict_plainly(report):
    claims = _section(report, "papers")
    rows = re.findall(r'<tr data-verdict="([^"]+)">(.*?)</tr>', claims)
    assert [v for v, _ in rows] == ["inconclusive", "not reproduced", "reproduced"]  # task name order
    by_verdict = dict(rows)
    assert '<span class="bad">NOT REPRODUCED: the claim did not hold here (mean forced_rate(linear) &gt;= 0.5 @ ' \
           "prefix8: 0.4 [0.3, 0.6] -&gt; fails)" in by_verdict["not reproduced"]
    assert "reproduced: every condition held" in by_verdict["reproduced"]
    assert "about 12 seeds would decide it" in by_verdict["inconclusive"]
    # method vs the best of the baselines the criterion names (ptq: uniform 0.8 beats weight_mse 0.7),
    # with the check's own paired difference against that baseline
    assert "priced 0.9 [0.8, 0.95]" in by_verdict["reproduced"] and "uniform 0.8 [0.7, 0.85]" in by_verdict["reproduced"]
    assert "0.1 [0.05, 0.2] (n=3)" in by_verdict["reproduced"] and "accuracy @ 2.5bits" in by_verdict["reproduced"]
    assert "12.5" in by_verdict["reproduced"]  # wall time
    assert "<script>" not in report and "&lt;script&gt;alert(&quot;x&quot;)" in claims


def test_pictures_are_inline_next_to_their_numbers(report):
    adv0 = _section(report, "adv0")
    failures = re.findall(r'<div class="failure wide" data-sample="([^"]+)">(.*?)</table></div>', adv0, re.S)
    assert [s for s, _ in failures] == ["highway/seed1000000", "highway/seed1000001"]  # defender failure first
    for _, body in failures:
        assert body.count('src="data:image/png;base64,iVBORw0KGgo') == 1 and "<th>at fault</th>" in body
    assert "not a base64 PNG" in failures[1][1] and "onload" not in adv0  # the fake picture is a note
    prograf = _section(report, "prograf")
    tasks = dict(re.findall(r'<div class="task wide side" data-sample="([^"]+)">(.*?)</table></div>', prograf, re.S))
    svg_tasks = [t for t in tasks if t.startswith("geometry")]
    assert len(svg_tasks) == 2 and all('src="data:image/png;base64,iVBORw0KGgo' in tasks[t] for t in svg_tasks)
    failed = [t for t in svg_tasks if '<span class="bad">FAIL</span>' in tasks[t]]
    assert len(failed) == 1  # the mutant fails its target point, shown beside its render
    # DOT is drawn from what the verifier parsed (prograf/pictures.py), through the same render path
    assert 'src="data:image/png;base64,iVBORw0KGgo' in next(v for k, v in tasks.items() if k.startswith("flowchart"))
    assert not re.search(r"""\b(?:src|href)\s*=\s*["']?(?:https?:|//|file:)""", report)  # nothing to fetch


def test_a_section_that_would_fetch_or_run_is_left_out(tmp_path):
    class Linking(Suite):
        name, version, headline_metric = "linking", "0", "x"

        @classmethod
        def report_section(cls, found: ReportInput) -> ReportSection | None:
            return ReportSection(title="t", html='<img src="https://example.com/a.png">')

    class Crashing(Linking):
        @classmethod
        def report_section(cls, found: ReportInput) -> ReportSection | None:
            return {}["runs"]

    section, notes = hook_section(Family("linking", ["linking"], Linking), {}, {}, [tmp_path])
    assert section is None and "would run or fetch" in notes[0] and "linking" in notes[0]
    section, notes = hook_section(Family("crashing", ["crashing"], Crashing), {}, {}, [tmp_path])
    assert section is None and "failed (KeyError: 'runs'); its section is left out" in notes[0]
    for bad in ("<script>1</script>", '<div onclick="x">', "<a href='//x'>", '<p style="background:url(http://a)">'):
        assert unsafe_markup(bad), bad
    for fine in ('<img alt="a" src="data:image/png;base64,AAAA">', '<a href="#s-adv0">', "once = 3, onward=2"):
        assert unsafe_markup(fine) is None, fine


def test_claims_table_as_csv_and_markdown(report_run_dir, tmp_path):
    from typer.testing import CliRunner

    from environments.papers.commands import papers_app

    def table(*args: str) -> CliRunner:
        return CliRunner().invoke(papers_app, ["table", *args])

    made = table("--format", "csv", "--run-dir", str(report_run_dir))
    assert made.exit_code == 0, made.output
    rows = list(csv.DictReader(io.StringIO(made.stdout)))
    assert [r["task"] for r in rows] == ["made_up_task", "prefix_linear_forcing", "ptq_priced_bitalloc"]
    prefix = rows[1]
    assert prefix["verdict_code"] == "not reproduced" and prefix["verdict"].startswith("NOT REPRODUCED: the claim did not hold")
    assert float(prefix["method_mean"]) == 0.9 and float(prefix["baseline_mean"]) == 0.8
    assert float(prefix["difference_ci_low"]) == 0.05 and prefix["wall s"] == "12.5"
    md = table("--format", "md", "--run-dir", str(report_run_dir)).stdout.splitlines()
    assert len(md) == 2 + 3 and "NOT REPRODUCED" in md[3] and md[0].startswith("| task | claim | criterion |")
    empty = table("--run-dir", str(tmp_path))
    assert empty.exit_code != 0 and "harness papers check --all --json RUN_DIR" in empty.output


def test_saved_reports_newest_wins_and_a_bad_file_is_named(tmp_path, report_run_dir):
    from environments.papers.outcomes import CheckReport
    from environments.papers.report import load_reports, save_reports, saved_files

    [old] = [f for f in saved_files([report_run_dir]) if "ptq" in str(f)]
    report = CheckReport.model_validate_json(old.read_text())
    newer = report.model_copy(update={"verdict": "not reproduced", "wall_s": 99.0})
    [listed] = save_reports([newer], tmp_path / "list.json")  # a .json path: one file holding a list
    assert isinstance(json.loads(listed.read_text()), list)
    loaded = {r.task: r for r in load_reports([old, listed])}
    assert loaded["ptq_priced_bitalloc"].wall_s == 99.0  # the newer file
    bad = tmp_path / "bad.json"
    bad.write_text('{"task": 1}')
    with pytest.raises(HarnessError, match=r"bad\.json: not a `harness papers check` report"):
        load_reports([bad])


def test_whole_report_bad_input_is_one_clear_line(tmp_path):
    from typer.testing import CliRunner

    from leaderboards.commands import leaderboard_app

    def export(*args: str):
        return CliRunner().invoke(leaderboard_app, ["export", "--run-dir", str(tmp_path), *args])

    no_suite = export("--format", "csv")
    assert no_suite.exit_code == 2 and "--suite is needed for csv" in no_suite.output
    empty = export("--format", "html")
    assert empty.exit_code == 2 and "nothing to report in" in empty.output and "papers check --all --json" in empty.output
