"""ProactBench's three-agent loop (Planner, User Agent, Assistant, plus the Judge on trigger turns)
as a LangGraph StateGraph.

Why the split between code and models: the protocol's structure -- which turn is a trigger of
which type, which anchor is due, when the user says the task is done -- is decided here, by
deterministic code from the blueprint and the turn (`make_schedule`, `directive_for`), so no model
can break a window, the spacing or the one-anchor-per-message rule. The models only write content:
the Planner the tactical order and the rubric text (JSON, schema-checked by the environment's
parser; bounded retries here, then a template), the User Agent the message (checked here; bounded
retries, then a template), the Assistant its reply. Every fallback is recorded on its turn.

The graph never holds the style, and the Planner's view of the blueprint never holds the persona:
the roles are callables supplied by the environment (`Roles`), each closing over only what its
prompt may contain, so this module imports `harness` and the shapes of what it reads and writes
(`loop_records`) only (the dependency direction of DESIGN.md).

Anchor heuristic (documented because the loop depends on it): an anchor's key words are the
content words of its `detail` (4+ letters or containing a digit, minus stop words, minus words of
the explicit request and of the other anchors), compared by their first five letters so "allergy"
matches "allergic". A message reveals the anchor when it holds a third of them, at least two (one
when the anchor has a single key word) and at most three. On the project's 54 curated dialogues
(472 user messages, 257 reveals labelled by their authors) this finds 223 reveals with 1 false
positive: it errs towards "missed", which costs a repeated order, not a wrong trigger. The same
test flags an order or a message that discloses an anchor it was not told to.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Awaitable, Callable, TypedDict, cast

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from corpora.proact_blueprints import Anchor
from environments.proact.loop_records import (
    LoopTrigger,
    LoopTurnRecord,
    LoopVerdict,
    Order,
    Plan,
    PlannerBrief,
    PlannerRecord,
    TriggerRubric,
    UserAgentRecord,
    planner_brief,
)
from harness.messages import ChatMessage
from harness.providers.base import ModelError
from harness.structured import Attempt, ReplyProblem, StructuredReply, retry_reply

MAX_TURNS = 10
WINDOWS = {"EMERGENT": (1, 3), "CRITICAL": (4, 7), "RECOVERY": (8, 10)}
MIN_TRIGGERS, MAX_TRIGGERS = 3, 6
DONE_TURNS = (7, 8)  # the user says the task is done on one of these turns
ANCHOR_NEED = {"EMERGENT": 1, "CRITICAL": 2}  # anchors revealed by (and including) the trigger turn
MAX_MISSES = 2  # an anchor missed this often is force-revealed by the next order
CRITERIA = ("pass_criteria", "partial_criteria", "fail_criteria")


# ---------------------------------------------------------------- the structural schedule
@dataclass(frozen=True)
class Schedule:
    triggers: dict[int, str]  # turn -> EMERGENT | CRITICAL | RECOVERY
    done_turn: int  # the turn whose user message says the task is done
    last_turn: int  # the dialogue ends after this turn (the last RECOVERY trigger)
    anchor_due: dict[str, int]  # anchor id -> first turn its reveal is ordered


def _spaced(turns: range | list[int], sizes: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [c for k in sizes for c in itertools.combinations(turns, k) if all(b - a >= 2 for a, b in zip(c, c[1:]))]


@lru_cache(maxsize=1)
def trigger_layouts() -> tuple[tuple[tuple[tuple[int, str], ...], int], ...]:
    """Every legal (triggers, done turn): windows, 3-6 triggers, never two on consecutive turns,
    CRITICAL before the done turn, RECOVERY strictly after it. Enumerated once, so a schedule is
    legal by construction rather than by checking a model's choice."""
    out = []
    for done in DONE_TURNS:
        for e in _spaced(range(1, 4), (1, 2)):
            for c in _spaced(range(4, done), (1, 2)):
                for r in _spaced([t for t in range(8, MAX_TURNS + 1) if t > done], (1, 2)):
                    turns = e + c + r
                    if MIN_TRIGGERS <= len(turns) <= MAX_TRIGGERS and all(b - a >= 2 for a, b in zip(turns, turns[1:])):
                        kinds = ["EMERGENT"] * len(e) + ["CRITICAL"] * len(c) + ["RECOVERY"] * len(r)
                        out.append((tuple(zip(turns, kinds)), done))
    return tuple(out)


