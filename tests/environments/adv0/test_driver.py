"""The LLM driver (`environments/adv0/driver.py`) on a hand-made road behind the core's protocol.

A scripted model (our own logic): the decision path in each form (constrained JSON choice, forced
tool call, free text), invalid replies counted and turned into IDLE, a model error ending the
episode without raising, a reflection after a crash stored in the memory and shown in the next
episode's prompt (and none after an attacker-at-fault crash), the memory's JSON round trip and
retrieval. One slow smoke test drives with the embedded model through the constrained path.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

from environments.adv0.driver import DriverAgent, Lesson, ReflectionMemory, named_action
from harness.agents_registry import AgentConfig
from harness.environment import Delta, Observation, StepResult, ThreadedEnv
from harness.providers.base import ModelError, ModelOutput, ToolCall, Usage

ACTIONS = ["LANE_LEFT", "IDLE", "LANE_RIGHT", "FASTER", "SLOWER"]


class Road:
    """A three-lane road: the ego starts in the leftmost lane; `crash_after` actions in, the step
    reports a crash with `fault`. Records every action it receives."""

    def __init__(self, steps: int = 4, crash_after: int | None = None, fault: str = "defender"):
        self.steps, self.crash_after, self.fault = steps, crash_after, fault
        self.sent: list[str] = []
        self.lane = 0

    def observation(self) -> Observation:
        admissible = [a for a in ACTIONS if not (a == "LANE_LEFT" and self.lane == 0)
                      and not (a == "LANE_RIGHT" and self.lane == 2)]
        text = f"t={len(self.sent)}.0s, you drive at 25.0 m/s in lane {self.lane} of 3.\n- attacker: 12 m ahead"
        return Observation(text=text, action_classes=tuple(ACTIONS), admissible=admissible)

    def reset(self, task):
        return self.observation()

    def step(self, action: str) -> StepResult:
        self.sent.append(action)
        self.lane += {"LANE_LEFT": -1, "LANE_RIGHT": 1}.get(action, 0)
        crashed = self.crash_after is not None and len(self.sent) >= self.crash_after
        info = {"crashed": crashed, "fault": self.fault if crashed else None}
        return StepResult(self.observation(), Delta(), done=crashed or len(self.sent) >= self.steps, info=info)

    def action_class(self, action: str) -> str:
        return action

    def evaluate(self):
        return {"success": 1.0}

    def close(self):
        pass


class Scripted:
    """A model that replies from a list (the last one repeats) and records every call."""

    def __init__(self, replies):
        self.replies, self.calls = list(replies), []

    async def __call__(self, role, messages, config) -> ModelOutput:
        self.calls.append((messages, config))
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, ToolCall):
            return ModelOutput(text="", tool_calls=[reply])
        return ModelOutput(text=reply)


def drive(model, road: Road, memory: ReflectionMemory | None = None, **cfg):
    agent = DriverAgent(memory)
    config = AgentConfig(**({"max_steps": 10, "action_format": "constrained", "parse_attempts": 2} | cfg))

    async def go():
        env = ThreadedEnv(road)
        try:
            return await agent.run_episode(model, env, "Drive safely.", road.observation(), config)
        finally:
            await env.close()

    return asyncio.run(go()), agent


def test_constrained_choice_sends_the_admissible_enum_and_the_chosen_action():
    model = Scripted(['{"action": "FASTER"}', '{"action": "LANE_RIGHT"}', '{"action": "SLOWER"}', '{"action": "IDLE"}'])
    road = Road(steps=4)
    state, _ = drive(model, road)
    assert road.sent == ["FASTER", "LANE_RIGHT", "SLOWER", "IDLE"]
    assert state["ended_by"] == "done" and state["invalid_actions"] == 0
    first_cfg = model.calls[0][1]
    # The leftmost lane: LANE_LEFT is not admissible, so the constraint does not offer it.
    assert first_cfg.json_schema["properties"]["action"]["enum"] == ["IDLE", "LANE_RIGHT", "FASTER", "SLOWER"]
    assert "LANE_LEFT" in model.calls[2][1].json_schema["properties"]["action"]["enum"]  # lane 1 after LANE_RIGHT


def test_tool_call_and_free_text_forms():
    road = Road(steps=2)
    model = Scripted([ToolCall(name="drive", arguments={"action": "SLOWER"})])
    state, _ = drive(model, road, action_format="tools")
    assert road.sent == ["SLOWER", "SLOWER"] and model.calls[0][1].tool_choice == "drive"
    road = Road(steps=2)
    state, _ = drive(Scripted(["I will change lane right now.", "Keep going: faster"]), road, action_format="free")
    assert road.sent == ["LANE_RIGHT", "FASTER"] and state["invalid_actions"] == 0
    assert model.calls[0][1].json_schema is None


def test_invalid_replies_are_counted_and_become_idle():
    # Twice nonsense (both asks of step 1), then a JSON action that is not admissible in lane 0.
    model = Scripted(["banana", "still no action", '{"action": "LANE_LEFT"}', "nope", '{"action": "FASTER"}'])
    road = Road(steps=3)
    state, _ = drive(model, road)
    assert road.sent == ["IDLE", "IDLE", "FASTER"]
    steps = state["steps"]
    assert [s.fallback for s in steps] == [True, True, False]
    assert [s.invalid_outputs for s in steps] == [2, 2, 0]
    assert state["invalid_actions"] == 2 and state["ended_by"] == "done"
    # The re-ask tells the model what it may answer.
    assert "Answer with exactly one of" in model.calls[1][0][-1]["content"]


def test_model_error_ends_the_episode_without_raising():
    state, _ = drive(Scripted([ModelError("context overflow")]), Road(steps=3))
    assert state["ended_by"] == "error" and "context overflow" in state["errors"][0] and state["steps"] == []


def test_reflection_after_a_crash_is_stored_and_shown_next_episode():
    lesson = "Slow down when a car is close ahead."
    model = Scripted(['{"action": "FASTER"}', '{"action": "FASTER"}', json.dumps({"lesson": lesson})])
    memory = ReflectionMemory()
    state, agent = drive(model, Road(steps=5, crash_after=2), memory)
    assert state["ended_by"] == "crash" and state["reflections"] == [lesson]
    assert [le.lesson for le in agent.memory.lessons] == [lesson]
    assert agent.memory.lessons[0].actions == ["FASTER", "FASTER"] and agent.memory.lessons[0].fault == "defender"
    assert "You crashed (fault: defender)" in model.calls[2][0][-1]["content"]
    assert "Slow down" not in model.calls[0][0][0]["content"]  # no lesson before the crash
    # Persisted as JSON by the caller, loaded into the next episode: the lesson is in its prompt.
    loaded = ReflectionMemory.model_validate_json(memory.model_dump_json())
    model2 = Scripted(['{"action": "SLOWER"}'])
    state2, _ = drive(model2, Road(steps=1), loaded)
    system = model2.calls[0][0][0]["content"]
    assert "Lessons from your earlier crashes:\n- " + lesson in system
    assert state2["steps"][0].info["lessons"] == [lesson]


def test_no_reflection_after_an_attacker_at_fault_crash_and_a_bad_lesson_stores_nothing():
    state, agent = drive(Scripted(['{"action": "IDLE"}']), Road(steps=5, crash_after=1, fault="attacker"))
    assert state["ended_by"] == "crash" and agent.memory.lessons == [] and state["reflections"] == []
    state, agent = drive(Scripted(['{"action": "IDLE"}', "{}"]), Road(steps=5, crash_after=1), action_format="constrained")
    assert agent.memory.lessons == [] and state["reflect_invalid"] == 1


def test_memory_retrieval_capacity_and_action_names():
    memory = ReflectionMemory(capacity=3)
    for i, situation in enumerate(["merge ramp on the right", "attacker cuts in ahead lane", "tailgater behind you",
                                   "attacker brakes ahead lane"]):
        memory.add(Lesson(lesson=f"lesson {i}", situation=situation))
    assert [le.lesson for le in memory.lessons] == ["lesson 1", "lesson 2", "lesson 3"]  # oldest dropped
    assert [le.lesson for le in memory.retrieve("an attacker ahead in your lane", 2)] == ["lesson 1", "lesson 3"]
    # Equal relevance: the newest first.
    assert [le.lesson for le in memory.retrieve("zzz", 3)] == ["lesson 3", "lesson 2", "lesson 1"]
    assert memory.retrieve("anything", 0) == []
    assert named_action("I pick lane left, not FASTER", ACTIONS) == "LANE_LEFT"
    assert named_action('{"action": "SLOWER"}', ACTIONS) == "SLOWER"
    assert named_action("IDLEness", ACTIONS) is None and named_action("go", ACTIONS) is None


@pytest.mark.slow
def test_embedded_model_drives_through_the_constrained_path(monkeypatch):
    """SmolLM2-135M on the CPU, a handful of steps: every decision is an admissible action reached
    through the JSON-schema constraint (no invalid replies), and the token cost per step is logged."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    from harness.providers import load_model
    from harness.spec import ModelSpec

    model = load_model(ModelSpec.parse("local/smollm2-135m"))
    usage, replies = Usage(), []

    async def generate(role, messages, config):
        out = await model.generate(messages, config)
        usage.add(out.usage)
        replies.append((out.text, out.constrained_by))
        return out

    road = Road(steps=4)
    t0 = time.perf_counter()
    state, _ = drive(generate, road, max_steps=4, policy_max_tokens=24, parse_attempts=1)
    wall = time.perf_counter() - t0
    asyncio.run(model.aclose())
    assert len(road.sent) == 4 and state["invalid_actions"] == 0
    assert all(a in ACTIONS for a in road.sent)
    assert all(by == "provider" for _, by in replies), replies
    per_step = (usage.prompt_tokens + usage.completion_tokens) / len(road.sent)
    print(f"\nembedded driver: {len(road.sent)} steps, {usage.prompt_tokens} prompt + {usage.completion_tokens} "
          f"completion tokens ({per_step:.0f}/step), {wall:.1f}s wall, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}")
