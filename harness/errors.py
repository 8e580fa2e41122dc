"""User-facing errors: one line that names the bad input and says how to fix it."""

from __future__ import annotations


class HarnessError(Exception):
    """Raised for bad input (unknown suite, malformed spec, missing file, bad corpus row).

    The CLI prints `error: <message>` and exits non-zero; no traceback, nothing recorded is lost.
    """