def make_schedule(blueprint_id: str, anchor_ids: list[str]) -> Schedule:
    """The schedule of one blueprint: a hash of its id picks a legal layout and the anchors' due
    turns (A1 on turn 1, one per turn at most, the second no later than the first CRITICAL
    trigger). It ignores the style on purpose: every style of a blueprint meets the same plan."""
    rng = random.Random(int(hashlib.sha256(blueprint_id.encode()).hexdigest()[:16], 16))
    pairs, done = rng.choice(trigger_layouts())
    triggers = dict(pairs)
    first_critical = min(t for t, k in triggers.items() if k == "CRITICAL")
    options = [c for c in itertools.combinations(range(2, done), len(anchor_ids) - 1)
               if len(anchor_ids) < 2 or c[0] <= first_critical]
    due = (1,) + rng.choice(options)
    return Schedule(triggers=triggers, done_turn=done, last_turn=max(triggers), anchor_due=dict(zip(anchor_ids, due)))


def schedule_problems(s: Schedule) -> list[str]:
    """What is wrong with a schedule (empty when legal); the tests run it over many blueprints."""
    turns = sorted(s.triggers)
    problems = [f"{k} on turn {t} outside {WINDOWS[k]}" for t, k in s.triggers.items()
                if not WINDOWS[k][0] <= t <= WINDOWS[k][1]]
    problems += [f"triggers on consecutive turns {a},{b}" for a, b in zip(turns, turns[1:]) if b - a < 2]
    problems += [f"RECOVERY on turn {t} not after done turn {s.done_turn}" for t, k in s.triggers.items()
                 if k == "RECOVERY" and t <= s.done_turn]
    problems += [f"CRITICAL on turn {t} not before done turn {s.done_turn}" for t, k in s.triggers.items()
                 if k == "CRITICAL" and t >= s.done_turn]
    if not MIN_TRIGGERS <= len(turns) <= MAX_TRIGGERS:
        problems.append(f"{len(turns)} triggers")
    if set(s.triggers.values()) != set(WINDOWS):
        problems.append(f"types {sorted(set(s.triggers.values()))}")
    if s.last_turn != max(turns) or s.last_turn > MAX_TURNS:
        problems.append(f"last turn {s.last_turn}")
    dues = sorted(s.anchor_due.values())
    if dues[0] != 1 or len(set(dues)) != len(dues) or dues[-1] >= s.done_turn:
        problems.append(f"anchor due turns {dues}")
    return problems


# ---------------------------------------------------------------- the anchor heuristic
_STOP = frozenset("""about above after again against also because been before being below between both
could does doing down during each from further have having here hers herself himself into itself just more
most myself only other ours ourselves over same should some such than that their theirs them themselves then
there these they this those through under until very were what when where which while whom with would your
yours yourself user users wants need needs will really thing things much many keep keeps uses used using come
comes came take takes took make makes made gets getting goes going went know knows said says tell told like likes
want every last next since still even ever never always already long else back well good great little lots first
second able sure time times""".split())
_WORD = re.compile(r"[a-z0-9]+")
DONE_WORDS = re.compile(r"\b(done|finished|final|finalised|finalized|complete|completed|all set|that['\u2019]?s (all|everything|it)"
                        r"|wrap(ped)? (it |this |that )?up|good to go|settled|sorted|locked in|ready to go|nothing else)\b", re.I)


def _stem(word: str) -> str:
    return word[:5]


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("'", "").replace("\u2019", ""))


def key_words(text: str, exclude: AbstractSet[str] = frozenset()) -> list[str]:
    """Stems of the distinctive content words of `text`, in order, without repeats."""
    out: list[str] = []
    for w in _words(text):
        s = _stem(w)
        if (len(w) >= 4 or any(ch.isdigit() for ch in w)) and w not in _STOP and s not in exclude and s not in out:
            out.append(s)
    return out


def anchor_keys(anchors: list[Anchor], explicit_request: str) -> dict[str, list[str]]:
    """Each anchor's key words, without those of the request or another anchor (so revealing one
    anchor does not look like revealing another); loosened when that leaves nothing."""
    request = set(key_words(explicit_request))
    out = {}
    for a in anchors:
        others = {s for b in anchors if b["id"] != a["id"] for s in key_words(b["detail"])}
        out[a["id"]] = key_words(a["detail"], request | others) or key_words(a["detail"], request) or key_words(a["detail"])
    return out


