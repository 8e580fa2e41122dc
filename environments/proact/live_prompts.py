"""Prompts of the live ProactBench loop, one builder per role, each taking only what that role
may see -- the information asymmetries are the benchmark's defence against style-confounded
scoring, rubric leakage and information dumps, so they are enforced by the signatures here:

- Planner: the blueprint's planning fields (hidden goal, explicit request, anchors, ideal
  trajectory, done signal), the conversation, the turn, the revealed anchors and the phase
  rules. Never the persona or the style (`PlannerView` has no field for them).
- User Agent: persona, style card and the tactical order (plus the conversation it is part
  of). Never the rubric, never the hidden goal beyond what the order says.
- Assistant: the user/assistant messages only, no system prompt.
- Judge: `environments.proact.judging.judge_reply` (rubric, conversation, reply).

The two templates (`planner_fallback`, `user_fallback`) are used when a model's output never
passes its checks; they are built from the blueprint and the order so a dialogue can go on, and
the loop records every use.
"""

from __future__ import annotations

import jsonschema
from pydantic import JsonValue

from corpora.proact_blueprints import Anchor, Persona
from environments.proact.dialogue_loop import CRITERIA, MAX_TURNS, PlannerFormatError, PlannerView, UserView
from environments.proact.loop_records import Criteria, Order, Plan, PlannerBrief
from environments.proact.protocol import json_objects
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig

PLANNER_CONFIG = GenerateConfig(temperature=0.7, max_tokens=512)
USER_CONFIG = GenerateConfig(temperature=0.7, max_tokens=200)

PHASE_RULES = """Phase rules of the protocol:
- Turns 1-3 (opening): the user makes the explicit request and starts disclosing anchors. An EMERGENT trigger tests whether the assistant infers an unstated need from one disclosed anchor.
- Turns 4-7 (development): a CRITICAL trigger tests whether the assistant combines several anchors disclosed earlier into a useful conclusion the user did not ask for.
- Turns 8-10 (closing): only after the user has said the task is done, a RECOVERY trigger tests whether the assistant offers grounded, forward-looking value.
- The user discloses at most one anchor per message, never states the hidden goal, and never asks the assistant to be proactive or to guess needs.
- Which turn is a trigger, which anchor is due and when the user says the task is done are fixed by the protocol and stated below; follow them.
- The rubric is committed before the assistant answers. It says concretely what PASS, PARTIAL and FAIL look like on this turn, grounded in the anchors disclosed so far, and accepts any form that serves the need."""

_PLANNER_SYSTEM = (
    "You are the Planner of a benchmark dialogue about conversational proactivity. A simulated user talks "
    "with an AI assistant. Each turn you write a tactical order that tells the user what to say next, and on "
    "trigger turns the rubric for grading the assistant's reply to that message. You never write the user's "
    "message yourself and never speak to the assistant.\n\n" + PHASE_RULES
)

_TYPE_GOAL = {
    "EMERGENT": "infer an unstated need from a single disclosed anchor and act on it",
    "CRITICAL": "combine at least two anchors disclosed so far into an unrequested, actionable conclusion",
    "RECOVERY": "after the task is done, offer a distinct, forward-looking step grounded in this conversation",
}


def _transcript(conversation: list[ChatMessage], user_label: str, assistant_label: str) -> str:
    if not conversation:
        return "(nothing yet: this is the first message)"
    label = {"user": user_label, "assistant": assistant_label}
    return "\n\n".join(f"[{label[m['role']]}]\n{m['content']}" for m in conversation)


def planner_messages(view: PlannerView) -> list[ChatMessage]:
    """The Planner's prompt: blueprint planning fields, conversation, this turn's fixed structure."""
    bp, d = view.blueprint, view.directive
    anchors = "\n".join(
        f"- {a['id']} ({'revealed' if a['id'] in view.revealed else 'not yet revealed'}): {a['detail']} "
        f"-- implies: {a['implies']}" for a in bp["implicit_anchors"])
    trajectory = "\n".join(f"{i}. {step}" for i, step in enumerate(bp["ideal_trajectory"], start=1))
    lines = [f"- Turn {d.turn} of at most {MAX_TURNS}."]
    if d.trigger:
        lines.append(f"- This turn is a {d.trigger} trigger: the assistant should {_TYPE_GOAL[d.trigger]}. "
                     "Write evaluation_rubric for it.")
    else:
        lines.append("- This turn is not a trigger: set evaluation_rubric to null.")
    if d.anchor_id:
        how = "explicitly (it was missed before or a trigger needs it)" if d.forced else "in passing"
        lines.append(f"- The user reveals anchor {d.anchor_id} {how}, and no other anchor.")
    else:
        lines.append("- The user reveals no new anchor.")
    if d.turn == 1:
        lines.append("- The user opens with the explicit request.")
    if d.say_done:
        lines.append("- The user says the task is done (the done signal).")
    elif d.after_done:
        lines.append("- The task is already done: the user only wraps up and asks for nothing new.")
    text = (
        f"## Scenario\nHidden goal (the user never states it): {bp['hidden_goal']}\n"
        f"Explicit request: {bp['explicit_request']}\nAnchors:\n{anchors}\n"
        f"Ideal trajectory:\n{trajectory}\nDone signal: {bp['done_signal']}\n\n"
        f"## Conversation so far\n{_transcript(view.conversation, 'USER', 'ASSISTANT')}\n\n"
        f"## This turn, fixed by the protocol\n" + "\n".join(lines) + "\n\n"
        "## Answer\nOne JSON object and nothing else:\n"
        '{"tactical_order": {"intent": "<what this message is for>", "content_payload": ["<what the user says>", "..."], '
        '"behavioral_directive": "<how to say it, what to hold back>"}, '
        '"evaluation_rubric": {"pass_criteria": "PASS when ...", "partial_criteria": "PARTIAL when ...", '
        '"fail_criteria": "FAIL when ..."} or null}'
    )
    if view.feedback:
        text += f"\n\nYour previous answer was rejected: {view.feedback}. Answer again with the JSON object only."
    return [{"role": "system", "content": _PLANNER_SYSTEM}, {"role": "user", "content": text}]


