"""The proposer's token charge of the registered `tokens` protocol (claims.PROTOCOL, docs/cdwm.md).

The planner check's proposer is a noisy expert that spends no tokens, but the registered protocol
charges, per step, what the embedded model's proposer (`agents.cdwm.PolicyProposer`) would have
cost there: the policy prompt it would be sent (`agents.episode.policy_messages`, as the CDWM
agent builds it: the task, the history, the observation, the admissible actions, asking for
`candidates` actions) as the embedded engine renders it (`harness.providers.embedded.
chat_prompt_ids`, the chat template of SmolLM2-135M-Instruct), plus a **nominal reply**: the JSON
object the constrained policy answers with, naming the actions the expert proposed, with an empty
thought (`{"thought": "", "actions": [...]}`), and the end-of-turn token. Counted with the embedded
model's tokenizer, loaded once per process.

What is not charged: the follow-up the embedded proposer is asked for each candidate in a lookahead
(`PolicyProposer.follow_up`): the expert proposes no imagined second step, so no arm takes one, and
charging it to the world-model arms alone would make them differ by more than their world model.
Hence the arms differ only by their world model's tokens and by the steps they take.

May import: `harness`, `agents`.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from agents.episode import policy_messages
from harness.agents_registry import AgentConfig, StepRecord
from harness.environment import Observation
from harness.messages import ChatMessage


@functools.cache
def embedded_tokenizer() -> Any:
    """The embedded model's tokenizer (its one home: `harness.providers.embedded`), once per process."""
    from transformers import AutoTokenizer

    from harness.providers.embedded import ensure_converted

    return AutoTokenizer.from_pretrained(str(ensure_converted()))


def nominal_reply(actions: list[str]) -> str:
    """The reply charged for a proposal: the constrained policy's JSON naming these actions."""
    return json.dumps({"thought": "", "actions": actions})


def count_tokens(messages: list[ChatMessage], reply: str) -> int:
    """Prompt tokens (the chat template, the assistant's turn opened) + the reply's + end of turn."""
    from harness.providers.base import GenerateConfig
    from harness.providers.embedded import END_OF_TURN, chat_prompt_ids

    tokenizer = embedded_tokenizer()
    prompt = chat_prompt_ids(tokenizer, messages, GenerateConfig())
    return len(prompt) + len(tokenizer.encode(reply + END_OF_TURN, add_special_tokens=False))


def proposal_charge(intent: str, obs: Observation, steps: list[StepRecord], cfg: AgentConfig, k: int,
                    actions: list[str]) -> int:
    """One step's charge: the policy prompt for `k` candidates, and the nominal reply naming `actions`."""
    return count_tokens(policy_messages(intent, obs, steps, cfg, k), nominal_reply(actions))