def mentions(text: str, keys: list[str]) -> bool:
    """Whether `text` holds a third of `keys`, at least two (one if there is one), at most three."""
    if not keys:
        return False
    present = {_stem(w) for w in _words(text)}
    need = min(len(keys), 3, max(2, math.ceil(len(keys) / 3)))
    return sum(k in present for k in keys) >= need


def done_acknowledged(text: str, done_signal: str) -> bool:
    """A closing phrase ("done", "all set", "that's everything", ...) or the done signal's words."""
    return bool(DONE_WORDS.search(text)) or mentions(text, key_words(done_signal))


class PlannerFormatError(ValueError):
    """The Planner's answer did not parse or broke a rule; the loop retries, then uses a template."""


# ---------------------------------------------------------------- what each role may see
@dataclass(frozen=True)
class TurnDirective:
    """This turn's structure, fixed by code before any model is called."""
    turn: int
    trigger: str | None
    anchor_id: str | None
    forced: bool
    force_reason: str | None
    say_done: bool
    after_done: bool
    stop: bool


@dataclass(frozen=True)
class PlannerView:
    blueprint: PlannerBrief  # no persona, no style
    conversation: list[ChatMessage]
    revealed: list[str]
    directive: TurnDirective
    feedback: str | None = None  # why the previous attempt was rejected


@dataclass(frozen=True)
class UserView:
    order: Order
    conversation: list[ChatMessage]
    turn: int
    feedback: str | None = None
    # Facts for the template message only (each is already in the order's payload):
    opening_request: str | None = None
    anchor_detail: str | None = None
    say_done: bool = False


@dataclass
class Roles:
    """The models behind the loop, as callables the environment builds (prompt + model call)."""
    plan: Callable[[PlannerView, int], Awaitable[Plan]]  # parsed; raises PlannerFormatError
    plan_fallback: Callable[[PlannerView], Plan]
    speak: Callable[[UserView, int], Awaitable[str]]
    speak_fallback: Callable[[UserView], str]
    answer: Callable[[list[ChatMessage]], Awaitable[str]]
    judge: Callable[[TriggerRubric | None, list[ChatMessage], str], Awaitable[LoopVerdict]]


class TurnInProgress(TypedDict, total=False):
    """The turn in progress, filled node by node: planner, then user, then assistant."""
    directive: TurnDirective
    planner: PlannerRecord
    user_message: str
    user_agent: UserAgentRecord
    history: list[ChatMessage]
    reply: str


class LoopState(TypedDict):
    turn: int
    records: list[LoopTurnRecord]  # finished turns
    current: TurnInProgress
    revealed: list[str]  # anchor ids, in the order the user revealed them
    misses: dict[str, int]
    triggers: list[LoopTrigger]
    done_turn: int | None  # the turn whose user message acknowledged the task is done
    failed: str | None


class LoopUpdate(TypedDict, total=False):
    """What a node returns: the keys of LoopState it changes."""
    turn: int
    records: list[LoopTurnRecord]
    current: TurnInProgress
    revealed: list[str]
    misses: dict[str, int]
    triggers: list[LoopTrigger]
    done_turn: int | None
    failed: str | None


LoopGraph = CompiledStateGraph[LoopState, None, LoopState, LoopState]  # what `DialogueLoop.graph()` compiles


def initial_state() -> LoopState:
    return LoopState(turn=0, records=[], current={}, revealed=[], misses={}, triggers=[], done_turn=None, failed=None)


def conversation(records: list[LoopTurnRecord]) -> list[ChatMessage]:
    msgs: list[ChatMessage] = []
    for r in records:
        msgs += [{"role": "user", "content": r["user_message"]}, {"role": "assistant", "content": r["assistant_response"]}]
    return msgs


def clean_message(text: str) -> str:
    """Drop quote marks and a leading speaker label that small models like to add."""
    text = re.sub(r"^\s*(user|me|you|message)\s*:\s*", "", text.strip(), flags=re.I).strip()
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def _problems(reply: StructuredReply[Any]) -> list[str]:
    """The failed attempts as the turn records them: `attempt N: why`."""
    return [f"attempt {i + 1}: {a.problem}" for i, a in enumerate(reply.attempts) if a.kind != "ok"]


