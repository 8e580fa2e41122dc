"""`harness describe` prints a suite's contract as written: its texts are not Rich markup."""

from __future__ import annotations

from rich.console import Console

from harness.cli import info_cmds


def test_bracketed_text_in_an_option_description_prints_as_written(monkeypatch):
    # cdwm-mind2web's `protocol` option says replies look like `click [id]`; read as markup, "[id]"
    # was a style tag and vanished from the printed table.
    console = Console(record=True, width=400)
    monkeypatch.setattr(info_cmds, "out", console)
    info_cmds.describe_suite("cdwm-mind2web")
    text = console.export_text()
    assert "`click [id]`" in text and "`click [B]`" in text
