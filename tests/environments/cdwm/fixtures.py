"""Helpers for the CDWM tests: a scripted in-process model (behind the real ManagedModel and
SampleContext, so accounting and caching are the runner's own) and a suite over the test shop."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

from pydantic import JsonValue

from environments.cdwm.suite_base import CdwmOptions, CdwmSuite
from environments.web.actions import WEB_MASK
from harness.calls import CallPolicy, ManagedModel
from harness.providers.base import GenerateConfig, ModelOutput, Usage
from harness.suite import Sample, SampleContext, parse_options
from tests.environments.cdwm.shop import TASKS, ShopEnv

Script = Callable[[str, list[dict[str, str]]], str]  # (role, messages) -> reply text


class ScriptedModel:
    """Answers by a script of the role and messages; logs every call."""

    def __init__(self, name: str, role: str, script: Script, log: list):
        self.name, self.role, self.script, self.log = name, role, script, log

    async def generate(self, messages: list[dict[str, str]], config: GenerateConfig) -> ModelOutput:
        text = self.script(self.role, messages)
        self.log.append((self.role, messages[-1]["content"], text))
        words = sum(len(m["content"].split()) for m in messages)
        return ModelOutput(text=text, usage=Usage(prompt_tokens=words, completion_tokens=len(text.split()), calls=1))

    async def aclose(self) -> None:
        pass


def scripted_context(script: Script, roles=("assistant", "world_model")) -> tuple[SampleContext, list]:
    log: list = []
    models = {r: ManagedModel(ScriptedModel(f"scripted/{r}", r, script, log), max_connections=4, policy=CallPolicy())
              for r in roles}
    return SampleContext(models, seed=0, overrides={}), log


def wm(delta: dict[str, JsonValue] | None = None, **kw: Any) -> str:
    return json.dumps({"created": [], "reversible": True, "confidence": 0.9} | (delta or {}) | kw)


BUY = {"created": ["order:1"], "relations_added": [{"subject": "order:1", "relation": "contains", "object": "product:3"}],
       "reversible": False, "irreversible_cost": 30, "confidence": 0.9}
ADD = {"attributes": [{"entity": "cart:1", "attribute": "item_count", "before": 0, "after": 1}],
       "relations_added": [{"subject": "cart:1", "relation": "contains", "object": "product:3"}], "confidence": 0.8}


class ShopSuite(CdwmSuite):
    name = "cdwm-test-shop"
    version = "0.0.1"
    mask = WEB_MASK

    def __init__(self, *, tasks: list[dict] | None = None, **options: Any):
        super().__init__(parse_options(self.name, CdwmOptions, options))
        self.tasks = tasks or TASKS
        self.envs: list[ShopEnv] = []

    def load_samples(self, corpus: str | None) -> list[Sample]:
        return [Sample(id=t["task_id"], data=t) for t in self.tasks]

    def make_env(self, sample: Sample, judge=None) -> ShopEnv:
        env = ShopEnv()
        self.envs.append(env)
        return env


def run_suite_sample(suite: ShopSuite, task_id: str, script: Script):
    ctx, log = scripted_context(script, suite.roles)
    sample = next(s for s in suite.load_samples(None) if s.id == task_id)
    outcome = asyncio.run(suite.run_sample(sample, ctx))
    return outcome, log, ctx