# ---------------------------------------------------------------- the graph
class DialogueLoop:
    """One dialogue's graph: planner -> user -> assistant -> (judge if trigger) -> next turn or end.

    Nodes (`planner`, `user`, `assistant`, `judge`) and edges (`after_assistant`, `next_turn`) are
    methods, callable on a hand-made `LoopState`; `graph()` wires them into the StateGraph. The
    deterministic protocol pieces (`directive_for`, `complete_order`, `order_leaks`,
    `user_problem`) are methods too, so each can be tested alone."""

    def __init__(self, blueprint: PlannerBrief, schedule: Schedule, roles: Roles, *,
                 planner_attempts: int = 3, user_attempts: int = 3):
        self.bp = planner_brief(blueprint)
        self.anchors = {a["id"]: a for a in self.bp["implicit_anchors"]}
        self.ids = list(self.anchors)
        self.keys = anchor_keys(self.bp["implicit_anchors"], self.bp["explicit_request"])
        self.request_keys = key_words(self.bp["explicit_request"])
        self.schedule, self.roles = schedule, roles
        self.planner_attempts, self.user_attempts = planner_attempts, user_attempts

    def directive_for(self, state: LoopState, turn: int) -> tuple[TurnDirective, list[str]]:
        """This turn's structure (trigger, anchor to reveal, done), fixed by code, and notes on withheld triggers."""
        notes, done = [], state["done_turn"]
        kind = self.schedule.triggers.get(turn)
        if kind == "RECOVERY" and not (done is not None and done < turn):
            notes.append(f"RECOVERY on turn {turn} withheld: the user had not yet said the task is done")
            kind = None
        anchor, forced, reason = None, False, None
        pending = [a for a in self.ids if a not in state["revealed"]]
        if pending and done is None and turn < self.schedule.done_turn:
            a = pending[0]
            nxt = next((t for t in sorted(self.schedule.triggers) if t >= turn and self.schedule.triggers[t] in ANCHOR_NEED), None)
            deficit = ANCHOR_NEED[self.schedule.triggers[nxt]] - len(state["revealed"]) if nxt else 0
            if state["misses"].get(a, 0) >= MAX_MISSES:
                forced, reason = True, f"{a} was missed {state['misses'][a]} times"
            elif nxt is not None and deficit > 0 and deficit >= nxt - turn + 1:
                forced, reason = True, f"the {self.schedule.triggers[nxt]} trigger on turn {nxt} needs {ANCHOR_NEED[self.schedule.triggers[nxt]]} revealed anchor(s)"
            if forced or self.schedule.anchor_due[a] <= turn:
                anchor = a
        stop = turn >= min(self.schedule.last_turn, MAX_TURNS)
        return TurnDirective(turn, kind, anchor, forced, reason, done is None and turn >= self.schedule.done_turn,
                             done is not None, stop), notes

    def order_leaks(self, order: Order, d: TurnDirective, revealed: list[str]) -> list[str]:
        """Anchors an order would disclose besides the one due this turn."""
        text = " ".join([order["intent"], *order["content_payload"], order["behavioral_directive"]])
        return [a for a in self.ids if a not in revealed and a != d.anchor_id and mentions(text, self.keys[a])]

    def complete_order(self, order: Order, d: TurnDirective) -> tuple[Order, list[str]]:
        """Make the order carry what the protocol requires this turn, whatever the Planner wrote."""
        order = {**order, "content_payload": list(order["content_payload"])}
        patches, payload = [], " ".join(order["content_payload"])
        if d.turn == 1 and not mentions(payload + " " + order["intent"], self.request_keys):
            order["content_payload"].insert(0, f"Make your request: {self.bp['explicit_request']}")
            patches.append("explicit request added")
        if d.anchor_id and (d.forced or not mentions(payload, self.keys[d.anchor_id])):
            verb = "State this detail plainly, in your own words" if d.forced else "Mention this detail in passing"
            order["content_payload"].append(f"{verb}: {self.anchors[d.anchor_id]['detail']}")
            patches.append(f"anchor {d.anchor_id} added" + (" (forced)" if d.forced else ""))
        if d.say_done and not done_acknowledged(payload, self.bp["done_signal"]):
            order["content_payload"].append(f"Say clearly that the task is done ({self.bp['done_signal']}).")
            patches.append("done signal added")
        return order, patches

    async def planner(self, state: LoopState) -> LoopUpdate:
        """Start the next turn: its directive and the Planner's order (bounded retries, then the template)."""
        turn = state["turn"] + 1
        d, notes = self.directive_for(state, turn)
        conv, revealed = conversation(state["records"]), list(state["revealed"])

        async def ask(attempt: int, tried: list[Attempt]) -> Plan:
            feedback = tried[-1].problem if tried else None  # why the previous attempt was rejected
            try:
                plan = await self.roles.plan(PlannerView(self.bp, conv, revealed, d, feedback), attempt)
            except PlannerFormatError as exc:
                raise ReplyProblem("invalid", str(exc)) from None
            leaked = self.order_leaks(plan["tactical_order"], d, revealed)
            if leaked:
                raise ReplyProblem("invalid", f"the order reveals anchor(s) {leaked}; only {d.anchor_id or 'no anchor'} may be revealed this turn")
            return plan

        reply = await retry_reply(ask, self.planner_attempts, retry_model_errors=True)
        plan, problems = reply.value, _problems(reply)
        fallback = plan is None
        if plan is None:
            plan = self.roles.plan_fallback(PlannerView(self.bp, conv, revealed, d))
        order, patches = self.complete_order(plan["tactical_order"], d)
        criteria = plan["evaluation_rubric"]
        rubric: TriggerRubric | None = None
        if d.trigger:
            assert criteria is not None  # the parser and the template give criteria on every trigger turn
            rubric = {"type": d.trigger, "pass_criteria": criteria["pass_criteria"],
                      "partial_criteria": criteria["partial_criteria"], "fail_criteria": criteria["fail_criteria"]}
        record: PlannerRecord = {
            "state_audit": {"current_turn": turn, "previous_trigger_count": len(state["triggers"]),
                            "is_max_reached": len(state["triggers"]) >= MAX_TRIGGERS},
            "is_trigger_point": d.trigger is not None, "stop_conversation": d.stop,
            "evaluation_rubric": rubric, "tactical_order": order, "revealed_anchor_ids": [],
            "anchor_order": {"id": d.anchor_id, "forced": d.forced, "reason": d.force_reason} if d.anchor_id else None,
            "say_done": d.say_done, "planner_fallback": fallback, "planner_attempts": len(problems) + (0 if fallback else 1),
            "planner_problems": problems, "order_patches": patches, "protocol_notes": notes,
        }
        return {"turn": turn, "current": {"directive": d, "planner": record}}

    def user_problem(self, text: str, d: TurnDirective, others: list[str]) -> str | None:
        """Why a User Agent message breaks this turn's directive (None when it keeps it)."""
        if not text:
            return "the message was empty"
        if d.forced and d.anchor_id and not mentions(text, self.keys[d.anchor_id]):
            return f"the message must state this detail: {self.anchors[d.anchor_id]['detail']}"
        if d.say_done and not done_acknowledged(text, self.bp["done_signal"]):
            return "the message must say clearly that the task is done"
        if any(mentions(text, self.keys[a]) for a in others):
            return "the message disclosed something the order did not ask for; say only what the order says"
        return None

    async def user(self, state: LoopState) -> LoopUpdate:
        """The User Agent's message for the order (bounded retries, then the template), and what it revealed."""
        cur, turn = state["current"], state["turn"]
        d, order = cur["directive"], cur["planner"]["tactical_order"]
        others = [a for a in self.ids if a not in state["revealed"] and a != d.anchor_id]
        conv = conversation(state["records"])

        def view(feedback: str | None) -> UserView:
            return UserView(order, conv, turn, feedback,
                            opening_request=self.bp["explicit_request"] if turn == 1 else None,
                            anchor_detail=self.anchors[d.anchor_id]["detail"] if d.anchor_id else None,
                            say_done=d.say_done)

        async def ask(attempt: int, tried: list[Attempt]) -> str:
            # The feedback is the last rejected message's problem (a failed call says nothing about the message).
            feedback = next((a.problem for a in reversed(tried) if a.kind != "model_error"), None)
            text = clean_message(await self.roles.speak(view(feedback), attempt))
            problem = self.user_problem(text, d, others)
            if problem is not None:
                raise ReplyProblem("invalid", problem)
            return text

        reply = await retry_reply(ask, self.user_attempts, retry_model_errors=True)
        message, problems = reply.value, _problems(reply)
        fallback = message is None
        if message is None:
            message = clean_message(self.roles.speak_fallback(view(None)))
        revealed_now = [d.anchor_id] if d.anchor_id and mentions(message, self.keys[d.anchor_id]) else []
        misses = dict(state["misses"])
        if d.anchor_id and not revealed_now:
            misses[d.anchor_id] = misses.get(d.anchor_id, 0) + 1
        done_turn = turn if d.say_done and done_acknowledged(message, self.bp["done_signal"]) else state["done_turn"]
        planner_record: PlannerRecord = {**cur["planner"], "revealed_anchor_ids": revealed_now}
        agent: UserAgentRecord = {"fallback": fallback, "attempts": len(problems) + (0 if fallback else 1), "problems": problems}
        return {"current": {**cur, "planner": planner_record, "user_message": message, "user_agent": agent},
                "revealed": state["revealed"] + revealed_now, "misses": misses, "done_turn": done_turn}

    async def assistant(self, state: LoopState) -> LoopUpdate:
        """The Assistant's reply; the turn is recorded (a failed call ends the dialogue)."""
        cur, turn = state["current"], state["turn"]
        history: list[ChatMessage] = conversation(state["records"]) + [{"role": "user", "content": cur["user_message"]}]
        failed = None
        try:
            reply = await self.roles.answer(history)
        except ModelError as exc:
            reply, failed = "", f"turn {turn}: assistant: {exc}"
        record: LoopTurnRecord = {"turn": turn, "planner": cur["planner"], "user_message": cur["user_message"],
                                  "assistant_response": reply, "user_agent": cur["user_agent"]}
        update: LoopUpdate = {"records": state["records"] + [record], "failed": failed,
                                  "current": {**cur, "history": history, "reply": reply}}
        if failed and cur["planner"]["is_trigger_point"]:
            result: LoopVerdict = {"status": "ERROR", "score": None, "error": failed}
            update["triggers"] = state["triggers"] + [{"turn": turn, "evaluation_rubric": cur["planner"]["evaluation_rubric"],
                                                       "evaluation_result": result}]
        return update

    async def judge(self, state: LoopState) -> LoopUpdate:
        """The Judge's verdict on a trigger turn."""
        cur = state["current"]
        rubric = cur["planner"]["evaluation_rubric"]
        result = await self.roles.judge(rubric, cur["history"], cur["reply"])
        return {"triggers": state["triggers"] + [{"turn": state["turn"], "evaluation_rubric": rubric, "evaluation_result": result}]}

    def next_turn(self, state: LoopState) -> str:
        return END if state["current"]["directive"].stop or state["turn"] >= MAX_TURNS else "planner"

    def after_assistant(self, state: LoopState) -> str:
        if state["failed"]:
            return END
        return "judge" if state["current"]["planner"]["is_trigger_point"] else self.next_turn(state)

    def graph(self) -> LoopGraph:
        """The compiled graph."""
        graph = StateGraph(LoopState)
        for name in ("planner", "user", "assistant", "judge"):
            graph.add_node(name, getattr(self, name))
        graph.add_edge(START, "planner")
        graph.add_edge("planner", "user")
        graph.add_edge("user", "assistant")
        graph.add_conditional_edges("assistant", self.after_assistant, ["judge", "planner", END])
        graph.add_conditional_edges("judge", self.next_turn, ["planner", END])
        return graph.compile()


def build(blueprint: PlannerBrief, schedule: Schedule, roles: Roles, *,
          planner_attempts: int = 3, user_attempts: int = 3) -> LoopGraph:
    """The compiled graph of `DialogueLoop`."""
    return DialogueLoop(blueprint, schedule, roles, planner_attempts=planner_attempts,
                        user_attempts=user_attempts).graph()


async def run_dialogue(graph: LoopGraph) -> LoopState:
    """Run a built graph from the first turn to the end (at most MAX_TURNS turns)."""
    final = await graph.ainvoke(initial_state(), {"recursion_limit": 5 * MAX_TURNS + 5})
    # LangGraph types ainvoke's result as a dict or Any; in its default stream mode ("values")
    # it is the graph's final state.
    return cast(LoopState, final)
