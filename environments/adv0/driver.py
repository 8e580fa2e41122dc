"""The LLM driver: a LangGraph agent that drives one meta-action per step and learns from its
crashes through a reflection memory.

    START -> observe -> retrieve -> decide -> act -> (reflect ->) (observe | END)

It sees the world only through the core's protocol (`harness.environment`): an observation's
text, its admissible actions (the meta-actions available now: no LANE_LEFT in the leftmost lane)
and the action help the environment gives. Per step:

- `observe` cuts the observation to the prompt budget;
- `retrieve` picks the `reflections_k` lessons of the memory whose situations share the most words
  with this one (ties: the newest first) -- the memory is the driver's "training";
- `decide` asks the model for one admissible action, as `AgentConfig.action_format` says:
  `constrained` (a JSON object `{"action": ...}` whose action is an enum of the admissible ones,
  sent as the provider's JSON-schema constraint), `tools` (the same object as the arguments of one
  forced `drive` tool call) or `free` (text; the first admissible action named in it counts). A
  reply is always parsed and checked here, so a provider that ignored the constraint cannot slip
  an action through. Up to `parse_attempts` asks; a reply that never names an admissible action is
  a counted invalid action and the car keeps its lane (IDLE), never a crashed run;
- `act` sends the action; the environment's step info says whether the ego crashed
  (`info["crashed"]`) and, where it knows, who was at fault (`info["fault"]`);
- `reflect`, after a crash the driver may have caused (any fault but "attacker"), asks the model
  for a one-sentence lesson from the situation before the crash and its last actions, and stores
  it in the memory. A reply without a usable sentence stores nothing (counted).

`ReflectionMemory` is a small pydantic model; the caller persists it as JSON between episodes
(`memory.model_dump_json()` / `ReflectionMemory.model_validate_json(text)`).

May import: `harness` (the protocol, the agent contract, structured replies), `agents` and
third-party packages; never the environments (import-linter contract `agents`).
"""

from __future__ import annotations

import re
from typing import cast

from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field, JsonValue

from agents.action_parsing import action_help, truncate_observation
from agents.episode import Graph, execute, recursion_limit
from harness.agents_registry import AgentConfig, EpisodeState, Generate
from harness.environment import AsyncEnvironment, Observation
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig
from harness.structured import FORMS, Form, ReplyProblem, ask_structured, extract_json_object

__all__ = ["DriverAgent", "DriverGraph", "DriverState", "Lesson", "ReflectionMemory", "build"]

KEEP_LANE = "IDLE"  # what an invalid reply turns into: keep the lane and the speed
SYSTEM = ("You drive a car in traffic. Every step you choose one meta-action. Keep a safe distance, "
          "drive near the speed limit and never crash.")
_WORD = re.compile(r"[a-z_]+")


# ---------------------------------------------------------------- the reflection memory
class Lesson(BaseModel):
    """One lesson, learned from a crash."""

    lesson: str = Field(description="one sentence: what to do differently")
    situation: str = Field(description="the observation before the crash (what retrieval matches against)")
    actions: list[str] = Field(default_factory=list, description="the driver's last actions before the crash")
    fault: str | None = None


class ReflectionMemory(BaseModel):
    """The driver's lessons, oldest first, at most `capacity` (the oldest are dropped)."""

    lessons: list[Lesson] = Field(default_factory=list)
    capacity: int = Field(50, ge=1)

    def add(self, lesson: Lesson) -> None:
        self.lessons = (self.lessons + [lesson])[-self.capacity:]

    def retrieve(self, situation: str, k: int) -> list[Lesson]:
        """The `k` lessons whose situations share the most words with `situation` (Jaccard over
        words, numbers ignored), the newest first among equals."""
        if k <= 0 or not self.lessons:
            return []
        here = set(_WORD.findall(situation.lower()))

        def score(i: int) -> tuple[float, int]:
            words = set(_WORD.findall(self.lessons[i].situation.lower()))
            return (len(here & words) / max(1, len(here | words)), i)

        order = sorted(range(len(self.lessons)), key=score, reverse=True)
        return [self.lessons[i] for i in order[:k]]


# ---------------------------------------------------------------- the structured replies
class DriveChoice(BaseModel):
    action: str


class LessonReply(BaseModel):
    lesson: str = Field(min_length=3)


def choice_schema(available: list[str]) -> dict[str, JsonValue]:
    """The JSON schema of a reply naming one of `available` (sent to the provider as is)."""
    return {"type": "object", "required": ["action"], "additionalProperties": False,
            "properties": {"action": {"enum": [*available]}}}


LESSON_SCHEMA: dict[str, JsonValue] = {"type": "object", "required": ["lesson"], "additionalProperties": False,
                                       "properties": {"lesson": {"type": "string", "minLength": 3, "maxLength": 160}}}


