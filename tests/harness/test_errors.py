"""`harness.errors.invalid`: a pydantic ValidationError as the one line a user gets."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, ValidationError

from harness.errors import invalid


class Turn(BaseModel):
    turn: int = Field(ge=1)
    text: str


class Row(BaseModel):
    turns: list[Turn]


def _error(value: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        Row.model_validate(value)
    return caught.value


def test_the_first_error_names_the_input_the_field_the_message_the_value_and_the_fix():
    line = invalid(_error({"turns": [{"turn": 1, "text": "a"}, {"turn": 0, "text": "b"}]}), "rows.jsonl:3", "fix the row")
    assert line == ("rows.jsonl:3: field `turns[1].turn` is invalid: input should be greater than or equal to 1 "
                    "(got 0); fix the row")
    missing = invalid(_error({"turns": [{"turn": 2}]}), "--suite-option turns", "give it a text")
    assert missing == "--suite-option turns: field `turns[0].text` is missing; give it a text"
