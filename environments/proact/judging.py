"""Grading one reply against a rubric: one judge or several (`--judge-model a --judge-model b`).

Each judge gets the same prompt (rubric, conversation, reply -- never persona or style) and a
bounded number of attempts to produce a verdict that parses; several judges vote, the majority
label wins and a tie goes to the lower label (FAIL < PARTIAL < PASS), so disagreement never
flatters a model. Every judge's own verdict is kept.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable

from corpora.proact_types import GRADES, Rubric, Verdict
from environments.proact.judge_prompts import HARNESS_JUDGE, JudgeSettings
from environments.proact.protocol import JUDGE_ATTEMPTS, JudgeFormatError, evidence_is_verbatim
from harness.messages import ChatMessage
from harness.spec import panel_roles
from harness.structured import Attempt, ReplyProblem, reply_text, retry_reply, truncation
from harness.suite import SampleContext

LABEL_RANK = {grade: len(GRADES) - 1 - i for i, grade in enumerate(GRADES)}  # FAIL 0 < PARTIAL 1 < PASS 2


def judge_roles(models: Iterable[str]) -> list[str]:
    """`judge`, `judge_2`, `judge_3`, ... in order."""
    return panel_roles(models)


async def judge_once(ctx: SampleContext, role: str, prompt: list[ChatMessage], reply: str,
                     settings: JudgeSettings = HARNESS_JUDGE) -> Verdict:
    """One judge's verdict through the one structured-reply path (`harness.structured`)."""
    base = settings.config_for(ctx.models[role].name)

    async def ask(attempt: int, tried: list[Attempt]) -> dict[str, str]:
        # A repeated identical call would repeat the same bad answer (and hit the cache), so each
        # retry changes the seed, and samples where the first call decoded greedily; the prompt
        # stays the same.
        retry_temperature = base.temperature if base.temperature > 0 else 0.7
        config = base.merged(seed=ctx.seed + attempt, temperature=base.temperature if attempt == 0 else retry_temperature)
        out = await ctx.generate(role, prompt, config)
        try:
            return settings.prompt.parse(reply_text(out))
        except JudgeFormatError as exc:
            problem = ReplyProblem("no_json" if "no JSON" in str(exc) else "invalid", str(exc))
            raise truncation(out, problem) from None

    answer = await retry_reply(ask, JUDGE_ATTEMPTS)
    name = ctx.models[role].name
    if answer.error is not None:
        return Verdict(status="ERROR", model=name, error=f"{role}: {answer.error}")
    if answer.value is not None and answer.value.get("status") == "SKIPPED":
        # The reference's answer form lets the judge decline; the reference counts that SKIPPED.
        return Verdict(status="SKIPPED", score=None, rationale=answer.value["rationale"], evidence=None,
                       judge_attempts=len(answer.attempts), model=name)
    if answer.value is not None:
        # The parsed answer (a JSON object: score, rationale, evidence) becomes the verdict.
        verdict = {k: v for k, v in answer.value.items() if k != "status"}
        return Verdict.model_validate({
            "status": "EVALUATED", **verdict, "evidence_verbatim": evidence_is_verbatim(answer.value["evidence"], reply),
            "judge_attempts": len(answer.attempts), "model": name})
    return Verdict(status="SKIPPED", score=None, evidence=None, judge_attempts=len(answer.attempts),
                   failure_kind=answer.failure,
                   rationale=f"judge output did not parse after {JUDGE_ATTEMPTS} attempts: {answer.attempts[-1].problem}",
                   model=name)


def majority(verdicts: list[Verdict]) -> Verdict:
    """Combine judges' verdicts into one `evaluation_result`."""
    if len(verdicts) == 1:
        return verdicts[0]
    votes = Counter(v.score for v in verdicts if v.status == "EVALUATED" and v.score is not None)
    if not votes:
        status = "SKIPPED" if any(v.status == "SKIPPED" for v in verdicts) else "ERROR"
        errors = "; ".join(v.error or v.rationale or "" for v in verdicts)
        return Verdict(status=status, score=None, rationale=errors, evidence=None, judges=verdicts)
    top = max(votes.values())
    label = min((lab for lab, n in votes.items() if n == top), key=LABEL_RANK.__getitem__)
    spokesman = next(v for v in verdicts if v.score == label)
    return Verdict(status="EVALUATED", score=label, rationale=spokesman.rationale, evidence=spokesman.evidence,
                   evidence_verbatim=spokesman.evidence_verbatim, votes=dict(votes), judges=verdicts)


async def judge_reply(ctx: SampleContext, rubric: Rubric, history: list[ChatMessage],
                      reply: str, *, turn: int = 0, settings: JudgeSettings = HARNESS_JUDGE) -> Verdict:
    """Every judge's verdict on one reply, combined. `turn` is the trigger's turn (a prompt may name it)."""
    prompt = settings.prompt.build(turn, rubric, history, reply)
    verdicts = await asyncio.gather(*(judge_once(ctx, role, prompt, reply, settings) for role in judge_roles(ctx.models)))
    return majority(list(verdicts))
