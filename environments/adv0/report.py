"""ADV-0's section of the offline HTML report: each run's crashes, each with its filmstrip (the
transcript's `pictures`, highway-env's own frames) next to its numbers (family, seed, fault and
the rule that decided it, min TTC, speed, return, failure cluster).

Reads records only: the scores the `driving` scorer wrote and the transcript's episode.
May import: `harness` (and the standard library).
"""

from __future__ import annotations

from html import escape
from typing import Any

from harness.records import SampleRecord
from harness.run_folder import RunFolder
from harness.presenter import Presenter, ReportInput, ReportSection, picture_html

MAX_FAILURES_PER_RUN = 12  # the rest are in `harness view` (the report stays a few MB at most)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    return "-" if value is None else str(value)


def failure_numbers(record: SampleRecord) -> list[tuple[str, str]]:
    """The numbers shown beside one crash's filmstrip."""
    scores, episode = record.scores or {}, (record.output or {}).get("episode") or {}
    collision = episode.get("collision") or {}
    attack = episode.get("attack") or {}
    rows = [("episode", record.sample_id),
            ("attack", f"{attack.get('manoeuvre')} from slot {attack.get('slot')}" if attack else "none (normal traffic)"),
            ("at fault", _fmt(collision.get("fault"))), ("rule", _fmt(collision.get("rule"))),
            ("contact at", f"{_fmt(collision.get('t'))} s with {_fmt(collision.get('other'))}"),
            ("defender failure", _fmt(scores.get("defender_failure")))]
    rows += [(k.replace("_", " "), _fmt(scores.get(k))) for k in
             ("min_ttc", "mean_speed", "distance_m", "reward", "invalid_actions", "failure_cluster")]
    return rows


def _failure_html(record: SampleRecord) -> str:
    pictures = [p for p in (record.output or {}).get("pictures") or [] if isinstance(p, dict)]
    figures = "".join(picture_html(p.get("png"), str(p.get("caption", ""))) for p in pictures) \
        or '<p class="note">(no filmstrip recorded: run with --suite-option filmstrips=true)</p>'
    pairs = failure_numbers(record)
    rows = ["".join(f"<th>{escape(k)}</th><td>{escape(v)}</td>" for k, v in pairs[i:i + 3])
            for i in range(0, len(pairs), 3)]
    numbers = "".join(f"<tr>{r}</tr>" for r in rows)
    return (f'<div class="failure wide" data-sample="{escape(record.sample_id)}">{figures}'
            f'<table class="numbers compact">{numbers}</table></div>')


def _has_strip(record: SampleRecord) -> bool:
    return bool((record.output or {}).get("pictures"))


def _run_html(folder: RunFolder) -> tuple[str, list[SampleRecord], int]:
    """One run's crashes (at most MAX_FAILURES_PER_RUN shown); (html, crashes, episodes)."""
    manifest = folder.read_manifest()
    records = folder.read_samples()
    crashed = [r for r in records if (r.scores or {}).get("crashed")]
    # Defender failures first: they are what the attacker is for; attacker-at-fault crashes after.
    crashed.sort(key=lambda r: not (r.scores or {}).get("defender_failure"))
    options = ", ".join(f"{k}={v}" for k, v in sorted(manifest.config.suite_options.items()))
    head = (f"<h4>Run <code>{escape(folder.run_id)}</code>: {escape(manifest.config.models.get('assistant', '-'))}"
            f"{' (' + escape(options) + ')' if options else ''}</h4>"
            f'<p class="note">{len(crashed)} crash(es) in {len(records)} episodes'
            + (f"; the first {MAX_FAILURES_PER_RUN} shown, the rest in <code>harness view</code>"
               if len(crashed) > MAX_FAILURES_PER_RUN else "") + ".</p>")
    body = "".join(_failure_html(r) for r in crashed[:MAX_FAILURES_PER_RUN])
    return head + (f'<div class="pictures">{body}</div>' if body else ""), crashed, len(records)


def failures_section(found: ReportInput) -> ReportSection | None:
    runs = [folder for suite in found.suites for folder in found.runs.get(suite, [])]
    if not runs:
        return None
    parts: list[str] = []
    crashes: list[SampleRecord] = []
    episodes = 0
    for folder in runs:
        html, crashed, total = _run_html(folder)
        parts.append(html)
        crashes, episodes = crashes + crashed, episodes + total
    note = ('<p class="note">Each crash with its filmstrip (highway-env\'s top-down frames up to the contact, left '
            "to right; the ego is green, the attacker magenta) and its numbers: fault from geometry in lane coordinates, min TTC in s, "
            "speed in m/s, distance in m.</p>")
    return ReportSection(title="ADV-0: failures, with their filmstrips", html=note + "".join(parts),
                         summary=f"{len(crashes)} crashes in {episodes} episodes, "
                                 f"{sum(map(_has_strip, crashes))} with a filmstrip")


class Adv0Presenter(Presenter):
    """ADV-0's presenter (entry point `adv0` under `harness.presenters`): the report's failures section."""

    def report_section(self, found: ReportInput) -> ReportSection | None:
        return failures_section(found)
