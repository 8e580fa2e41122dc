"""How ProactBench runs are shown (`harness.presenter.Presenter`, entry point `proact*` under
`harness.presenters`): a sample as the dialogue with the regenerated reply at each trigger, its
rubric and the judge's verdict with the evidence marked in the reply; the sample list's trigger
labels; the score per trigger type charted side by side; the release's sixteen scored models as
reference rows (`published.py`). Every text from a record is escaped.

May import: `harness`, `corpora` (the trigger types).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, ClassVar

from corpora.proact_types import TRIGGER_TYPES
from harness.presenter import MetricFamily, Presenter, ReferenceRow, e, highlight, label_html, message_html

# The per-type metrics are proactivity_<type>_<stat> (the type in lower case), "overall" beside them.
CHARTED_TYPES = (*(t.lower() for t in TRIGGER_TYPES), "overall")
_PER_TYPE = re.compile(r"^(?P<pre>.*)_(?:" + "|".join(CHARTED_TYPES) + r")_(?P<post>.*)$")


class ProactPresenter(Presenter):
    heatmaps: ClassVar[tuple[tuple[str, str], ...]] = (("style", "conversation style (n: dialogues)"),)
    reference_hint: ClassVar[str] = "the release's dataset/eval/ folder (*_proactivity_bench_metrics.json)"
    css: ClassVar[str] = (".trigger { border-left: 4px solid #888; padding: .25rem .75rem; margin: .5rem 0 1.25rem; "
                          "background: #fcfcfc; }")

    def sample_view(self, output: Mapping[str, Any], scores: Mapping[str, Any]) -> str | None:
        if not output.get("turn_records"):
            return None
        return dialogue_html(output, scores)

    def sample_labels(self, scores: Mapping[str, Any]) -> str | None:
        triggers = scores.get("triggers")
        if not isinstance(triggers, list) or not triggers:
            return None
        return " ".join(f'<span class="label {e(t.get("label"))}">{e(t.get("type", ""))[:1]}:{e(t.get("label"))}'
                        "</span>" for t in triggers if isinstance(t, dict))

    def metric_family(self, metric: str, names: Collection[str]) -> MetricFamily | None:
        match = _PER_TYPE.match(metric)
        if not match:
            return None
        members = tuple((t, n) for t in CHARTED_TYPES if (n := f"{match['pre']}_{t}_{match['post']}") in names)
        return MetricFamily(label="trigger type", axis=f"{match['pre']}_<type>_{match['post']}", members=members)

    def reference_rows(self, source: Path) -> list[ReferenceRow] | None:
        from environments.proact.published import published_rows

        return published_rows(source)


def rubric_html(rubric: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><th>{e(k.replace('_criteria', ''))}</th><td>{e(v)}</td></tr>"
                   for k, v in rubric.items() if k != "type")
    return f'<table class="rubric">{rows}</table>'


def verdict_html(result: Mapping[str, Any]) -> str:
    label = result.get("score") or result.get("status") or "?"
    parts = [f'<p>judge: {label_html(label)} <span class="muted">'
             f"({e(result.get('status'))}, {e(result.get('model'))})</span></p>"]
    if result.get("rationale"):
        parts.append(f'<p class="rationale"><b>rationale:</b> {e(result["rationale"])}</p>')
    if result.get("evidence"):
        parts.append(f'<p class="evidence"><b>evidence:</b> &ldquo;{e(result["evidence"])}&rdquo;</p>')
    if result.get("error"):
        parts.append(f'<p class="errors">{e(result["error"])}</p>')
    for judge in result.get("judges") or []:
        if isinstance(judge, dict):
            parts.append(f'<p class="muted">{e(judge.get("model"))}: {e(judge.get("score") or judge.get("status"))}'
                         f" &mdash; {e(judge.get('rationale'))}</p>")
    if result.get("votes"):
        parts.append(f'<p class="muted">votes: {e(json.dumps(result["votes"]))}</p>')
    return "".join(parts)


def dialogue_html(output: Mapping[str, Any], scores: Mapping[str, Any]) -> str:
    """ProactBench-format rows: turns with the regenerated reply at each trigger, its rubric and
    verdict (the scorer's `verdicts`; records of format 1 kept them in the output)."""
    triggers = {tp.get("turn"): dict(tp) for tp in output.get("trigger_points") or [] if isinstance(tp, dict)}
    for v in scores.get("verdicts") or []:
        if isinstance(v, dict):
            triggers.setdefault(v.get("turn"), {"evaluation_rubric": {"type": v.get("type")}})["evaluation_result"] = \
                v.get("evaluation_result")
    parts = []
    for tr in output.get("turn_records") or []:
        tp = triggers.get(tr.get("turn"))
        parts.append(message_html("user", e(tr.get("user_message")), f" &middot; turn {e(tr.get('turn'))}"))
        result = (tp or {}).get("evaluation_result") or {}
        reply, found = highlight(tr.get("assistant_response") or "", result.get("evidence"))
        note = " &middot; model under test" if tp else ""
        if tp and result.get("evidence") and not found:
            note += ' &middot; <span class="muted">evidence not found in this reply</span>'
        parts.append(message_html("assistant", reply, note))
        original = tr.get("original_assistant_response")
        if original and original != tr.get("assistant_response"):
            parts.append(f"<details><summary>curated reply (reference)</summary>{message_html('assistant', e(original))}"
                         "</details>")
        if tp:
            rubric = tp.get("evaluation_rubric") or {}
            parts.append(f'<div class="trigger"><p><b>trigger:</b> {e(rubric.get("type"))}</p>{rubric_html(rubric)}'
                         f"{verdict_html(result)}</div>")
    return "".join(parts)
