"""The suites' own report sections: which suites the run dirs hold, their report families, and a
call of each family's presenter hook (`Presenter.report_section`) with what was found.

A suite is found by its runs (the run index) or by files its commands saved under
`RUN_DIR/reports/<suite>/` (`harness.presenter.saved_reports_dir`; e.g. `harness papers check --json
RUN_DIR`). A hook's markup goes into the offline report as is, so it is checked first: a section
with a script, or a link or picture that is not inline, is refused with a note naming the suite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError
from harness.presenter import REPORTS_FOLDER, Presenter, ReportInput, ReportSection, presenter_for
from harness.suite import suite_class
from leaderboards.aggregate import Leaderboard
from leaderboards.runs import RunInfo, check_run_dirs, load_runs

# Anything a browser would fetch or run, inside a tag (record text is escaped, so it has no tags): a
# script or embedding element, an event handler, a src/href that is not inline (data:) or a fragment
# (#id); and CSS url() outside data:, @import.
_UNSAFE = re.compile(
    r"<\s*(?:script|iframe|object|embed|link|base|meta)\b"
    r"|<[^>]*\son\w+\s*="
    r"|<[^>]*\b(?:src|href|srcset|action|formaction)\s*=\s*[\"']?(?![\"']|data:|#)"
    r"|url\(\s*[\"']?(?![\"']|data:)|@import", re.IGNORECASE)


@dataclass
class Found:
    """What the run dirs hold for one suite."""

    runs: list[RunInfo] = field(default_factory=list)
    saved: list[Path] = field(default_factory=list)


def find_suites(run_dirs: list[Path]) -> dict[str, Found]:
    """Suite name -> its runs (every status) and saved report files, in name order."""
    found: dict[str, Found] = {}
    for run in load_runs(run_dirs, details=False):
        found.setdefault(run.suite, Found()).runs.append(run)
    for run_dir in check_run_dirs(run_dirs):
        folder = run_dir / REPORTS_FOLDER
        for sub in sorted(folder.iterdir()) if folder.is_dir() else []:
            files = sorted(p for p in sub.rglob("*") if p.is_file()) if sub.is_dir() else []
            if files:
                found.setdefault(sub.name, Found()).saved.extend(files)
    return dict(sorted(found.items()))


def unsafe_markup(html: str) -> str | None:
    """The first thing in `html` that would run or fetch, or None."""
    match = _UNSAFE.search(html)
    return match.group(0) if match else None


@dataclass
class Family:
    """Suites that share one report section (`Presenter.report_family`), the presenter whose hook builds it."""

    name: str
    suites: list[str]
    hook: Presenter | None
    notes: list[str] = field(default_factory=list)


def families(names: list[str]) -> list[Family]:
    """Group suites by report family; a suite that is not installed (or fails to load) is a note,
    never a failed report."""
    out: dict[str, Family] = {}
    for name in names:
        try:
            cls = suite_class(name)
        except HarnessError:  # not installed here (the run dirs came from elsewhere)
            out.setdefault(name, Family(name, [name], None)).notes.append(
                f"suite {name!r} is not installed here, so it has no section (`harness list` names the installed ones)")
            continue
        except ImportError as exc:
            out.setdefault(name, Family(name, [name], None)).notes.append(
                f"suite {name!r} could not be loaded, so it has no section: {exc}")
            continue
        presenter = presenter_for(cls.name)
        key = presenter.report_family or cls.name
        family = out.setdefault(key, Family(key, [], presenter))
        family.suites.append(name)
    return list(out.values())


def hook_section(family: Family, runs: dict[str, list[RunInfo]], saved: dict[str, list[Path]],
                 run_dirs: list[Path]) -> tuple[ReportSection | None, list[str]]:
    """The family's section from its hook (None if it has none), and notes for the reader."""
    if family.hook is None:
        return None, []
    found = ReportInput(suites=tuple(family.suites),
                        runs={s: [r.folder for r in runs.get(s, [])] for s in family.suites},
                        saved={s: list(saved.get(s, [])) for s in family.suites}, run_dirs=tuple(run_dirs))
    try:
        section = family.hook.report_section(found)
    except Exception as exc:  # a plugin boundary: one failing hook leaves its section out, not the report
        return None, [f"the report hook of {family.name!r} failed ({type(exc).__name__}: {exc}); its section is left out"]
    if section is None:
        return None, []
    bad = unsafe_markup(section.html)
    if bad is not None:
        return None, [f"the report hook of {family.name!r} wrote markup that would run or fetch ({bad!r}); "
                      "its section is left out (pictures must be inline data: URLs)"]
    return section, []


def suite_section(board: Leaderboard) -> tuple[ReportSection | None, list[str]]:
    """One suite's hook section for its single-suite report, over the runs its leaderboard ranked."""
    [family] = families([board.suite])
    runs = {board.suite: [run for row in board.rows for run in row.runs]}
    saved = {board.suite: find_suites(board.run_dirs).get(board.suite, Found()).saved}
    section, notes = hook_section(family, runs, saved, board.run_dirs)
    return section, family.notes + notes
