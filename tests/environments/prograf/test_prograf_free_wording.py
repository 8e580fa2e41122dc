"""Circuits described in free words: each part placed by a phrase naming its two nodes ("R1 (1kΩ)
top to left", "from the input to the middle node", "a load R1 across the output"). The checks read
from such prompts must state the hidden facts (coverage) and only true ones (agreement)."""

from __future__ import annotations

import pytest

from environments.prograf.check.prompt import agreement, coverage, paraphrase_netlist, read_prompt
from environments.prograf.generate.build import CORPUS
from environments.prograf.task import load_tasks


@pytest.fixture(scope="module")
def corpus():
    return load_tasks(CORPUS)


@pytest.mark.parametrize("task_id", ["circuit-hw06", "circuit-hw09", "circuit-hw10"])  # bridge, pi filter, T network
def test_handwritten_node_phrases_recover_the_whole_netlist(corpus, task_id):
    task = next(t for t in corpus if t.id == task_id)
    assert coverage([task])["circuit"]["coverage"] == 1.0
    assert "topology" in {vp.check for vp in read_prompt(task).points}
    rows = agreement([task])["circuit"]
    assert rows["fp"] == 0 and rows["fn"] == 0 and rows["tp"] == len(task.mutants)


def test_paraphrased_netlists_cover_the_hidden_spec(corpus):
    """The seeded netlist prompts reworded three ways ("from node 1 to ground", "between node 1 and
    node 2", "the resistor R2 (4.7kΩ): node 2 to ground") are read as fully as the template."""
    paraphrased = [p for t in corpus if (p := paraphrase_netlist(t))][:8]
    assert len(paraphrased) == 8 and all("connects node" not in p.prompt for p in paraphrased)
    assert any("4.7" in p.prompt for p in paraphrased)  # a decimal value does not end a clause
    cov = coverage(paraphrased)["circuit"]
    assert cov["coverage"] == 1.0 and cov["extra"] == 0
    rows = agreement(paraphrased)["circuit"]
    assert rows["precision"] == rows["recall"] == 1.0


def test_a_half_placed_circuit_yields_no_connection_checks(corpus):
    """If one part has no node phrase, nothing is guessed: no connection or topology checks."""
    task = next(t for t in corpus if t.id == "circuit-hw10")
    cut = task.model_copy(update={"prompt": task.prompt.replace("R2 (1kΩ) from the middle node to the output", "R2 (1kΩ)")})
    checks = {vp.check for vp in read_prompt(cut).points}
    assert checks and not checks & {"connected", "series", "parallel_parts", "topology"}
