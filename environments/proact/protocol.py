"""ProactBench's offline protocol: what each role sees, and the judge's answer format.

Information asymmetry is the point of the benchmark, so each prompt is built here from only the
fields that role may see: the assistant gets the conversation; the judge gets the rubric, the
conversation and the reply -- never persona, style, category or blueprint (the blueprint id
encodes the style).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import jsonschema
from pydantic import JsonValue

from corpora.proact_types import GRADES, Rubric, TurnRecord
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig

# The reference settings for the model under test.
ASSISTANT_CONFIG = GenerateConfig(temperature=0.7, max_tokens=8192)
JUDGE_ATTEMPTS = 3  # bounded: after this many unparseable answers the trigger is SKIPPED

JUDGE_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "required": ["score", "rationale", "evidence"],
    "properties": {
        "score": {"enum": [*GRADES]},
        "rationale": {"type": "string", "minLength": 1},
        "evidence": {"type": "string"},
    },
}
_JUDGE_VALIDATOR = jsonschema.Draft202012Validator(JUDGE_SCHEMA)
# What the judge's decoding is held to (providers that can: constrained decoding, structured
# outputs): the verdict's schema with the label first, no other keys, and bounded strings -- two
# sentences and one quote fit in 400 characters each; a string with no bound lets a small judge
# write until max_tokens and never close the object.
JUDGE_DECODE_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "required": ["score", "rationale", "evidence"],
    "additionalProperties": False,
    "properties": {
        "score": {"enum": [*GRADES]},
        "rationale": {"type": "string", "minLength": 1, "maxLength": 400},
        "evidence": {"type": "string", "maxLength": 400},
    },
}
# A verdict (label, two sentences, one quote) fits well inside 512 tokens; more is rambling.
JUDGE_CONFIG = GenerateConfig(temperature=0.0, max_tokens=512, json_schema=JUDGE_DECODE_SCHEMA)


def history_messages(turns: Sequence[TurnRecord], turn: int) -> list[ChatMessage]:
    """Every earlier turn of `turns` (a dialogue's `turn_records`) as user/assistant pairs with its
    replies (the curated ones offline), then turn `turn`'s user message. No system prompt."""
    by_turn = {t.turn: t for t in turns}
    messages: list[ChatMessage] = []
    for t in range(1, turn):
        rec = by_turn[t]
        messages.append({"role": "user", "content": rec.user_message})
        messages.append({"role": "assistant", "content": rec.assistant_response})
    messages.append({"role": "user", "content": by_turn[turn].user_message})
    return messages


_TYPE_MEANING = {
    "EMERGENT": "infer an unstated need from a single detail the user disclosed",
    "CRITICAL": "combine several details the user disclosed earlier into a useful conclusion they did not ask for",
    "RECOVERY": "after the user's task is done, offer grounded, forward-looking value",
}


def judge_messages(rubric: Rubric, history: list[ChatMessage], reply: str) -> list[ChatMessage]:
    """The judge's prompt: rubric + conversation + the reply under evaluation, nothing else."""
    convo = render_conversation(history)
    kind = rubric.type
    text = (
        "You grade whether an AI assistant was proactive at one point of a conversation.\n"
        f"Trigger type: {kind} -- the assistant should {_TYPE_MEANING[kind]}.\n\n"
        f"PASS if: {rubric.pass_criteria}\n\n"
        f"PARTIAL if: {rubric.partial_criteria}\n\n"
        f"FAIL if: {rubric.fail_criteria}\n\n"
        "=== Conversation so far ===\n"
        f"{convo}\n\n"
        "=== Assistant reply to grade ===\n"
        f"{reply}\n\n"
        "Answer with one JSON object and nothing else:\n"
        '{"score": "PASS" | "PARTIAL" | "FAIL", "rationale": "<why, in one or two sentences>", '
        '"evidence": "<a verbatim quote from the assistant reply>"}'
    )
    return [{"role": "user", "content": text}]


class JudgeFormatError(ValueError):
    pass


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def render_conversation(history: list[ChatMessage]) -> str:
    """A conversation as plain text for a grader's prompt (judge, auditor)."""
    return "\n\n".join(f"[{m['role'].upper()}]\n{m['content']}" for m in history)


def json_objects(text: str) -> Iterator[tuple[Any, str | None]]:
    """Candidate JSON values in a model's answer -- each fenced block, then the whole text, cut
    to its outermost braces -- as (value, None) or (None, why it did not parse)."""
    for cand in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        start, end = cand.find("{"), cand.rfind("}")
        if start < 0 or end <= start:
            continue
        try:
            yield json.loads(cand[start : end + 1]), None
        except json.JSONDecodeError as exc:
            yield None, f"invalid JSON: {exc.msg}"


def parse_judge(text: str) -> dict[str, str]:
    """The judge's JSON object, validated; raises JudgeFormatError saying what was wrong."""
    last_error = "no JSON object found"
    for obj, problem in json_objects(text):
        if problem:
            last_error = problem
            continue
        if isinstance(obj, dict) and isinstance(obj.get("score"), str):
            obj["score"] = obj["score"].strip().upper()
        error = jsonschema.exceptions.best_match(_JUDGE_VALIDATOR.iter_errors(obj))
        if error is None:
            return {k: obj[k] for k in ("score", "rationale", "evidence")}
        where = ".".join(str(p) for p in error.absolute_path) or "(object)"
        last_error = f"schema: `{where}` {error.message}"
    raise JudgeFormatError(last_error)


_ELLIPSIS = re.compile(r"\s*(?:\u2026|\.\.\.)\s*")
_QUOTED = re.compile(r"[\u201c\"]([^\u201d\"]{8,})[\u201d\"]")


def _normalise(s: str) -> str:
    """Words only: markdown, punctuation, quote styles, case and spacing do not make a quote
    less verbatim (judges quote rendered text, responses carry `**bold**` and bullets)."""
    return " ".join(re.findall(r"[^\W_]+", s.lower()))


def evidence_is_verbatim(evidence: str, reply: str) -> bool:
    """Whether the evidence is quoted from the reply (whitespace, case and quote marks aside).
    Evidence that wraps quotes in commentary -- `"X" and "Y" show ...` -- counts when every
    quoted part is in the reply."""
    text = _normalise(reply)
    quoted = _QUOTED.findall(evidence) or [evidence]
    # An ellipsis marks an elision inside a quote: each fragment must be in the reply.
    parts = [f for q in quoted for f in _ELLIPSIS.split(q) if _normalise(f)]
    return bool(parts) and all(f" {_normalise(p)} " in f" {text} " for p in parts)
