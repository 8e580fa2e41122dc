"""CDWM's departures from the paper are printed with every suite: `harness describe` ends a CDWM
suite's description with each entry of `environments.cdwm.departures.DEPARTURES`."""

from __future__ import annotations

from typer.testing import CliRunner

from environments.cdwm.departures import DEPARTURES


def test_describe_prints_every_cdwm_departure():
    from harness.cli import app

    result = CliRunner().invoke(app, ["describe", "cdwm-web"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # the console wraps long lines
    head = text.split("roles:", 1)[0]  # the description line, before the roles
    assert len(DEPARTURES) == 3
    for i, d in enumerate(DEPARTURES, 1):
        for part in (d.paper, d.ours, d.why, d.effect):
            assert " ".join(part.split()) in head, f"departure {i}: {part!r} missing from `harness describe cdwm-web`"
        assert f"DEPARTURE {i} from the CDWM paper: the paper {d.paper}; we {d.ours}" in head
