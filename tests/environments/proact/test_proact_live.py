"""Suite `proact-live`: the three-agent loop through the real runner, on real HTTP model servers.

The loopback servers answer instantly and deterministically (`--echo`, or a fixed `--reply`), so
these tests check the protocol (schedule, anchor discipline, fallbacks, information asymmetry,
the row format); the slow test runs the embedded model as User Agent, Assistant and Judge.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

from environments.proact.dialogue_loop import (
    MAX_MISSES,
    WINDOWS,
    anchor_keys,
    done_acknowledged,
    make_schedule,
    mentions,
    PlannerFormatError,
    schedule_problems,
    trigger_layouts,
)
from corpora.proact_blueprints import DEFAULT_BLUEPRINTS, load_blueprints
from corpora.proactbench import validate_row
from environments.proact.corpus_rules import check_row
from environments.proact.live import LiveOptions, ProactLiveSuite, sample_order
from environments.proact.scoring import release_row
from environments.proact.live_prompts import parse_planner
from environments.proact.styles import domains, mnemonic, style_card
from harness.calls import CallPolicy, ManagedModel
from harness.errors import HarnessError
from harness.loopback import running_server
from harness.providers.openai_provider import OpenAIModel
from harness.records import RunConfig
from harness.run_folder import RunFolder
from harness.runner import execute, plan_run
from tests.conftest import OWN_PROACT

BLUEPRINTS = [
    {
        "blueprint_id": "BP_LIVETEST_TRAVEL_01", "scenario_id": "LIVETEST_TRAVEL_01", "category_key": "travel_persona",
        "persona": {"name": "Marisol Quenby", "background": "Marisol teaches geography at a secondary school in Leeds.",
                    "situation": "Marisol is planning her first solo trip abroad during the summer break."},
        "hidden_goal": "A Lisbon trip that protects her healing knee and keeps within her small budget.",
        "explicit_request": "Suggest a five-day itinerary for Lisbon.",
        "implicit_anchors": [
            {"id": "A1", "detail": "She had knee surgery in March and still avoids steep staircases.",
             "implies": "Lisbon's hills call for trams, lifts and taxis instead of walking routes."},
            {"id": "A2", "detail": "Her whole budget is 600 pounds including flights.",
             "implies": "Free museum days, cheap lodging and transit passes matter."},
            {"id": "A3", "detail": "She gets seasick on small boats.",
             "implies": "River cruises and ferry crossings should be avoided or replaced."},
            {"id": "A4", "detail": "Her cousin lives in Porto and invited her for dinner.",
             "implies": "A day trip north by train could fit the plan."},
        ],
        "ideal_trajectory": ["Itinerary with step-free routes", "Budget breakdown", "Day trip options", "Packing advice"],
        "done_signal": "She says the itinerary is final and thanks the assistant.",
    },
    {
        "blueprint_id": "BP_LIVETEST_CULINARY_01", "scenario_id": "LIVETEST_CULINARY_01", "category_key": "culinary_persona",
        "persona": {"name": "Theodric Vanwall", "background": "Theodric is a retired ferry engineer who took up baking.",
                    "situation": "Theodric is hosting his grandson's birthday party next weekend."},
        "hidden_goal": "A party menu that is safe for a guest with a nut allergy and easy to make in a tiny oven.",
        "explicit_request": "Give me a recipe for a chocolate birthday cake.",
        "implicit_anchors": [
            {"id": "A1", "detail": "One of the invited children carries an epinephrine pen for peanuts.",
             "implies": "Every dish must be nut-free, including cross-contamination."},
            {"id": "A2", "detail": "His flat only has a countertop convection oven.",
             "implies": "Bake in smaller tins or in batches at adjusted temperatures."},
            {"id": "A3", "detail": "Twenty-two guests are expected on Saturday afternoon.",
             "implies": "Quantities must scale and prep must start the day before."},
        ],
        "ideal_trajectory": ["Nut-free cake recipe", "Oven adjustments", "Scaled party menu"],
        "done_signal": "He says the menu is settled and he is ready to shop.",
    },
    {
        "blueprint_id": "BP_LIVETEST_SPORTS_01", "scenario_id": "LIVETEST_SPORTS_01", "category_key": "sports_persona",
        "persona": {"name": "Ingeborg Salvi", "background": "Ingeborg is an accountant who started running last year.",
                    "situation": "Ingeborg signed up for her first half marathon in October."},
        "hidden_goal": "A training plan that fits her asthma, her night shifts in tax season and a hilly course.",
        "explicit_request": "Write me a twelve-week half marathon training plan.",
        "implicit_anchors": [
            {"id": "A1", "detail": "Cold air makes her asthma flare during morning runs.",
             "implies": "Schedule runs later in the day, warm-ups and an inhaler plan."},
            {"id": "A2", "detail": "From week six she works late evenings until the quarterly deadline.",
             "implies": "The plan needs lighter, flexible weeks around the deadline."},
            {"id": "A3", "detail": "The race route climbs 300 metres over its second half.",
             "implies": "Hill repeats and strength work belong in the plan."},
        ],
        "ideal_trajectory": ["Base plan", "Asthma-aware scheduling", "Deadline weeks", "Hill work"],
        "done_signal": "She says the plan is complete and she will start on Monday.",
    },
]
ROLES = ("assistant", "planner", "user", "judge")

# One reply that parses both as a Planner answer and as a judge verdict, so a single server can
# play every role. It holds no closing words, so the user's "done" is the loop's doing.
PLANNER_REPLY = {
    "tactical_order": {"intent": "ORDERMARK carry on with the request",
                       "content_payload": ["PAYLOADMARK ask for the next concrete step"],
                       "behavioral_directive": "DIRECTIVEMARK keep it short"},
    "evaluation_rubric": {"pass_criteria": "RUBRICPASSMARK the assistant acts on the disclosed detail unprompted",
                          "partial_criteria": "RUBRICPARTIALMARK the assistant notices the detail only",
                          "fail_criteria": "RUBRICFAILMARK the assistant ignores the detail"},
}
COMBINED_REPLY = json.dumps(PLANNER_REPLY | {"score": "PARTIAL", "rationale": "noticed but did not act",
                                             "evidence": "ask for the next concrete step"})
JUDGE_REPLY = json.dumps({"score": "PASS", "rationale": "acted on it", "evidence": "echo"})


@pytest.fixture()
def blueprint_file(tmp_path: Path) -> Path:
    path = tmp_path / "blueprints.jsonl"
    path.write_text("".join(json.dumps(bp) + "\n" for bp in BLUEPRINTS), encoding="utf-8")
    return path


def run_suite(suite: ProactLiveSuite, corpus: Path, url: str, run_dir: Path, limit: int = 3, **config: Any):
    """The real runner end to end: plan, execute, read the records back."""
    run = RunConfig(suite=suite.name, models={r: f"openai/{r}-model" for r in ROLES}, base_url=url,
                    corpus=str(corpus), limit=limit, max_connections=4, **config)
    plan = plan_run(run, run_dir, suite=suite)
    summary = asyncio.run(execute(plan, show_progress=False))
    return sorted(RunFolder(run_dir, plan.folder.run_id).read_samples(), key=lambda r: r.sample_id), summary


def assert_official_row(row: dict[str, JsonValue]) -> None:
    validate_row(row, "live row")
    errors = [p for p in check_row(row, strict=False) if p.severity == "error"]
    assert not errors, errors
    assert row["unique_id_eval"] == f"{row['blueprint_id']}__style{row['style_combination_index']}__{row['uuid']}"
    for tp in row["trigger_points"]:
        assert set(tp) == {"turn", "evaluation_rubric", "evaluation_result"}


def assert_protocol(row: dict[str, JsonValue]) -> None:
    """Windows, spacing, RECOVERY after the done acknowledgement, one anchor per message, and
    the force-reveal rule -- checked on what actually happened in the dialogue."""
    turns = sorted(tp["turn"] for tp in row["trigger_points"])
    assert 3 <= len(turns) <= 6 and row["num_turns_completed"] <= 10
    assert all(b - a >= 2 for a, b in zip(turns, turns[1:]))
    done = row["protocol"]["done_turn"]
    assert done is not None
    assert done_acknowledged(row["turn_records"][done - 1]["user_message"], "")
    for tp in row["trigger_points"]:
        kind, turn = tp["evaluation_rubric"]["type"], tp["turn"]
        assert WINDOWS[kind][0] <= turn <= WINDOWS[kind][1]
        assert kind != "RECOVERY" or turn > done
    misses: dict[str, int] = {}
    for rec in row["turn_records"]:
        order, revealed = rec["planner"]["anchor_order"], rec["planner"]["revealed_anchor_ids"]
        assert len(revealed) <= 1
        if order is None:
            assert not revealed
            continue
        if misses.get(order["id"], 0) >= MAX_MISSES:
            assert order["forced"], f"turn {rec['turn']}: {order['id']} missed {MAX_MISSES} times but not forced"
        if order["forced"]:
            assert revealed == [order["id"]], f"turn {rec['turn']}: a forced reveal must land"
        misses[order["id"]] = 0 if revealed else misses.get(order["id"], 0) + 1


def call_roles(record) -> str:
    return " ".join(c.role for c in record.calls)


# ------------------------------------------------------------------ loader
def test_blueprints_load_from_a_file_or_a_folder_of_parts(tmp_path, blueprint_file):
    rows, ident = load_blueprints(blueprint_file)
    assert [r["blueprint_id"] for r in rows] == [b["blueprint_id"] for b in BLUEPRINTS] and ident["sha256"]
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "a.blueprints.jsonl").write_text(json.dumps(BLUEPRINTS[0]) + "\n")
    (parts / "b.blueprints.jsonl").write_text("\n" + json.dumps(BLUEPRINTS[1]) + "\n")
    rows, ident = load_blueprints(parts)
    assert len(rows) == 2 and len(ident["files"]) == 2


def test_bad_blueprints_name_file_line_and_field(tmp_path):
    bad = json.loads(json.dumps(BLUEPRINTS[1]))
    del bad["implicit_anchors"][1]["implies"]
    path = tmp_path / "bp.jsonl"
    path.write_text(json.dumps(BLUEPRINTS[0]) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(HarnessError, match=rf"{re.escape(str(path))}:2: field `implicit_anchors\[1\].implies` is missing"):
        load_blueprints(path)
    bad = json.loads(json.dumps(BLUEPRINTS[0]))
    bad["implicit_anchors"] = bad["implicit_anchors"][:2]
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(HarnessError, match=r":1: field `implicit_anchors` is invalid"):
        load_blueprints(path)
    path.write_text(json.dumps(BLUEPRINTS[0]) + "\n" + json.dumps(BLUEPRINTS[0]) + "\n")
    with pytest.raises(HarnessError, match=r":2: field `blueprint_id` 'BP_LIVETEST_TRAVEL_01' repeats"):
        load_blueprints(path)
    path.write_text("{not json\n")
    with pytest.raises(HarnessError, match=r":1: not valid JSON") as info:
        load_blueprints(path)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------ schedule and heuristics
def test_schedule_never_breaks_the_rules_over_many_blueprints():
    seen_layouts, seen_done = set(), set()
    for i in range(3000):
        ids = [f"A{k}" for k in range(1, 3 + i % 3 + 1)]
        s = make_schedule(f"BP_SEED_{i}", ids)
        assert schedule_problems(s) == [], (i, s)
        assert make_schedule(f"BP_SEED_{i}", ids) == s  # deterministic
        first_critical = min(t for t, k in s.triggers.items() if k == "CRITICAL")
        assert sorted(s.anchor_due.values())[1] <= first_critical
        seen_layouts.add((tuple(sorted(s.triggers.items())), s.done_turn))
        seen_done.add(s.done_turn)
    assert seen_done == {7, 8}
    assert len(seen_layouts) == len(trigger_layouts())  # every legal layout is used
    assert {len(layout) for layout, _ in seen_layouts} >= {3, 4, 5}


def test_anchor_heuristic_and_planner_parsing():
    bp = BLUEPRINTS[0]
    keys = anchor_keys(bp["implicit_anchors"], bp["explicit_request"])
    assert mentions("Oh, and my knee is still sore since the surgery, so I skip steep stairs.", keys["A1"])
    assert not mentions("Could you make day two a bit more relaxed?", keys["A1"])
    assert mentions("I've only got 600 pounds for everything, flights included.", keys["A2"])
    assert not mentions("Suggest a five-day itinerary for Lisbon.", keys["A2"])  # request words never count
    assert done_acknowledged("Perfect, that's everything, the itinerary is final.", bp["done_signal"])
    assert not done_acknowledged("Can you add a day in Sintra?", bp["done_signal"])
    parsed = parse_planner("Sure!\n```json\n" + COMBINED_REPLY + "\n```", trigger=True)
    assert parsed["evaluation_rubric"]["pass_criteria"].startswith("RUBRICPASSMARK")
    with pytest.raises(PlannerFormatError, match="evaluation_rubric"):
        parse_planner(json.dumps({"tactical_order": PLANNER_REPLY["tactical_order"]}), trigger=True)
    with pytest.raises(PlannerFormatError):
        parse_planner("not json", trigger=False)


def test_anchor_heuristic_agrees_with_the_curated_dialogues():
    """The shipped dialogues label which anchor each user message reveals; the heuristic must
    find most of those and almost never claim one that is not there."""
    if not DEFAULT_BLUEPRINTS.exists():
        pytest.skip("corpora/proact/blueprints.jsonl not written yet")
    bps = {bp["scenario_id"]: bp for bp in load_blueprints(DEFAULT_BLUEPRINTS)[0]}
    found = false = missed = 0
    for line in OWN_PROACT.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        bp = bps.get(row["scenario_id"])
        if bp is None:
            continue
        keys, seen = anchor_keys(bp["implicit_anchors"], bp["explicit_request"]), set()
        for t in row["turn_records"]:
            truth = set(t["planner"].get("revealed_anchor_ids") or [])
            got = {a for a in keys if a not in seen and mentions(t["user_message"], keys[a])}
            seen |= truth
            found, false, missed = found + len(truth & got), false + len(got - truth), missed + len(truth - got)
    if found + missed < 50:
        pytest.skip("too few curated dialogues with blueprints")
    assert false <= 0.02 * (found + false), (found, false, missed)
    assert found >= 0.8 * (found + missed), (found, false, missed)


def test_every_shipped_blueprint_runs_the_loop(tmp_path):
    if not DEFAULT_BLUEPRINTS.exists():
        pytest.skip("corpora/proact/blueprints.jsonl not written yet")
    n = len(load_blueprints(DEFAULT_BLUEPRINTS)[0])
    with running_server("--echo", "--reply", COMBINED_REPLY) as url:
        records, summary = run_suite(ProactLiveSuite(), DEFAULT_BLUEPRINTS, url, tmp_path / "runs", limit=n)
    assert len(records) == n and summary.counts["sample_errors"] == 0
    for rec in records:
        assert_official_row(release_row(rec))
        assert_protocol(rec.output)
    assert summary.counts["planner_fallbacks"] == 0  # the Planner's orders never trip the leak check


def test_sample_order_spreads_blueprints_and_styles_early():
    many = [dict(BLUEPRINTS[i % 3], blueprint_id=f"BP_X_{i}", category_key=BLUEPRINTS[i % 3]["category_key"]) for i in range(9)]
    order = sample_order(many)
    assert len(order) == 9 * 24 and len({(bp["blueprint_id"], s) for bp, s in order}) == 9 * 24
    first = order[:9]
    assert len({bp["blueprint_id"] for bp, _ in first}) == 9 and len({s for _, s in first}) == 9
    assert [bp["category_key"] for bp, _ in order[:3]] == ["travel_persona", "culinary_persona", "sports_persona"]


# ------------------------------------------------------------------ the loop through the runner
def test_full_dialogues_make_official_rows_and_keep_the_protocol(blueprint_file, tmp_path):
    """One server plays every role (its reply parses as a Planner answer and as a verdict)."""
    with running_server("--echo", "--reply", COMBINED_REPLY) as url:
        records, summary = run_suite(ProactLiveSuite(), blueprint_file, url, tmp_path / "runs", limit=3)
    assert len(records) == 3 and all(r.status == "ok" for r in records), [r.errors for r in records]
    # `--limit 3`: three different blueprints and three different styles.
    assert len({r.output["scenario_id"] for r in records}) == 3
    assert len({r.output["style_combination_index"] for r in records}) == 3
    for rec in records:
        row = release_row(rec)
        assert_official_row(row)
        assert_protocol(row)
        style = row["style_combination_index"]
        assert rec.sample_id == f"{row['blueprint_id']}__style{style}" and row["blueprint_id"].endswith("_" + mnemonic(style))
        assert row["evaluated_model"] == "openai/assistant-model"
        # The Planner's own rubric text is what the judge used: no fallback, no silent rewrite.
        assert not any(t["planner"]["planner_fallback"] for t in row["turn_records"])
        for tp in row["trigger_points"]:
            assert tp["evaluation_rubric"]["pass_criteria"] == PLANNER_REPLY["evaluation_rubric"]["pass_criteria"]
            assert tp["evaluation_result"]["status"] == "EVALUATED" and tp["evaluation_result"]["score"] == "PARTIAL"
            assert row["turn_records"][tp["turn"] - 1]["planner"]["evaluation_rubric"] == tp["evaluation_rubric"]
        # Every turn: the Planner (rubric committed) before the user, the user before the
        # assistant, the judge only after the assistant and only on trigger turns.
        pattern = r"((planner )+(user )+assistant( judge)*( |$))+"
        assert re.fullmatch(pattern, call_roles(rec)), call_roles(rec)
        assert call_roles(rec).count("assistant") == row["num_turns_completed"]
        assert rec.scores["triggers"] == [{"turn": tp["turn"], "type": tp["evaluation_rubric"]["type"], "label": "PARTIAL"}
                                          for tp in row["trigger_points"]]
        assert set(row["token_usage"]) == {"planner", "user_agent", "assistant", "judge"}
        assert row["token_usage"]["assistant"]["calls"] == row["num_turns_completed"]
    assert summary.counts["triggers_partial"] == sum(len(r.output["trigger_points"]) for r in records)
    assert summary.metrics["proactivity_overall_weighted_score"].value == pytest.approx(0.5)
    assert summary.official["metrics"]["eval/proactivity_total_dialogues"] == 3


@pytest.mark.parametrize("reply", ["{oops, this is not json", ""])
def test_planner_and_user_fallbacks_are_recorded_and_counted(blueprint_file, tmp_path, reply):
    with running_server("--echo", "--reply", reply) as url:
        records, summary = run_suite(ProactLiveSuite(), blueprint_file, url, tmp_path / "runs", limit=3)
    assert len(records) == 3
    for rec in records:
        row, turns = release_row(rec), rec.output["turn_records"]
        assert_official_row(row)
        assert_protocol(row)
        # Bounded retries: exactly three Planner calls per turn, then the template.
        assert rec.usage["planner"].calls == 3 * len(turns)
        assert all(t["planner"]["planner_fallback"] and t["planner"]["planner_attempts"] == 3 for t in turns)
        assert all(len(t["planner"]["planner_problems"]) == 3 for t in turns)
        assert row["fallbacks"]["planner"] == rec.scores["planner_fallbacks"] == len(turns)
        user_fallbacks = [t for t in turns if t["user_agent"]["fallback"]]
        assert row["fallbacks"]["user"] == rec.scores["user_fallbacks"] == len(user_fallbacks) > 0
        if reply == "":  # an empty message is never accepted: every turn retried, then the template
            assert len(user_fallbacks) == len(turns)
            assert all("empty" in t["user_agent"]["problems"][0] for t in turns)
        assert all(t["user_message"].strip() for t in turns)
        # The template rubric is complete and typed by the schedule; the unparseable verdicts
        # are SKIPPED, counted, never dropped.
        for tp in row["trigger_points"]:
            assert all(tp["evaluation_rubric"][k] for k in ("pass_criteria", "partial_criteria", "fail_criteria"))
            assert tp["evaluation_result"]["status"] == "SKIPPED"
    assert summary.counts["planner_fallbacks"] == sum(len(r.output["turn_records"]) for r in records)
    assert summary.counts["user_fallbacks"] == sum(r.scores["user_fallbacks"] for r in records) > 0
    assert summary.counts["triggers_skipped"] == sum(len(r.output["trigger_points"]) for r in records)


class RecordingModel:
    """Passes calls through to a real model and keeps every prompt it was sent."""

    def __init__(self, inner: ManagedModel, role: str, sample_id: str, log: list):
        self.inner, self.role, self.sample_id, self.log, self.name = inner, role, sample_id, log, inner.name

    async def generate(self, messages, config):
        self.log.append((self.sample_id, self.role, json.loads(json.dumps(messages))))
        return await self.inner.generate(messages, config)


class RoutedSuite(ProactLiveSuite):
    """The live suite with each role on its own loopback server (the run config has one
    --base-url for all roles) and every prompt recorded."""

    def __init__(self, urls: dict[str, str], options: LiveOptions | None = None):
        super().__init__(options)
        self.urls, self.prompts, self.routed = urls, [], {}

    async def solve(self, sample, ctx):
        # The context (and so the routed models) carries over from the solve step to the judge's.
        routed = {role: ManagedModel(OpenAIModel(f"{role}-model", url), max_connections=4,
                                     policy=CallPolicy(timeout_s=30, max_retries=0)) for role, url in self.urls.items()}
        self.routed[sample.id] = routed
        ctx.models = {role: RecordingModel(routed.get(role, model), role, sample.id, self.prompts)
                      for role, model in ctx.models.items()}
        return await super().solve(sample, ctx)

    async def _judge(self, sample, transcript, ctx):
        try:
            return await super()._judge(sample, transcript, ctx)
        finally:
            for model in self.routed.pop(sample.id, {}).values():
                await model.aclose()


def _text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


@pytest.mark.parametrize("planner_kind", ["model", "template"])
def test_information_asymmetry_in_the_prompts_each_role_received(blueprint_file, tmp_path, planner_kind):
    with running_server("--echo") as echo, running_server("--echo", "--reply", json.dumps(PLANNER_REPLY)) as planner, \
            running_server("--echo", "--reply", JUDGE_REPLY) as judge:
        suite = RoutedSuite({"planner": planner if planner_kind == "model" else echo, "judge": judge})
        records, _ = run_suite(suite, blueprint_file, echo, tmp_path / "runs", limit=3)
    assert all(r.status == "ok" for r in records)
    bps = {bp["blueprint_id"]: bp for bp in BLUEPRINTS}
    for rec in records:
        row = rec.output
        bp, style = bps[row["blueprint_id"].rsplit("_", 1)[0]], row["style_combination_index"]
        prompts = {role: [_text(m) for sid, r, m in suite.prompts if sid == rec.sample_id and r == role] for role in ROLES}
        assert all(prompts[role] for role in ROLES)
        rubric_texts = {tp["evaluation_rubric"][k] for tp in row["trigger_points"]
                        for k in ("pass_criteria", "partial_criteria", "fail_criteria")}
        if planner_kind == "model":
            assert rubric_texts == set(PLANNER_REPLY["evaluation_rubric"].values())
        persona = list(bp["persona"].values())
        card_lines = [line for line in style_card(style).splitlines() if len(line) > 15]
        style_words = [d for d in domains(style)] + ([mnemonic(style)] if len(mnemonic(style)) > 1 else [])
        hidden = [bp["hidden_goal"]] + [a["implies"] for a in bp["implicit_anchors"]]
        for text in prompts["user"] + prompts["assistant"]:
            assert not any(r in text for r in rubric_texts) and "RUBRIC" not in text
            assert not any(h in text for h in hidden)
        for text in prompts["planner"] + prompts["judge"]:
            assert not any(line in text for line in card_lines)
            assert not any(re.search(rf"\b{re.escape(w)}\b", text) for w in style_words)
            assert "Communication style" not in text and not any(n in text for n in persona)
        # Positive controls: the recording sees what each role should get.
        assert all(any(r in text for text in prompts["judge"]) for r in rubric_texts)
        assert all(style_card(style) in text and all(n in text for n in persona) for text in prompts["user"])
        assert any(bp["hidden_goal"] in text for text in prompts["planner"])
        if planner_kind == "model":
            assert any("PAYLOADMARK" in text for text in prompts["user"])
        assistant_calls = [m for sid, r, m in suite.prompts if sid == rec.sample_id and r == "assistant"]
        for messages in assistant_calls:
            assert [m["role"] for m in messages] == ["user", "assistant"] * (len(messages) // 2) + ["user"]


def test_an_assistant_that_fails_ends_the_dialogue_and_every_trigger_counts_as_error(blueprint_file, tmp_path):
    with running_server("--echo", "--reply", COMBINED_REPLY) as good, running_server("--echo", "--faults", "500") as bad:
        suite = RoutedSuite({"assistant": bad})
        records, summary = run_suite(suite, blueprint_file, good, tmp_path / "runs", limit=1, max_retries=0)
    [rec] = records
    assert rec.status == "error" and rec.output["num_turns_completed"] == 1
    assert [t["label"] for t in rec.scores["triggers"]] == ["ERROR"] * len(rec.scores["expected_types"])
    assert summary.counts["triggers_error"] == len(rec.scores["expected_types"])
    assert any("assistant" in e.message for e in rec.errors)


@pytest.mark.slow
def test_embedded_model_as_user_assistant_and_judge_end_to_end(tmp_path, monkeypatch):
    """SmolLM2-135M as User Agent, Assistant and Judge, a scripted Planner: whatever a tiny model
    writes, the loop must end with a row that keeps the protocol, with each fallback recorded.

    The Planner is a loopback server: in the 24 tokens this test could afford, the 135M Planner
    never wrote its JSON (every turn fell back to the template, a certainty, not a finding), yet its
    long prompts were half of the test's CPU time. The scripted Planner's orders and rubrics now
    reach the real User Agent and Judge; an unparseable Planner is
    `test_planner_and_user_fallbacks_are_recorded_and_counted`."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # faster on this 2-core machine when it is shared
    corpus = tmp_path / "one.jsonl"
    corpus.write_text(json.dumps(BLUEPRINTS[1]) + "\n")  # the shortest schedule of the three: 8 turns
    # Short replies: CPU time here is prefill and decode of the embedded roles' calls.
    suite = ProactLiveSuite(LiveOptions(user_max_tokens=16, user_attempts=1))
    embedded = ("assistant", "user", "judge")
    with running_server("--echo", "--reply", json.dumps(PLANNER_REPLY)) as planner:
        run = RunConfig(suite=suite.name, models={"planner": "openai/planner-model"} | {r: "local/smollm2-135m" for r in embedded},
                        base_url=planner, corpus=str(corpus), limit=1, max_tokens=16, judge_max_tokens=16)
        plan = plan_run(run, tmp_path / "runs", suite=suite)
        summary = asyncio.run(execute(plan, show_progress=False))
    [rec] = RunFolder(tmp_path / "runs", plan.folder.run_id).read_samples()
    row = release_row(rec)
    assert rec.status == "ok", rec.errors
    assert_official_row(row)
    assert_protocol(row)
    assert row["evaluated_model"] == "local/smollm2-135m" and row["num_turns_completed"] == 8
    assert {c.role for c in rec.calls} == set(ROLES)
    assert {c.model for c in rec.calls if c.role in embedded} == {"local/smollm2-135m"}
    assert rec.usage["assistant"].calls == 8 and rec.usage["user"].calls == 8 and rec.usage["judge"].calls >= 3
    assert rec.usage["assistant"].completion_tokens <= 16 * rec.usage["assistant"].calls
    assert rec.usage["user"].completion_tokens <= 16 * rec.usage["user"].calls
    turns = row["turn_records"]
    # The scripted Planner always parses: no Planner fallback, and its rubric is what the judge read.
    assert rec.scores["planner_fallbacks"] == summary.counts["planner_fallbacks"] == 0
    assert rec.scores["user_fallbacks"] == sum(t["user_agent"]["fallback"] for t in turns)
    assert summary.counts["user_fallbacks"] == rec.scores["user_fallbacks"]
    assert len(rec.scores["triggers"]) == len(row["trigger_points"]) == 3
    for tp in row["trigger_points"]:
        assert tp["evaluation_rubric"]["pass_criteria"] == PLANNER_REPLY["evaluation_rubric"]["pass_criteria"]
        assert tp["evaluation_result"]["status"] in ("EVALUATED", "SKIPPED")  # a 135M verdict may not parse; never ERROR