def named_action(text: str, available: list[str]) -> str | None:
    """The admissible action a reply names: a JSON object's `action` when it is one, else the
    first admissible name in the text (case-insensitive; `lane left` reads as LANE_LEFT)."""
    obj = extract_json_object(text)
    if obj is not None and isinstance(obj.get("action"), str):
        text = obj["action"]
    hits = []
    for name in available:
        pattern = r"(?<![a-z_])" + r"[ _]".join(map(re.escape, name.lower().split("_"))) + r"(?![a-z_])"
        m = re.search(pattern, text.lower())
        if m:
            hits.append((m.start(), -len(name), name))
    return min(hits)[2] if hits else None


def first_sentence(text: str) -> str:
    """A lesson from a reply: the JSON object's `lesson` if there is one, else the first sentence."""
    obj = extract_json_object(text)
    if obj is not None and isinstance(obj.get("lesson"), str):
        text = obj["lesson"]
    text = " ".join(text.split())
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    return (m.group(1) if m else text)[:200].strip()


def driver_form(cfg: AgentConfig) -> Form:
    if cfg.action_format not in FORMS:
        raise ValueError(f"action_format {cfg.action_format!r}: use one of {', '.join(FORMS)}")
    return cfg.action_format  # narrowed to a Form by the check above


# ---------------------------------------------------------------- the graph
class DriverState(EpisodeState, total=False):
    view: str  # this step's observation text, cut to the budget
    lessons: list[str]  # the lessons retrieved for this step
    choice: str | None  # the decided action (None: the reply named none)
    invalid_outputs: int  # bad replies at this step
    crashed: bool
    fault: str | None
    invalid_actions: int  # steps whose action fell back to IDLE
    reflections: list[str]  # lessons stored during this episode
    reflect_invalid: int  # reflection replies without a usable lesson


