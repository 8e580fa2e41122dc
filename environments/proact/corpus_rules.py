"""Protocol rules for a ProactBench corpus row, beyond its schema: windows, trigger spacing,
planner consistency, anchor discipline, label bookkeeping and style length.

Errors break the protocol (a trigger on two consecutive turns, a planner flag that disagrees with
the trigger list, stored counts that do not match stored labels). Window and length deviations
are warnings: the official release itself has a few (e.g. a CRITICAL trigger on turn 3, a
RECOVERY on turn 7), so they are reported, and only `strict` makes them errors -- the project's
own corpus is held to strict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from corpora.proact_types import LABELS, TRIGGER_TYPES, TriggerType
from environments.proact.protocol import evidence_is_verbatim
from environments.proact.styles import word_range

WINDOWS: dict[TriggerType, tuple[int, int]] = {"EMERGENT": (1, 3), "CRITICAL": (4, 7), "RECOVERY": (8, 10)}
assert tuple(WINDOWS) == TRIGGER_TYPES
MIN_TRIGGERS, MAX_TRIGGERS = 3, 6


@dataclass
class Problem:
    severity: str  # error | warning
    field: str
    message: str


def _words(text: str) -> int:
    return len(re.findall(r"\S+", text))


def check_row(row: dict[str, Any], *, strict: bool = False) -> list[Problem]:
    """All rule violations of one schema-valid row."""
    soft = "error" if strict else "warning"
    problems: list[Problem] = []
    records = sorted(row["turn_records"], key=lambda t: t["turn"])
    turns = [t["turn"] for t in records]
    by_turn = {t["turn"]: t for t in records}
    if turns != list(range(1, len(turns) + 1)):
        problems.append(Problem("error", "turn_records", f"turns must run 1..N without gaps, found {turns}"))
    if row["num_turns_completed"] != len(turns):
        problems.append(Problem("error", "num_turns_completed",
                                f"is {row['num_turns_completed']} but turn_records has {len(turns)} turns"))

    triggers = sorted(row["trigger_points"], key=lambda tp: tp["turn"])
    trig_turns = [tp["turn"] for tp in triggers]
    if len(set(trig_turns)) != len(trig_turns):
        problems.append(Problem("error", "trigger_points", f"two triggers on one turn: {trig_turns}"))
    if not MIN_TRIGGERS <= len(triggers) <= MAX_TRIGGERS:
        # A warning unless strict: the release holds a dialogue with two triggers (its per-model
        # results list two for BP_PROFESSIONAL_01_EVQE style 24 even where no trigger was dropped).
        problems.append(Problem(soft, "trigger_points", f"has {len(triggers)} triggers; a dialogue has {MIN_TRIGGERS}-{MAX_TRIGGERS}"))
    for a, b in zip(trig_turns, trig_turns[1:]):
        if b - a == 1:
            problems.append(Problem("error", "trigger_points", f"back-to-back triggers on turns {a} and {b}"))
    for i, tp in enumerate(triggers):
        kind, turn = tp["evaluation_rubric"]["type"], tp["turn"]
        lo, hi = WINDOWS[kind]
        if not lo <= turn <= hi:
            problems.append(Problem(soft, f"trigger_points[{i}].turn", f"{kind} on turn {turn}, outside its window {lo}-{hi}"))
    last_critical = max((tp["turn"] for tp in triggers if tp["evaluation_rubric"]["type"] == "CRITICAL"), default=0)
    for tp in triggers:
        if tp["evaluation_rubric"]["type"] == "RECOVERY" and tp["turn"] < last_critical:
            problems.append(Problem("error", "trigger_points", f"RECOVERY on turn {tp['turn']} before a CRITICAL trigger"))

    # The curation Planner's record, where present, must agree with the trigger list.
    trig_set = set(trig_turns)
    for t in records:
        planner = t.get("planner")
        if not isinstance(planner, dict):
            continue
        flag = planner.get("is_trigger_point")
        if flag is not None and bool(flag) != (t["turn"] in trig_set):
            problems.append(Problem("error", f"turn_records[{t['turn'] - 1}].planner.is_trigger_point",
                                    f"is {flag} but turn {t['turn']} is {'a' if t['turn'] in trig_set else 'not a'} trigger"))
        revealed = planner.get("revealed_anchor_ids")
        if isinstance(revealed, list) and len(revealed) > 1:
            problems.append(Problem("error", f"turn_records[{t['turn'] - 1}].planner.revealed_anchor_ids",
                                    f"reveals {len(revealed)} anchors in one message; at most one"))

    # Stored labels and stored counts must agree; evidence should be quoted from the response.
    stats = row.get("trigger_stats")
    counted = {k: {lab: 0 for lab in LABELS} for k in WINDOWS}
    labelled = False
    for i, tp in enumerate(triggers):
        res = tp.get("evaluation_result")
        if not isinstance(res, dict):
            continue
        labelled = True
        kind = tp["evaluation_rubric"]["type"]
        status = res.get("status")
        label = res.get("score") if status == "EVALUATED" else ("ERROR" if status == "ERROR" else "SKIPPED")
        if label not in LABELS:
            problems.append(Problem("error", f"trigger_points[{i}].evaluation_result.score", f"{label!r} is not a label"))
            continue
        counted[kind][label] += 1
        evidence = res.get("evidence")
        if label != "SKIPPED" and isinstance(evidence, str) and tp["turn"] in by_turn:
            if not evidence_is_verbatim(evidence, by_turn[tp["turn"]]["assistant_response"]):
                problems.append(Problem(soft, f"trigger_points[{i}].evaluation_result.evidence",
                                        "is not a verbatim quote of the turn's response"))
    if labelled and isinstance(stats, dict):
        for kind, counts in counted.items():
            stored = {lab: stats.get(kind, {}).get(lab, 0) for lab in LABELS}
            if stored != counts:
                problems.append(Problem("error", f"trigger_stats.{kind}", f"stores {stored} but the labels count {counts}"))

    lo, hi = word_range(row["style_combination_index"])
    for t in records:
        n = _words(t["user_message"])
        if not lo <= n <= hi:
            problems.append(Problem(soft, f"turn_records[{t['turn'] - 1}].user_message",
                                    f"has {n} words; style {row['style_combination_index']} asks for {lo}-{hi}"))
    return problems
