"""The prompt-derived checker: checks read from the prompt alone, measured against the hidden points."""

from __future__ import annotations

import pytest

from environments.prograf.check import prompt as prompt_checks
from environments.prograf.check.prompt import agreement, coverage, point_key, read_prompt
from environments.prograf.check.verify import verify
from environments.prograf.generate.build import CORPUS
from environments.prograf.task import CATEGORIES, load_tasks


@pytest.fixture(scope="module")
def corpus():
    return load_tasks(CORPUS)


def sample(corpus, source: str, per_category: int):
    return [t for c in CATEGORIES for t in [t for t in corpus if t.category == c and t.source == source][:per_category]]


def test_checks_come_from_the_prompt_alone(corpus):
    for category in CATEGORIES:
        a, b = [t for t in corpus if t.category == category][:2]
        # the same prompt over another task's hidden spec and points yields the same checks
        swapped = a.model_copy(update={"spec": b.spec, "points": b.points})
        prompt_checks._read.cache_clear()
        first = read_prompt(a)
        prompt_checks._read.cache_clear()
        assert read_prompt(swapped) == first and first.points


def test_generated_prompts_recover_every_hidden_point(corpus):
    cov = coverage(sample(corpus, "generated", 3))
    assert {c: row["coverage"] for c, row in cov.items()} == dict.fromkeys((*CATEGORIES, "all"), 1.0)


def test_values_with_a_decimal_point_do_not_cut_the_circuit_short(corpus):
    task = next(t for t in corpus if t.category == "circuit" and "2.2kΩ" in t.prompt and "closed loop" in t.prompt)
    checks = {vp.check for vp in read_prompt(task).points}
    assert {"topology", "series", "connected"} <= checks


def test_handwritten_prompts_yield_fewer_checks_but_only_true_ones(corpus):
    tank = next(t for t in corpus if t.id == "circuit-hw15")  # an LC tank, "L1 in parallel with C1 from the tank node"
    derived = read_prompt(tank)
    assert "topology" not in {vp.check for vp in derived.points}  # its topology is not read
    assert coverage([tank])["circuit"]["coverage"] < 1.0
    for ref in tank.reference:
        assert verify(derived, ref.format, ref.code).passed  # type: ignore[arg-type]


def test_a_prompt_in_no_known_phrasing_yields_no_checks_and_no_error(corpus):
    for category in CATEGORIES:
        task = next(t for t in corpus if t.category == category)
        odd = task.model_copy(update={"prompt": "Draw something nice, please."})
        assert read_prompt(odd).points == []


def test_agreement_with_the_hidden_verifier(corpus):
    rows = agreement(sample(corpus, "generated", 1))
    # every reference passes the prompt checks and every structural mutant is caught
    assert rows["all"]["fp"] == 0 and rows["all"]["fn"] == 0 and rows["all"]["tp"] > 20
    assert rows["all"]["precision"] == rows["all"]["recall"] == 1.0


def test_point_key_ignores_ids_and_argument_order(corpus):
    task = next(t for t in corpus if t.category == "geometry")
    seg = next(vp for vp in task.points if vp.check == "segment")
    flipped = seg.model_copy(update={"id": "vp99", "args": seg.args[::-1]})
    assert point_key(seg, task.spec) == point_key(flipped, task.spec)


def test_the_report_command(corpus, tmp_path):
    from typer.testing import CliRunner

    from environments.prograf.commands import prograf_app
    from environments.prograf.generate.build import corpus_text

    small = tmp_path / "tasks.jsonl"
    small.write_text(corpus_text(sample(corpus, "generated", 1)), encoding="utf-8")
    result = CliRunner().invoke(prograf_app, ["prompt-checks", "--corpus", str(small)])
    assert result.exit_code == 0, result.output
    assert [line.split()[:2] for line in result.output.splitlines()[1:]] == [
        [c, "1.000"] for c in (*CATEGORIES, "all")]
