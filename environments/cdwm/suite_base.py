"""What every CDWM suite shares (web now; household and science later): choosing the agent
(`--agent react|cdwm`), the model roles it needs, running one task episode in an environment
behind the CDWM protocol, and scoring it with the CDWM metrics and composite reward.

A concrete suite says where its tasks come from (`load_samples`), how to build its environment
(`make_env`, called on the environment's own thread) and which action mask its action space has.
"""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from agents import cdwm as cdwm_agent
from agents import react as react_agent
from agents.episode import AgentConfig, ThreadedEnv
from environments.cdwm.env import CdwmEnvironment
from environments.cdwm.mask import ActionMask
from environments.cdwm.metrics import cdwm_counts, cdwm_metrics, episode_scores, failure_scores
from environments.cdwm.reward import composite_reward
from harness.errors import HarnessError
from harness.providers.base import GenerateConfig
from harness.records import Metric, SampleRecord
from harness.suite import Sample, SampleContext, SampleOutcome, Suite

AGENTS = {"react": react_agent, "cdwm": cdwm_agent}
JUDGE_CONFIG = GenerateConfig(temperature=0.0, max_tokens=16)  # the evaluators' judges answer in a word or two
JUDGE_TIMEOUT_S = 900.0


class CdwmSuite(Suite):
    headline_metric = "success_rate"
    mask: ActionMask | None = None
    world_model_help: str | None = None  # how this world names entities and relations (world-model prompt)
    uses_judge = False  # True when the environment's evaluator may ask a judge model (role `judge`)

    def __init__(self, *, agent: str = "react", max_steps: int = 10, obs_chars: int = 6000,
                 policy_max_tokens: int = 96, parse_attempts: int = 2, candidates: int = 3, horizon: int = 2,
                 confidence_threshold: float = 0.5, cost_threshold: float = 0.0, risk_lambda: float = 1.0,
                 wm_max_tokens: int = 160, wm_attempts: int = 2, parallel_envs: int = 1) -> None:
        if agent not in AGENTS:
            raise HarnessError(f"--agent {agent}: unknown agent; choose one of {', '.join(AGENTS)}")
        checks = {"max_steps": max_steps >= 1, "candidates": candidates >= 1, "horizon": horizon in (1, 2),
                  "confidence_threshold": 0 <= confidence_threshold <= 1, "parse_attempts": parse_attempts >= 1,
                  "wm_attempts": wm_attempts >= 1, "obs_chars": obs_chars >= 200, "parallel_envs": parallel_envs >= 1}
        for name, ok in checks.items():
            if not ok:
                raise HarnessError(f"--suite-option {name}: out of range (max_steps/candidates/attempts >= 1, "
                                   "horizon 1 or 2, confidence_threshold in [0, 1], obs_chars >= 200, parallel_envs >= 1)")
        self.agent = agent
        # The CDWM agent asks a world model; by default it is the model under test (`--world-model` names another).
        self.roles = ("assistant",) + (("world_model",) if agent == "cdwm" else ()) + (("judge",) if self.uses_judge else ())
        # Environments are heavy (a browser each): at most this many episodes run at once.
        self.parallel_envs = parallel_envs
        self._env_slots: asyncio.Semaphore | None = None
        self.config = AgentConfig(max_steps=max_steps, obs_chars=obs_chars, policy_max_tokens=policy_max_tokens,
                                  parse_attempts=parse_attempts, candidates=candidates, horizon=horizon,
                                  confidence_threshold=confidence_threshold, cost_threshold=cost_threshold,
                                  risk_lambda=risk_lambda, wm_max_tokens=wm_max_tokens, wm_attempts=wm_attempts,
                                  mask=self.mask, world_model_help=self.world_model_help)

    @abstractmethod
    def make_env(self, sample: Sample, judge: Callable[[str], str] | None) -> CdwmEnvironment:
        """A fresh environment for one task (called on the environment's thread). `judge(prompt)`
        asks the run's judge model (blocking; for evaluators that need one), None without the role."""

    def _judge_for(self, ctx: SampleContext) -> Callable[[str], str] | None:
        """A blocking judge for code on the environment's thread: it hands the call to the run's
        event loop (so caching, retries and accounting are the runner's) and waits for it."""
        if "judge" not in ctx.models:
            return None
        loop = asyncio.get_running_loop()

        def judge(prompt: str) -> str:
            call = ctx.generate("judge", [{"role": "user", "content": prompt}], JUDGE_CONFIG)
            return asyncio.run_coroutine_threadsafe(call, loop).result(timeout=JUDGE_TIMEOUT_S).text

        return judge

    def task_of(self, sample: Sample) -> dict[str, Any]:
        return sample.data

    def intent_of(self, sample: Sample) -> str:
        return str(self.task_of(sample)["intent"])

    async def run_sample(self, sample: Sample, ctx: SampleContext) -> SampleOutcome:
        if self._env_slots is None:
            self._env_slots = asyncio.Semaphore(self.parallel_envs)
        async with self._env_slots:
            return await self._run_episode(sample, ctx)

    async def _run_episode(self, sample: Sample, ctx: SampleContext) -> SampleOutcome:
        module = AGENTS[self.agent]
        judge = self._judge_for(ctx)
        env = await ThreadedEnv.create(lambda: self.make_env(sample, judge))
        errors: list[str] = []
        t0 = time.perf_counter()
        try:
            obs = await env.reset(self.task_of(sample))
            graph = module.build(ctx.generate, env, self.config)
            state = await module.run(graph, self.intent_of(sample), obs, self.config)
            errors += state.get("errors", [])
            evaluation = await env.evaluate()
        finally:
            await env.close()
        steps = [asdict(s) for s in state["steps"]]
        # Tokens as generated, also for calls served from the cache (their recorded usage).
        tokens = sum(c.usage.prompt_tokens + c.usage.completion_tokens for c in ctx.calls)
        scores = episode_scores(steps, evaluation, tokens, state.get("ended_by", ""))
        reward = composite_reward(scores)
        scores |= {"reward": reward.value, "reward_label": reward.label, "reward_components": reward.metadata["components"]}
        output = {
            "task_id": self.task_of(sample).get("task_id", sample.id), "intent": self.intent_of(sample),
            "agent": self.agent, "ended_by": state.get("ended_by"), "abstain_reason": state.get("abstain_reason"),
            "evaluation": evaluation, "steps": steps, "tokens": tokens, "episode_s": round(time.perf_counter() - t0, 3),
            "token_usage": {role: u.model_dump() for role, u in sorted(ctx.usage.items())},
            "mask": self.mask.name if self.mask else None,
        }
        return SampleOutcome(output=output, scores=scores, errors=errors)

    def scores_on_failure(self, sample: Sample) -> dict[str, Any]:
        return failure_scores() | {"reward": 0.0, "reward_label": "ERROR", "reward_components": {}}

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        return cdwm_metrics(records, seed=seed)

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        return cdwm_counts(records)
