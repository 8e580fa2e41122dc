"""The foreign-style corpus (issue 39 item 3) and the verifier audit on it (item 4)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from environments.prograf.check.audit import ORDER, TARGET, Outcome, judge, run_audit
from environments.prograf.generate import foreign_geometry
from environments.prograf.generate.build import CORPUS
from environments.prograf.generate.foreign import FAULT_KINDS, Output, corpus, corpus_digest, generated, handwritten, links
from environments.prograf.task import GEOMETRY_RELATIONS
from environments.prograf.task import load_tasks
from harness.errors import HarnessError

# Cells where the verifier is known to miss a target, and the reading at fault. The test asserts the
# target everywhere else, and here that every failure is the known one (so a new failure still shows).
# Empty since session 22 fixed the one found (a <rect transform="skewX(...)"> read as a box).
KNOWN_SHORT: dict[tuple[str, str, str], str] = {}


@pytest.fixture(scope="module")
def tasks():
    return load_tasks(CORPUS)


@pytest.fixture(scope="module")
def outputs(tasks):
    return corpus(tasks)


@pytest.fixture(scope="module")
def audit():
    return run_audit()


def test_corpus_covers_every_category_and_format_with_pairs(outputs, tasks):
    correct = [o for o in outputs if o.fault is None]
    faulty = [o for o in outputs if o.fault is not None]
    assert len(correct) >= 300
    assert {(o.category, o.format) for o in correct} == set(ORDER) == {(o.category, o.format) for o in faulty}
    points = {t.id: {vp.id for vp in t.points} for t in tasks}
    assert all(o.fault in FAULT_KINDS and o.target in points[o.task_id] for o in faulty)
    # every generated correct output has its one-fault twin in the same style; every kind occurs in every category
    keys = {o.key.rsplit("/", 1)[0] for o in faulty if o.source != "hand-written"}
    assert {o.key.rsplit("/", 1)[0] for o in correct if o.source != "hand-written"} == keys
    for category in ("geometry", "circuit", "flowchart", "diagram"):
        assert {o.fault for o in faulty if o.category == category} == set(FAULT_KINDS), category
    assert sum(o.source == "hand-written" for o in outputs) >= 20


# the constructs the readers learned in session 28, and the cells where real writers use them
CONSTRUCTS = {
    "mermaid": ["--o", "--x", "==>", "-.->", "---->", "===", "-.-", '-- "', '== "', "--o|"],
    "dot": ["dir=back", "dir=both, arrowtail=none", "edge [arrowhead=none]", "edge [dir=none]", "xlabel="],
    "schemdraw-py": ["elm.Wire('-|')", ".delta(", "elm.Annotate()", "elm.LoopCurrent(", "elm.CurrentLabel(",
                     "elm.Tag()", "d.push()", ".hold()"],
}


def test_the_corpus_draws_links_and_wires_with_every_construct_the_readers_know(outputs):
    for fmt, marks in CONSTRUCTS.items():
        for faulty in (False, True):  # in correct outputs and in their faulty twins alike
            codes = [o.code for o in outputs if o.format == fmt and (o.fault is not None) == faulty]
            assert [m for m in marks if not any(m in c for c in codes)] == [], (fmt, faulty)
    # no task has an unlabelled pair of arrows each way: two-headed links are faults (an extra arrow), headless
    # arrows in a directed drawing too (the arrow lost)
    faulty = [o.code for o in outputs if o.fault is not None]
    assert all(any(m in c for c in faulty) for m in ("dir=both]", "arrowhead=none]"))
    assert sum(any(m in c for c in faulty) for m in ("<-->", "o--o", "x--x", "<==>")) >= 2  # few such faults
    linked = [o for o in outputs if o.source in ("link writer", "hand-written") and any(
        m in o.code for m in CONSTRUCTS.get(o.format, []))]
    assert sum(o.fault is None for o in linked) >= 40
    # the hard faults are in: a circle head at the wrong end, an arrow without its head, a head at each end
    whats = " | ".join(o.what for o in outputs if o.fault and o.source in ("link writer", "hand-written"))
    assert "drawn the other way" in whats and "without its head" in whats and "a head at each end" in whats
    assert "circle head" in whats
    assert "'|-' instead of '-|'" in whats and "Annotate not held" in whats


def test_second_writer_is_not_the_reference_writer(outputs, tasks):
    refs = {(t.id, s.format): s.code for t in tasks for s in t.reference}
    generated_correct = [o for o in outputs if o.fault is None and o.source != "hand-written"]
    assert not [o.key for o in generated_correct if o.code == refs[(o.task_id, o.format)]]
    styles = Counter((o.category, o.format, o.source) for o in generated_correct)
    assert all(sum(1 for c in styles if c[:2] == cell) >= 3 for cell in ORDER)  # several styles in every cell


def test_generation_is_deterministic(tasks):
    few = tasks[:8] + tasks[80:88] + tasks[160:168] + tasks[240:248]
    assert corpus_digest(generated(few)) == corpus_digest(generated(few))
    assert corpus_digest(links(tasks)) == corpus_digest(links(tasks))


def test_a_moved_point_breaks_its_relation_by_our_own_arithmetic(tasks):
    geometry = [t for t in tasks if t.category == "geometry"][:30]
    checked = 0
    for t in geometry:
        made = foreign_geometry.faults(t, "wrong_relation", random.Random(t.id))
        if made is None:
            continue
        fig, target, _ = made
        vp = t.point(target)
        if vp.check in GEOMETRY_RELATIONS:
            radius = dict(foreign_geometry.figure_of(t.spec, t.points).circles)
            assert foreign_geometry.relation_error(fig, vp, radius) >= foreign_geometry.VIOLATION[vp.check]
            assert (
                foreign_geometry.relation_error(foreign_geometry.figure_of(t.spec, t.points), vp, radius)
                < 0.05 * foreign_geometry.VIOLATION[vp.check]
            )
            checked += 1
    assert checked >= 20


def _output(task, fmt, code, fault=None, target=None) -> Output:
    return Output("k", task.id, task.category, fmt, "test", fault, target, "test", code)


def test_judge_tells_the_outcomes_apart(tasks):
    task = next(t for t in tasks if t.category == "flowchart")
    ref = next(s for s in task.reference if s.format == "dot")
    mutant = next(m for m in task.mutants if m.format == "dot")
    other = next(vp.id for vp in task.points if vp.id != mutant.target and not vp.depends_on and vp.check == "node")
    assert judge(task, _output(task, "dot", ref.code)).result == "pass"
    assert judge(task, _output(task, "dot", "digraph { a -> }")).result == "false_alarm"
    assert judge(task, _output(task, "dot", mutant.code, "missing_object", mutant.target)).result == "caught"
    assert judge(task, _output(task, "dot", ref.code, "missing_object", mutant.target)).result == "miss"
    assert judge(task, _output(task, "dot", mutant.code, "missing_object", other)).result == "other"
    bad: Outcome = judge(task, _output(task, "dot", "digraph { a -> }", "missing_object", mutant.target))
    assert bad.result == "other" and bad.why.startswith("format error")


def test_rates_meet_the_targets_except_where_known_short(audit):
    assert audit.outputs >= 600
    for cell in audit.cells:
        for result in ("false_alarm", "miss"):
            known = KNOWN_SHORT.get((cell.category, cell.format, result))
            if known is None:
                assert cell.meets(result), (
                    cell.category,
                    cell.format,
                    result,
                    cell.count(result),
                    [o.why for o in cell.outcomes if o.result == result][:3],
                )
            else:  # every failure here is the known reading fault: io nodes drawn as a skewed <rect>
                for o in cell.outcomes:
                    if o.result == result:
                        assert "skewX" in o.output.code and all(
                            "expected parallelogram" in part for part in o.why.split("; ")
                        ), o.why
    # a faulty output fails at its own point: other reasons stay under the target too
    assert all(cell.rate("other").value <= TARGET for cell in audit.cells)


def test_audit_is_fast(audit):
    assert audit.seconds < 60  # ~1,400 outputs, structural; measured ~5 s (docs/prograf.md)


def test_a_bad_manifest_entry_is_one_clear_error(tmp_path: Path, tasks):
    (tmp_path / "manifest.toml").write_text(
        '[[output]]\nfile = "x.dot"\ntask = "flowchart-000"\nformat = "dot"\nfault = "wrong_colour"\ntarget = "vp1"\n'
    )
    (tmp_path / "x.dot").write_text("digraph { a -> b }")
    with pytest.raises(HarnessError, match="fault 'wrong_colour': use one of missing_object"):
        handwritten(tasks, tmp_path)
    (tmp_path / "manifest.toml").write_text('[[output]]\nfile = "x.dot"\ntask = "nope-1"\nformat = "dot"\n')
    with pytest.raises(HarnessError, match="task 'nope-1' is not in the corpus"):
        handwritten(tasks, tmp_path)


def test_command_prints_the_table(tmp_path: Path, tasks):
    from environments.prograf.commands import prograf_app

    # the tasks the hand-written outputs are for (the manifest names them), so the small corpus reads it
    named = {o.task_id for o in handwritten(tasks)}
    small = tmp_path / "tasks.jsonl"
    small.write_text(
        "\n".join(json.dumps(t.model_dump(mode="json"), ensure_ascii=False) for t in tasks if t.id in named)
    )
    result = CliRunner().invoke(prograf_app, ["verifier-audit", "--corpus", str(small), "--markdown"])
    assert result.exit_code == 0, result.output
    mermaid = sum(o.category == "flowchart" and o.format == "mermaid" and o.fault is None
                  for o in corpus([t for t in tasks if t.id in named]))
    assert mermaid >= 6  # second writer, link writer and by hand
    assert f"| flowchart | mermaid | {mermaid} | 0 = 0.0%" in result.output
    assert "| all | all |" in result.output and "outputs (corpus sha256" in result.output
