"""How a family's runs are shown, beside what they are: the suite contract (`harness.suite`) says
what a task is; a presenter, found by entry point, says how its samples and metrics are drawn, so
that the viewer and the report (`leaderboards/`) name no suite.

A family registers a `Presenter` subclass under the entry-point group `harness.presenters`; the
entry's name is a suite name, or a prefix ending in `*` for a family of suites (`proact*`,
`papers.*`). Every hook
is optional: the base class draws nothing special and the viewer falls back to its generic views.
Hooks return trusted HTML: every text that came from a record goes through `escape` (model output
is data); the helpers below do that for the common pieces (a chat message, a judge's label, a
quote highlighted in a reply). A family that has published results (a paper's released
metrics) can also give them as reference rows (`reference_rows`), shown beside the user's runs, and
its own section of the offline HTML report (`report_section`: failure filmstrips, renders).

May import: the standard library and `harness` (errors, records).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from html import escape
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar

from harness.records import Metric
from harness.run_folder import RunFolder

GROUP = "harness.presenters"


@dataclass(frozen=True)
class MetricFamily:
    """Sibling metrics drawn side by side (e.g. a score per trigger type): `members` are
    (label, metric) in drawing order; `label` names what varies across them ("trigger type") and
    `axis` the family as one quantity ("proactivity_<type>_weighted_score")."""

    label: str
    axis: str
    members: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ReferenceRow:
    """A published result shown beside the user's runs: the model, the judge that scored it (the
    comparison is only direct under the same judge), the file its figures come from, and its
    metrics under the suite's own names (a CI only where the publication gives enough to compute
    one)."""

    model: str
    judge: str
    source: str
    metrics: Mapping[str, Metric]


REPORTS_FOLDER = "reports"
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def saved_reports_dir(run_dir: Path, suite: str) -> Path:
    """Where a suite's commands save what its report hook reads besides runs (a claim check's
    report, say): `RUN_DIR/reports/<suite>/`. The HTML report calls the hook of every suite it finds
    there or in the run index."""
    return run_dir / REPORTS_FOLDER / suite


@dataclass(frozen=True)
class ReportInput:
    """What a report hook is given: its family's suites that the report found, their complete runs
    (the ones the leaderboard ranked, oldest first) and the files saved under `saved_reports_dir`."""

    suites: tuple[str, ...]
    runs: dict[str, list[RunFolder]]
    saved: dict[str, list[Path]]
    run_dirs: tuple[Path, ...]


@dataclass(frozen=True)
class ReportSection:
    """One section of the offline HTML report. `html` is trusted markup: the hook escapes every text
    that came from a record, and a picture is inline (`src="data:image/png;base64,..."`); no
    scripts, nothing to fetch (the report refuses a section that links out)."""

    title: str
    html: str
    summary: str = ""  # one line of plain text for the report's overview (e.g. "3 of 14 reproduced")


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def picture_html(png_base64: object, caption: str) -> str:
    """A report picture: a base64 PNG (a transcript's `pictures[i].png`) as an inline <figure> with
    its caption escaped; anything that is not a base64 PNG becomes a note, never markup."""
    data = png_base64 if isinstance(png_base64, str) else ""
    try:
        ok = base64.b64decode(data[:24], validate=True).startswith(PNG_MAGIC)
    except (binascii.Error, ValueError):
        ok = False
    if not ok or not _BASE64.fullmatch(data):
        return f'<p class="note">(picture not shown: not a base64 PNG) {escape(caption)}</p>'
    return (f'<figure class="picture"><img alt="{escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


class Presenter:
    """The hooks a family may give. The base class is the generic presenter."""

    css: ClassVar[str] = ""  # extra style rules the family's views use (added to the viewer's page)
    # Breakdowns (`Suite.breakdowns` keys) the report draws as heatmaps: (key, caption).
    heatmaps: ClassVar[tuple[tuple[str, str], ...]] = ()
    # What `--published DIR` names for this family, said when the folder is missing or wrong.
    reference_hint: ClassVar[str] = ""
    # Suites whose presenters name one report family share one report section (the hook is then
    # called once with all of them); "" = each suite its own.
    report_family: ClassVar[str] = ""

    def sample_view(self, output: Mapping[str, Any], scores: Mapping[str, Any]) -> str | None:
        """A sample's transcript as HTML (the viewer's sample page); None: the generic view."""
        return None

    def sample_labels(self, scores: Mapping[str, Any]) -> str | None:
        """A short verdict summary for a run's sample list; None: the generic one (the scores)."""
        return None

    def metric_family(self, metric: str, names: Collection[str]) -> MetricFamily | None:
        """The siblings of `metric` among `names` to chart side by side; None: chart it alone."""
        return None

    def report_section(self, found: ReportInput) -> ReportSection | None:
        """The suite's own section of `harness leaderboard export --format html`, placed after its
        leaderboard (failure pictures, renders); None: the leaderboard alone."""
        return None

    def reference_rows(self, source: Path) -> list[ReferenceRow] | None:
        """The published results in `source` (a folder the user names), read at run time and never
        copied; None: this family has none to show. A missing or malformed source is a
        `HarnessError` naming the file."""
        return None


@lru_cache(maxsize=64)
def presenter_for(suite: str) -> Presenter:
    """The presenter registered for `suite` (by its name, else by its longest `prefix*`), or the
    generic one."""
    found = {ep.name: ep for ep in entry_points(group=GROUP)}
    prefixes = [n for n in found if n.endswith("*") and suite.startswith(n[:-1])]
    names = [suite] + sorted(prefixes, key=len, reverse=True)
    for name in names:
        if name in found:
            cls = found[name].load()
            if isinstance(cls, type) and issubclass(cls, Presenter):
                return cls()
    return Presenter()


# ---------------------------------------------------------------- HTML pieces for the views
def e(value: Any) -> str:
    """Any value as escaped text (None: empty)."""
    return escape("" if value is None else str(value))


def message_html(role: str, body_html: str, note: str = "") -> str:
    """One chat message; `body_html` is already escaped, `note` is trusted markup."""
    return f'<div class="msg {e(role)}"><div class="role">{e(role)}{note}</div>{body_html}</div>'


def label_html(label: Any) -> str:
    """A verdict label (PASS, PARTIAL, FAIL, ...) as a coloured badge."""
    return f'<span class="label {e(label)}">{e(label)}</span>'


def highlight(text: str, evidence: str | None) -> tuple[str, bool]:
    """The escaped text with a quote (a judge's evidence) marked; (html, found)."""
    text = text or ""
    if evidence:
        at = text.find(evidence)
        if at < 0:
            at = text.lower().find(evidence.lower())
        if at >= 0:
            end = at + len(evidence)
            return f"{escape(text[:at])}<mark>{escape(text[at:end])}</mark>{escape(text[end:])}", True
    return escape(text), False
