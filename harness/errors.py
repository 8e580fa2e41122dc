"""User-facing errors: one line that names the bad input and says how to fix it."""

from __future__ import annotations

from pydantic import ValidationError


class HarnessError(Exception):
    """Raised for bad input (unknown suite, malformed spec, missing file, bad corpus row).

    The CLI prints `error: <message>` and exits non-zero; no traceback, nothing recorded is lost.
    """


def field_path(loc: tuple[int | str, ...]) -> str:
    """`trigger_points[0].turn`: a pydantic error location written as a path."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def invalid(exc: ValidationError, source: str, fix: str) -> str:
    """The first error of `exc` as the one line a user gets, in the shape every loader's schema
    errors have (`corpora.validation`):

        SOURCE: field `PATH` is invalid: MESSAGE (got VALUE); FIX    (or `field `PATH` is missing; FIX`)

    `source` names the input (`file:line`, `--suite-option KEY=VALUE`, a recorded transcript),
    PATH is where in it, MESSAGE pydantic's (a validator's own words, without pydantic's
    "Value error, "), VALUE the bad value when it is a scalar (cut at 60 characters), and `fix`
    says what to do."""
    first = exc.errors(include_url=False)[0]
    path = field_path(first["loc"]) or "(top level)"
    if first["type"] == "missing":
        return f"{source}: field `{path}` is missing; {fix}"
    message = first["msg"].removeprefix("Value error, ")
    if message[1:2].islower():  # "Input should be ..." reads on after the colon; "URL ..." stays
        message = message[0].lower() + message[1:]
    value = first.get("input")
    got = f" (got {value!r:.60})" if value is None or isinstance(value, (str, int, float, bool)) else ""
    return f"{source}: field `{path}` is invalid: {message}{got}; {fix}"