class DriverGraph:
    """One episode of the driver: nodes `observe`, `retrieve`, `decide`, `act`, `reflect`."""

    nodes_per_step = 5

    def __init__(self, generate: Generate, env: AsyncEnvironment, cfg: AgentConfig | None = None,
                 memory: ReflectionMemory | None = None, reflections_k: int = 3, reflect_max_tokens: int = 60):
        self.generate, self.env, self.cfg = generate, env, cfg or AgentConfig()
        self.memory = memory if memory is not None else ReflectionMemory()
        self.k, self.reflect_max_tokens = reflections_k, reflect_max_tokens
        self.form = driver_form(self.cfg)

    async def observe(self, state: DriverState) -> DriverState:
        """What the driver reads this step."""
        return {"view": truncate_observation(state["obs"].text, self.cfg.obs_chars)}

    async def retrieve(self, state: DriverState) -> DriverState:
        """The lessons relevant to this situation."""
        return {"lessons": [les.lesson for les in self.memory.retrieve(state["view"], self.k)]}

    def messages(self, state: DriverState) -> list[ChatMessage]:
        obs = state["obs"]
        available = self.available(obs)
        system = SYSTEM + "\nActions:\n" + action_help(tuple(available), obs.info, self.cfg.action_help)
        if state.get("lessons"):
            system += "\nLessons from your earlier crashes:\n" + "\n".join(f"- {s}" for s in state["lessons"])
        recent = ", ".join(s.action for s in state["steps"][-self.cfg.history_steps:]) or "none"
        how = {"constrained": 'Reply with {"action": "<one of them>"}.',
               "tools": "Call the drive tool with one of them.",
               "free": "Reply with the action's name only."}[self.form]
        user = (f"Task: {state['intent']}\nYour last actions: {recent}\n{state['view']}\n"
                f"Choose one of: {', '.join(available)}. {how}")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    @staticmethod
    def available(obs: Observation) -> list[str]:
        return list(obs.admissible) if obs.admissible else list(obs.action_classes)

    async def decide(self, state: DriverState) -> DriverState:
        """Ask for one available action (bounded re-asks); None when no reply named one."""
        available = self.available(state["obs"])

        def parse(text: str) -> DriveChoice:
            name = named_action(text, available)
            if name is None:
                raise ReplyProblem("invalid", f"names none of {', '.join(available)}")
            return DriveChoice(action=name)

        def reask(text: str, problem: ReplyProblem) -> list[ChatMessage]:
            return [{"role": "assistant", "content": text[:300]},
                    {"role": "user", "content": f"That reply {problem}. Answer with exactly one of: {', '.join(available)}."}]

        config = GenerateConfig(temperature=self.cfg.temperature, max_tokens=self.cfg.policy_max_tokens)
        reply = await ask_structured(self.generate, self.cfg.policy_role, self.messages(state), DriveChoice, config,
                                     self.cfg.parse_attempts, parse=parse, reask=reask, form=self.form,
                                     schema=choice_schema(available), tool="drive")
        if reply.error is not None:
            return {"choice": None, "invalid_outputs": reply.invalid,
                    "errors": state.get("errors", []) + [f"{self.cfg.policy_role}: {reply.error}"], "done": True,
                    "ended_by": "error"}
        return {"choice": reply.value.action if reply.value else None, "invalid_outputs": reply.invalid}

    async def act(self, state: DriverState) -> DriverState:
        """Send the decided action (IDLE after an invalid reply) and read whether the ego crashed."""
        steps = list(state["steps"])
        available = self.available(state["obs"])
        choice = state.get("choice")
        fallback = choice is None
        action = choice if choice is not None else (KEEP_LANE if KEEP_LANE in available or not available
                                                    else available[0])
        result, record = await execute(self.env, action, state["view"], len(steps),
                                       invalid_outputs=state.get("invalid_outputs", 0), fallback=fallback,
                                       info={"lessons": list(state.get("lessons", []))})
        steps.append(record)
        crashed = bool(result.info.get("crashed"))
        fault = result.info.get("fault")
        update: DriverState = {"steps": steps, "obs": result.observation, "crashed": crashed,
                                  "fault": fault if isinstance(fault, str) else None,
                                  "invalid_actions": state.get("invalid_actions", 0) + fallback}
        if result.done or crashed:
            update |= {"done": True, "ended_by": "crash" if crashed else "done"}
        elif len(steps) >= self.cfg.max_steps:
            update |= {"done": True, "ended_by": "step_limit"}
        return update

    async def reflect(self, state: DriverState) -> DriverState:
        """Ask for a one-sentence lesson about the crash and store it in the memory."""
        steps = state["steps"]
        situation = steps[-1].observation if steps else state["view"]
        actions = [s.action for s in steps[-self.cfg.history_steps:]]
        who = f" (fault: {state['fault']})" if state.get("fault") else ""
        prompt = (f"You crashed{who}. The situation just before the crash:\n{situation}\n"
                  f"Your last actions: {', '.join(actions) or 'none'}.\n"
                  "In one sentence, what should you do differently next time in a situation like this?")
        messages: list[ChatMessage] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]

        def parse(text: str) -> LessonReply:
            sentence = first_sentence(text)
            if len(sentence) < 3:
                raise ReplyProblem("invalid", "holds no lesson sentence")
            return LessonReply(lesson=sentence)

        config = GenerateConfig(temperature=self.cfg.temperature, max_tokens=self.reflect_max_tokens)
        reply = await ask_structured(self.generate, self.cfg.policy_role, messages, LessonReply, config, 1,
                                     parse=parse, form=self.form, schema=LESSON_SCHEMA, tool="reflect")
        if reply.value is None:
            return {"reflect_invalid": state.get("reflect_invalid", 0) + 1}
        self.memory.add(Lesson(lesson=reply.value.lesson, situation=situation, actions=actions, fault=state.get("fault")))
        return {"reflections": state.get("reflections", []) + [reply.value.lesson]}

    def after_decide(self, state: DriverState) -> str:
        return END if state.get("done") else "act"

    def after_act(self, state: DriverState) -> str:
        if state.get("crashed") and state.get("fault") != "attacker":
            return "reflect"
        return END if state.get("done") else "observe"

    def after_reflect(self, state: DriverState) -> str:
        return END if state.get("done") else "observe"

    def graph(self) -> Graph[DriverState]:
        """The compiled graph."""
        graph = StateGraph(DriverState)
        for name in ("observe", "retrieve", "decide", "act", "reflect"):
            graph.add_node(name, getattr(self, name))
        graph.add_edge(START, "observe")
        graph.add_edge("observe", "retrieve")
        graph.add_edge("retrieve", "decide")
        graph.add_conditional_edges("decide", self.after_decide, ["act", END])
        graph.add_conditional_edges("act", self.after_act, ["reflect", "observe", END])
        graph.add_conditional_edges("reflect", self.after_reflect, ["observe", END])
        return graph.compile()


class DriverAgent:
    """The `driver` agent (roles `assistant`). It holds the reflection memory across episodes:
    pass one in to continue a persisted memory, read `memory` afterwards to persist it."""

    name = "driver"
    roles = ("assistant",)

    def __init__(self, memory: ReflectionMemory | None = None, reflections_k: int = 3, reflect_max_tokens: int = 60):
        self.memory = memory if memory is not None else ReflectionMemory()
        self.reflections_k, self.reflect_max_tokens = reflections_k, reflect_max_tokens

    async def run_episode(self, generate: Generate, env: AsyncEnvironment, intent: str, first_obs: Observation,
                          config: AgentConfig) -> DriverState:
        graph = DriverGraph(generate, env, config, self.memory, self.reflections_k, self.reflect_max_tokens).graph()
        state: DriverState = {"intent": intent, "obs": first_obs, "steps": [], "done": False, "errors": [],
                              "invalid_actions": 0, "reflections": [], "reflect_invalid": 0}
        final = await graph.ainvoke(state, {"recursion_limit": recursion_limit(config, DriverGraph.nodes_per_step)})
        # LangGraph types ainvoke's result `dict[str, Any] | Any`; in its default stream mode
        # ("values") it is the graph's final state.
        return cast(DriverState, final)


def build(generate: Generate, env: AsyncEnvironment, cfg: AgentConfig | None = None,
          memory: ReflectionMemory | None = None) -> Graph[DriverState]:
    """The compiled driver graph."""
    return DriverGraph(generate, env, cfg, memory).graph()