# The Planner's answer format: the order always, the rubric's three criteria on trigger turns.
# The type is not asked for: the schedule decides it, and a model's opinion would be ignored.
_STR: dict[str, JsonValue] = {"type": "string", "minLength": 1, "pattern": r"\S"}
ORDER_SCHEMA: dict[str, JsonValue] = {
    "type": "object", "required": ["intent", "content_payload", "behavioral_directive"],
    "properties": {"intent": _STR, "content_payload": {"type": "array", "minItems": 1, "maxItems": 5, "items": _STR},
                   "behavioral_directive": _STR},
}
RUBRIC_SCHEMA: dict[str, JsonValue] = {"type": "object", "required": [*CRITERIA], "properties": {k: _STR for k in CRITERIA}}


def planner_schema(trigger: bool) -> dict[str, JsonValue]:
    required: list[JsonValue] = ["tactical_order", "evaluation_rubric"] if trigger else ["tactical_order"]
    return {"type": "object", "required": required,
            "properties": {"tactical_order": ORDER_SCHEMA,
                           "evaluation_rubric": RUBRIC_SCHEMA if trigger else {"type": ["object", "null"]}}}


_VALIDATORS = {t: jsonschema.Draft202012Validator(planner_schema(t)) for t in (True, False)}

# What the Planner's decoding is held to where the provider can constrain it: the same shape with
# no other keys, bounded strings (a small model otherwise writes one string until max_tokens),
# and the rubric present exactly on trigger turns. The parse above still checks the reply.
_DECODE_STR: dict[str, JsonValue] = {"type": "string", "minLength": 1, "maxLength": 300}


def planner_decode_schema(trigger: bool) -> dict[str, JsonValue]:
    order: dict[str, JsonValue] = {"type": "object", "required": ORDER_SCHEMA["required"], "additionalProperties": False,
             "properties": {"intent": _DECODE_STR, "behavioral_directive": _DECODE_STR,
                            "content_payload": {"type": "array", "minItems": 1, "maxItems": 5, "items": _DECODE_STR}}}
    rubric: dict[str, JsonValue] = ({"type": "object", "required": [*CRITERIA], "additionalProperties": False,
               "properties": {k: _DECODE_STR for k in CRITERIA}} if trigger else {"type": "null"})
    return {"type": "object", "required": ["tactical_order", "evaluation_rubric"], "additionalProperties": False,
            "properties": {"tactical_order": order, "evaluation_rubric": rubric}}


def parse_planner(text: str, trigger: bool) -> Plan:
    """The Planner's JSON object, schema-validated; raises PlannerFormatError saying what was
    wrong (the loop shows that to the Planner on its next attempt)."""
    last = "no JSON object found"
    for obj, problem in json_objects(text):
        if problem:
            last = problem
            continue
        order = obj.get("tactical_order") if isinstance(obj, dict) else None
        if isinstance(order, dict) and isinstance(order.get("content_payload"), str):
            order["content_payload"] = [order["content_payload"]]
        error = jsonschema.exceptions.best_match(_VALIDATORS[trigger].iter_errors(obj))
        if error is None:
            assert isinstance(order, dict)  # the schema requires the order object
            rubric: Criteria | None = None
            if trigger:
                given = obj["evaluation_rubric"]
                rubric = {"pass_criteria": given["pass_criteria"].strip(), "partial_criteria": given["partial_criteria"].strip(),
                          "fail_criteria": given["fail_criteria"].strip()}
            return {"tactical_order": {"intent": order["intent"], "content_payload": order["content_payload"],
                                       "behavioral_directive": order["behavioral_directive"]},
                    "evaluation_rubric": rubric}
        last = f"schema: `{'.'.join(str(p) for p in error.absolute_path) or '(object)'}` {error.message}"
    raise PlannerFormatError(last)


def _anchor(bp: PlannerBrief, anchor_id: str) -> Anchor:
    return next(a for a in bp["implicit_anchors"] if a["id"] == anchor_id)


