import pytest

from corpora.proact_types import Rubric
from environments.proact.protocol import JudgeFormatError, evidence_is_verbatim, judge_messages, parse_judge


def test_valid_verdict_parses_even_inside_a_fence():
    text = 'Here you go:\n```json\n{"score": "partial", "rationale": "aware only", "evidence": "check the fan"}\n```'
    assert parse_judge(text) == {"score": "PARTIAL", "rationale": "aware only", "evidence": "check the fan"}


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("PASS, because it was helpful", "no JSON object"),
        ('{"score": "PASS", "rationale": "x"', "no JSON object"),
        ('{"score": "GREAT", "rationale": "x", "evidence": "y"}', "score"),
        ('{"score": "PASS", "evidence": "y"}', "rationale"),
        ('{"score": "PASS", "rationale": "", "evidence": "y"}', "rationale"),
        ('{"score": "PASS", "rationale": "x", "evidence": 3}', "evidence"),
        ('{"score": PASS}', "invalid JSON"),
    ],
)
def test_malformed_verdicts_are_rejected_with_the_reason(text, fragment):
    with pytest.raises(JudgeFormatError) as info:
        parse_judge(text)
    assert fragment in str(info.value)


def test_evidence_must_be_in_the_reply():
    reply = "Sure.  You should also \u201cback up the photos\u201d first."
    assert evidence_is_verbatim('"back up   the Photos"', reply)
    assert not evidence_is_verbatim("wipe the drive", reply)
    assert not evidence_is_verbatim("", reply)


def test_judge_prompt_holds_rubric_and_reply_but_no_persona_or_style():
    rubric = Rubric(type="EMERGENT", pass_criteria="P-CRIT", partial_criteria="PA-CRIT", fail_criteria="F-CRIT")
    history = [{"role": "user", "content": "hello there"}]
    [msg] = judge_messages(rubric, history, "REPLY-TEXT")
    for needle in ("P-CRIT", "PA-CRIT", "F-CRIT", "hello there", "REPLY-TEXT", "EMERGENT"):
        assert needle in msg["content"]
    for forbidden in ("style", "persona", "blueprint"):
        assert forbidden not in msg["content"].lower()
