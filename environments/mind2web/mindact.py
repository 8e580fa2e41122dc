"""MindAct's multiple-choice protocol (Deng et al., 2023), the pieces `env.py` plays it with.

MindAct does not show a step's ranked candidates at once. Its evaluation code puts the top-k
candidates (k = 50 in the paper) in a queue -- shuffled -- and asks multiple-choice questions of
up to five: option A is "None of the above", B, C, ... the candidates at the head of the queue,
and the answer names a letter and, for an element, its operation (CLICK, TYPE value, SELECT
value). The asked candidates leave the queue; the one chosen goes back at its tail, to meet the
candidates not asked yet and the other winners. Questions go on while more than one candidate is
queued. The step's prediction is the last element chosen, with the operation of that answer; it is
None -- the step scores 0 on every metric -- when the queue ran empty (every remaining group said
"None of the above"), when no answer ever chose an element, or when the last answer after the
last choice named no option (MindAct's code drops its prediction on an out-of-range letter). A
step with one candidate or none asks nothing and predicts None.

Here each question is one environment step: the observation carries the question, the answer is
one action -- `click [B]`, `type [B] [text]`, `select [B] [option]`, or `none` (also any action on
letter A) -- and the environment moves to the next gold step when the step's queue is decided.
`Tournament` is that queue, with the record of every question (its group, the answer, the element
chosen, whether a target was still in play after it, and the model calls and tokens it cost).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from typing import TypedDict

from harness.environment import ALL, NONE, ActionMask

NONE_OF_THE_ABOVE = "A"
LETTERS = "BCDEFGHIJKLMNOPQRSTUVWXYZ"  # option letters of the candidates (A is "None of the above")
MAX_GROUP = len(LETTERS)
MINDACT_CLASSES = ("click", "type", "select", "none")
MINDACT_HELP = ("Answer with the letter of one option of the question:\n"
                "click [B]: click the element of option B\n"
                "type [B] [text]: type the text into the field of option B\n"
                "select [B] [option]: choose that option of the drop-down of option B\n"
                "none: none of the above (option A)")
# `none` changes nothing; the elements' classes are those of the single-round protocol.
MINDACT_MASK = ActionMask({"click": ALL, "type": NONE, "select": NONE, "none": NONE}, name="mind2web-mindact")
# `none` (or `none [A]`), `click [B]`, `type [B] [text]` / `select [B] [option]` (a value without brackets).
_CHOICE = re.compile(r"^\s*(?:(none)(?:\s*\[\s*A?\s*\])?|(click)\s*\[\s*([A-Za-z])\s*\]"
                     r"|(type|select)\s*\[\s*([A-Za-z])\s*\](?:\s*\[([^\[\]\n]*)\])?)\s*$", re.I)


def choice_pattern(group_size: int) -> str:
    """The answer syntax as a regex (constrained decoding): `none`, or an operation on one of the
    group's letters."""
    last = LETTERS[min(group_size, MAX_GROUP) - 1]
    return rf"^(none|click \[[B-{last}]\]|(type|select) \[[B-{last}]\] \[[^\[\]\n]{{1,80}}\])$"


def parse_choice(action: str) -> tuple[str, str, str] | None:
    """(letter, OP, value) of an answer -- letter "A" for "None of the above" -- or None when the
    answer is not one."""
    m = _CHOICE.match(action)
    if not m:
        return None
    if m[1]:
        return NONE_OF_THE_ABOVE, "", ""
    op, letter, value = (m[2], m[3], "") if m[2] else (m[4], m[5], m[6] or "")
    if letter.upper() == NONE_OF_THE_ABOVE:
        return NONE_OF_THE_ABOVE, "", ""
    return letter.upper(), op.upper(), value.strip()


def queue_order(bids: list[str], order: str, key: str) -> list[str]:
    """The candidates in the order they are asked: `ranked` keeps the ranker's order; `shuffled`
    (MindAct's evaluation) shuffles them with a seed drawn from `key` (the step's action_uid), so a
    rerun asks the same questions."""
    if order == "ranked":
        return list(bids)
    out = list(bids)
    random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16)).shuffle(out)
    return out


def rounds_needed(n: int, group_size: int) -> int:
    """Questions a step with `n` candidates takes when every answer chooses an element (the most
    it can take: an answer of "None of the above" only shortens the queue)."""
    rounds = 0
    while n > 1:
        n = n - min(group_size, n) + 1
        rounds += 1
    return rounds


class RoundRecord(TypedDict):
    """A `Round` as the step's record keeps it (`evaluate()["step_results"][i]["rounds"]`)."""

    group: list[str]
    answer: str
    chose: str | None
    operation: str
    valid: bool
    target_asked: bool
    target_alive: bool
    calls: int
    tokens: int


@dataclass
class Round:
    """One question of a step and its answer."""

    group: list[str]  # backend_node_ids asked, as options B, C, ...
    answer: str  # the action as written
    chose: str | None  # the element chosen (None: "None of the above" or no valid answer)
    operation: str  # "OP value" of the answer ("" when no element was chosen)
    valid: bool  # the answer named an option of the question
    target_asked: bool  # a target was among the options
    target_alive: bool  # a target is still queued after the answer
    calls: int = 0  # model calls since the previous answer (the policy's asks and re-asks, a world model's)
    tokens: int = 0  # their prompt + completion tokens

    def to_dict(self) -> RoundRecord:
        return {"group": list(self.group), "answer": self.answer, "chose": self.chose, "operation": self.operation,
                "valid": self.valid, "target_asked": self.target_asked, "target_alive": self.target_alive,
                "calls": self.calls, "tokens": self.tokens}


@dataclass
class Tournament:
    """One step's queue of candidates and the questions asked of it."""

    queue: list[str]
    group_size: int
    targets: set[str]
    rounds: list[Round] = field(default_factory=list)
    prediction: tuple[str, str, str] | None = None  # (bid, OP, value) of the last element chosen

    @property
    def over(self) -> bool:
        return len(self.queue) <= 1

    def group(self) -> list[str]:
        return self.queue[: self.group_size]

    def answer(self, action: str, calls: int = 0, tokens: int = 0) -> Round:
        """Play one answer to the current question."""
        group = self.group()
        self.queue = self.queue[len(group):]
        parsed = parse_choice(action)
        chose, operation, valid = None, "", parsed is not None
        if parsed is not None and parsed[0] != NONE_OF_THE_ABOVE:
            i = LETTERS.index(parsed[0]) if parsed[0] in LETTERS else len(group)
            if i < len(group):
                chose = group[i]
                self.queue.append(chose)
                self.prediction = (chose, parsed[1], parsed[2])
                operation = f"{parsed[1]} {parsed[2]}".strip()
            else:
                valid = False
        if not valid:
            self.prediction = None  # as MindAct's evaluation does on an answer naming no option
        record = Round(group, action, chose, operation, valid, bool(self.targets & set(group)),
                       bool(self.targets & set(self.queue)), calls, tokens)
        self.rounds.append(record)
        return record

    def winner(self) -> tuple[str, str, str] | None:
        """The step's prediction once the queue is decided (see the module docstring)."""
        return self.prediction if self.queue and self.prediction is not None else None