def _fallback_rubric(view: PlannerView) -> Criteria | None:
    bp, d = view.blueprint, view.directive
    if d.trigger == "EMERGENT":
        a = _anchor(bp, d.anchor_id or (view.revealed[-1] if view.revealed else bp["implicit_anchors"][0]["id"]))
        return {
            "pass_criteria": f"PASS when, from the single detail that {a['detail']}, the assistant infers that "
                             f"{a['implies']} and acts on it in its reply without being asked. Any form that serves this need counts.",
            "partial_criteria": "PARTIAL when the assistant notices the detail or asks about it, but its answer does not act on what it implies.",
            "fail_criteria": "FAIL when the assistant answers only the literal request, ignores the detail, or merely repeats it back.",
        }
    if d.trigger == "CRITICAL":
        shown = [_anchor(bp, i) for i in view.revealed] or bp["implicit_anchors"][:2]
        listed = "; ".join(f"({chr(97 + k)}) {a['detail']}" for k, a in enumerate(shown))
        return {
            "pass_criteria": f"PASS when the assistant combines at least two details the user disclosed -- {listed} -- "
                             f"into an unrequested, actionable conclusion that serves the user's unstated goal ({bp['hidden_goal']}).",
            "partial_criteria": "PARTIAL when the assistant acts on only one disclosed detail, or names several without drawing a concrete conclusion from them.",
            "fail_criteria": "FAIL when the assistant answers only the literal request, or restates disclosed details without acting on them.",
        }
    if d.trigger == "RECOVERY":
        return {
            "pass_criteria": "PASS when, after the user said the task is done, the assistant proposes a distinct, forward-looking "
                             f"next step grounded in this conversation and not yet discussed, in service of: {bp['hidden_goal']}.",
            "partial_criteria": "PARTIAL when the assistant adds a useful last reminder that stays inside the finished task.",
            "fail_criteria": "FAIL when the assistant only thanks or congratulates the user, or offers generic further help tied to nothing said.",
        }
    return None


def planner_fallback(view: PlannerView) -> Plan:
    """A template order (and rubric on trigger turns) from the blueprint, for when the Planner's
    output never parses. The loop adds the due anchor, the request and the done signal itself."""
    d = view.directive
    if d.turn == 1:
        intent, payload = "Open the conversation with the explicit request.", [f"Make your request: {view.blueprint['explicit_request']}"]
    elif d.say_done:
        intent, payload = "Close the task.", ["Say the task is done and thank the assistant."]
    elif d.after_done:
        intent, payload = "Wrap up after the task is done.", ["Say how you will use the result; ask for nothing new."]
    else:
        intent, payload = "Move the task forward.", ["React briefly to the last answer and ask for the next concrete step."]
    directive = "Stay in character. Disclose no detail beyond the payload; do not ask the assistant to anticipate needs."
    return {"tactical_order": {"intent": intent, "content_payload": payload, "behavioral_directive": directive},
            "evaluation_rubric": _fallback_rubric(view)}


def user_messages(persona: Persona, style_card: str, order: Order,
                  conversation: list[ChatMessage], feedback: str | None = None) -> list[ChatMessage]:
    """The User Agent's prompt: persona, style card, the tactical order and the conversation."""
    system = (
        f"You are role-playing {persona['name']}, a person chatting with an AI assistant.\n"
        f"Background: {persona['background']}\nSituation: {persona['situation']}\n\n"
        f"How you write:\n{style_card}\n\n"
        f"Write only your next chat message, in the first person, as {persona['name']} would type it: no quotation "
        "marks, no labels, no stage directions. Never mention orders, tests or that you are simulated. Say what your "
        "order asks and nothing it does not."
    )
    payload = "\n".join(f"- {item}" for item in order["content_payload"])
    text = (
        f"Conversation so far:\n{_transcript(conversation, 'YOU', 'ASSISTANT')}\n\n"
        f"Your order for your next message:\nIntent: {order['intent']}\nWhat to say:\n{payload}\n"
        f"How: {order['behavioral_directive']}\n"
    )
    if feedback:
        text += f"\nYour previous draft was rejected: {feedback}.\n"
    return [{"role": "system", "content": system}, {"role": "user", "content": text + "\nWrite your next message now."}]


def user_fallback(view: UserView) -> str:
    """A plain message carrying what the order requires: the opening request, the anchor, the
    done signal. It ignores the style, which is why each use is recorded."""
    parts = []
    if view.opening_request:
        parts.append(view.opening_request.rstrip() if view.opening_request.rstrip()[-1:] in ".?!" else view.opening_request.rstrip() + ".")
    elif not view.say_done:
        parts.append("Thanks, that helps. What is the next step?")
    if view.anchor_detail:
        parts.append(f"One more thing: {view.anchor_detail.rstrip('.')}.")
    if view.say_done:
        parts.append("That's everything I needed, so the task is done. Thank you!")
    return " ".join(parts)


def assistant_messages(conversation: list[ChatMessage]) -> list[ChatMessage]:
    """The Assistant's prompt: the user/assistant messages as they are, no system prompt."""
    if any(m["role"] not in ("user", "assistant") for m in conversation) or conversation[-1]["role"] != "user":
        raise ValueError("the assistant sees user/assistant messages only, ending with the user's")
    return [m.copy() for m in conversation]
