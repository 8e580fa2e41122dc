"""The whole report: each suite's own section through its hook (adv0's filmstrips, ProGraf's renders,
the papers' claims table), the serving benchmarks, the overview; and the claims table as CSV/Markdown."""

from __future__ import annotations

import csv
import io
import re

import pytest

from harness.errors import HarnessError
from harness.presenter import Presenter, ReportInput, ReportSection
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
    assert families == ["adv0", "prograf", "claims", "serving"]
    assert 'id="s-serving"' in report and "none given" in report  # no --bench: the section says how to add one
    overview = report[report.index('<nav class="overview">'):report.index("</nav>")]
    for anchor in ("#s-adv0", "#s-claims", "#s-prograf", "#s-serving"):
        assert f'href="{anchor}"' in overview
    assert "3 claims: 1 reproduced, 1 not reproduced, 1 inconclusive" in overview
    assert "2 crashes in 3 episodes, 2 with a filmstrip" in overview
    # a saved verdict of a task not installed here still has its row: the table needs only the verdict
    assert "papers.made_up_task" in _section(report, "claims")


def test_claims_table_says_each_verdict_plainly(report):
    claims = _section(report, "claims")
    rows = re.findall(r'<tr data-verdict="([^"]+)">(.*?)</tr>', claims)
    assert [v for v, _ in rows] == ["inconclusive", "not reproduced", "reproduced"]  # claim id order
    by_verdict = dict(rows)
    assert '<span class="bad">not reproduced</span>' in by_verdict["not reproduced"]
    assert "mean score(prefix_linear_forcing) &gt;= 0.5 @ small: 0.4 [0.3, 0.6]" in by_verdict["not reproduced"]
    assert "about 12 seeds would decide it" in by_verdict["inconclusive"]
    assert "0123456789abcdef (2026-12-06)" in by_verdict["reproduced"]  # criterion hash and registration date
    assert "<th>what it can do to the verdict</th>" in claims and "use synthetic data" in claims  # the departures
    assert "12" in by_verdict["reproduced"]  # wall time
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
    # DOT is drawn from what the verifier parsed (prograf/image/pictures.py), through the same render path
    assert 'src="data:image/png;base64,iVBORw0KGgo' in next(v for k, v in tasks.items() if k.startswith("flowchart"))
    # the verifier audit heads the section: how far the verifier can be trusted, per category and format
    assert "How far the verifier can be trusted" in prograf and "<td>flowchart</td><td>mermaid</td>" in prograf
    assert not re.search(r"""\b(?:src|href)\s*=\s*["']?(?:https?:|//|file:)""", report)  # nothing to fetch


def test_a_section_that_would_fetch_or_run_is_left_out(tmp_path):
    class Linking(Presenter):
        def report_section(self, found: ReportInput) -> ReportSection | None:
            return ReportSection(title="t", html='<img src="https://example.com/a.png">')

    class Crashing(Presenter):
        def report_section(self, found: ReportInput) -> ReportSection | None:
            return {}["runs"]

    section, notes = hook_section(Family("linking", ["linking"], Linking()), {}, {}, [tmp_path])
    assert section is None and "would run or fetch" in notes[0] and "linking" in notes[0]
    section, notes = hook_section(Family("crashing", ["crashing"], Crashing()), {}, {}, [tmp_path])
    assert section is None and "failed (KeyError: 'runs'); its section is left out" in notes[0]
    for bad in ("<script>1</script>", '<div onclick="x">', "<a href='//x'>", '<p style="background:url(http://a)">'):
        assert unsafe_markup(bad), bad
    for fine in ('<img alt="a" src="data:image/png;base64,AAAA">', '<a href="#s-adv0">', "once = 3, onward=2"):
        assert unsafe_markup(fine) is None, fine


def test_claims_table_as_csv_and_markdown(report_run_dir, tmp_path):
    from typer.testing import CliRunner

    from harness.cli.claims_cmds import claims_app

    def table(*args: str):
        return CliRunner().invoke(claims_app, ["table", *args])

    made = table("--format", "csv", "--run-dir", str(report_run_dir))
    assert made.exit_code == 0, made.output
    rows = list(csv.DictReader(io.StringIO(made.stdout)))
    assert [r["claim"] for r in rows] == ["papers.made_up_task", "papers.prefix_linear_forcing", "papers.ptq_priced_bitalloc"]
    prefix = rows[1]
    assert prefix["verdict_code"] == "not reproduced" and prefix["departures"] == "1" and prefix["wall s"] == "12"
    md = table("--format", "md", "--run-dir", str(report_run_dir)).stdout.splitlines()
    assert len(md) == 2 + 3 and "not reproduced" in md[3] and md[0].startswith("| claim | paper's sentence | verdict |")
    empty = table("--run-dir", str(tmp_path))
    assert empty.exit_code != 0 and "harness claims check CLAIM" in empty.output


def test_a_bad_saved_verdict_is_named(tmp_path):
    from harness.claims.verdict import load_verdicts

    (tmp_path / "claims").mkdir()
    (tmp_path / "claims" / "bad.json").write_text('{"claim": 1}')
    with pytest.raises(HarnessError, match=r"bad\.json: not a saved claim verdict"):
        load_verdicts([tmp_path])


def test_whole_report_bad_input_is_one_clear_line(tmp_path):
    from typer.testing import CliRunner

    from leaderboards.commands import leaderboard_app

    def export(*args: str):
        return CliRunner().invoke(leaderboard_app, ["export", "--run-dir", str(tmp_path), *args])

    no_suite = export("--format", "csv")
    assert no_suite.exit_code == 2 and "--suite is needed for csv" in no_suite.output
    empty = export("--format", "html")
    assert empty.exit_code == 2 and "nothing to report in" in empty.output and "papers check --all --run-dir" in empty.output
