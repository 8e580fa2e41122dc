"""ProactBench's offline protocol in Inspect logs (`harness.inspect_format.InspectAdapter`, entry
point `proact` under `harness.inspect`).

Export: one Inspect sample per dialogue; its messages are the trigger turns, each user message
followed by the reply of the model under test (`source` "generate"), every message carrying its
`turn` in its metadata; the score is the dialogue's labels (value: the weighted score and the count
of each label, answer: one label per trigger, explanation: the judge's rationale and evidence).

Import (`harness score --from-inspect LOG --suite proact`): the Inspect sample's id is the corpus
row's `unique_id_eval`; the reply at trigger turn t is the assistant message whose metadata says
`turn: t` or, in a log whose messages carry no turns, the assistant message after the t-th user
message (the whole dialogue, turn by turn). The rubric and the curated history come from the
corpus row, never from the log, and the user message at each trigger turn must be the corpus's: a
log of another corpus is refused instead of being judged against the wrong rubric.

May import: `harness`, `environments.proact`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import JsonValue

from corpora.proact_types import CorpusRow
from environments.proact.scoring import Reply
from environments.proact.suite import regenerated_row, sorted_triggers
from harness.errors import HarnessError
from harness.inspect_format import InspectAdapter, InspectSample, Message, ScoreView
from harness.suite import Sample, dump_payload

WEIGHTS = {"PASS": 1.0, "PARTIAL": 0.5, "FAIL": 0.0}  # the weighted score of proact's metrics


class ProactInspectAdapter(InspectAdapter):
    reads_inspect: ClassVar[bool] = True

    def messages(self, output: Mapping[str, Any], model: str | None) -> list[Message]:
        types = {tp.get("turn"): (tp.get("evaluation_rubric") or {}).get("type")
                 for tp in output.get("trigger_points") or [] if isinstance(tp, dict)}
        out: list[Message] = []
        for rec in output.get("turn_records") or []:
            turn = rec.get("turn")
            out.append(Message("user", rec.get("user_message") or "", "input", {"turn": turn}))
            meta: dict[str, JsonValue] = {"turn": turn, "trigger_type": types.get(turn)}
            if rec.get("original_assistant_response"):
                meta["original_assistant_response"] = rec["original_assistant_response"]
            if rec.get("error"):
                meta["error"] = rec["error"]
            # A failed reply is an empty message with its error beside it: the turn stays visible.
            out.append(Message("assistant", rec.get("assistant_response") or "", "generate", meta))
        return out

    def score_view(self, scores: Mapping[str, Any]) -> ScoreView:
        triggers = [t for t in scores.get("triggers") or [] if isinstance(t, dict)]
        if not triggers:  # a dialogue that failed as a whole: every expected trigger is an ERROR
            triggers = [{"turn": None, "type": t, "label": "ERROR"} for t in scores.get("expected_types") or []]
        counts = Counter(str(t.get("label")) for t in triggers)
        graded = sum(counts[g] for g in WEIGHTS)
        weighted = sum(WEIGHTS[g] * counts[g] for g in WEIGHTS) / graded if graded else None
        value: dict[str, str | int | float | bool | None] = {"weighted_score": weighted}
        value |= {label.lower(): counts[label] for label in ("PASS", "PARTIAL", "FAIL", "SKIPPED", "ERROR")}
        answer = "; ".join(f"turn {t.get('turn')} {t.get('type')}: {t.get('label')}" for t in triggers)
        lines = []
        for v in scores.get("verdicts") or []:
            res = v.get("evaluation_result") or {} if isinstance(v, dict) else {}
            why = res.get("rationale") or res.get("error") or ""
            quote = f' Evidence: "{res["evidence"]}"' if res.get("evidence") else ""
            lines.append(f"turn {v.get('turn')} ({v.get('type')}): {res.get('score') or res.get('status')} -- {why}{quote}")
        return ScoreView(value=value, answer=answer or None, explanation="\n\n".join(lines) or None)

    def transcript(self, sample: InspectSample, data: Sample[CorpusRow], source: str) -> dict[str, JsonValue]:
        """The transcript `ProactOfflineSuite.solve` would have written with these replies (as
        recorded: the harness's import writes it into the run's records)."""
        row = data.data
        by_turn = {t.turn: t for t in row.turn_records}
        logged = _replies_by_turn(sample)
        replies: dict[int, Reply] = {}
        for tp in sorted_triggers(row):
            turn = tp.turn
            user, reply = logged.get(turn, (None, None))
            expected = by_turn[turn].user_message
            if user is not None and user.strip() != expected.strip():
                raise HarnessError(
                    f"{source}: sample {sample.id} epoch {sample.epoch}: the user message at turn {turn} is not the "
                    "corpus's: the log was made from another corpus; pass --corpus with the one it was made from")
            # No reply: judged as an ERROR label, as a failed reply is in a harness run.
            replies[turn] = (reply, None) if reply is not None else (
                None, f"assistant: {sample.error}" if sample.error else "assistant: no reply at this turn in the Inspect sample")
        return dump_payload(regenerated_row(row, replies))


def _replies_by_turn(sample: InspectSample) -> dict[int, tuple[str | None, str | None]]:
    """turn -> (user message, assistant reply): by the messages' own `turn` metadata when they
    carry it (an exported harness run), else by position (the k-th user message is turn k).
    A reply that is empty and carries an error is no reply."""
    out: dict[int, tuple[str | None, str | None]] = {}
    marked = any(isinstance(m.metadata.get("turn"), int) for m in sample.messages)
    position, user = 0, None
    for m in sample.messages:
        if m.role == "user":
            position += 1
            user = m.content
            continue
        if m.role != "assistant":
            continue
        turn = m.metadata.get("turn") if marked else position
        if not isinstance(turn, int) or turn in out:
            continue
        failed = not m.content and m.metadata.get("error")
        out[turn] = (user, None if failed else m.content)
    return out
