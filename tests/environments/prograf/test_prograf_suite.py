"""Suite `prograf` end to end through the runner's core (`run_one`), with the synthetic fault-
injecting mock generator behind the real ManagedModel: metrics per category and component with
CIs, hostile replies recorded as failures, determinism, code extraction and the format option."""

from __future__ import annotations

import asyncio

import pytest

from environments.prograf.formats import extract_code
from environments.prograf.generate.build import CORPUS
from environments.prograf.mock import PROFILES, SyntheticGenerator, SyntheticProvider
from environments.prograf.suite import ProGrafOptions, ProGrafSuite
from environments.prograf.task import load_tasks
from harness.calls import CallPolicy, ManagedModel
from harness.errors import HarnessError
from harness.records import RunConfig
from harness.runner import run_one
from harness.spec import ModelSpec
from harness.suite import parse_options


@pytest.fixture(scope="module")
def corpus():
    return load_tasks(CORPUS)


def run(corpus, profile: str, per_category: int = 12, **options):
    suite = ProGrafSuite(parse_options("prograf", ProGrafOptions, {"render": False} | options))
    samples = suite.load_samples(None)
    chosen = [s for cat in ("geometry", "circuit", "flowchart", "diagram")
              for s in [x for x in samples if x.data["category"] == cat][:per_category]]
    model = ManagedModel(SyntheticGenerator(PROFILES[profile], corpus), max_connections=8, policy=CallPolicy())
    config = RunConfig(suite="prograf", models={"assistant": model.name})

    async def go():
        return await asyncio.gather(*(run_one(suite, s, 0, {"assistant": model}, config) for s in chosen))

    records = asyncio.run(go())
    return suite, records


def test_a_perfect_generator_passes_everything(corpus):
    suite, records = run(corpus, "perfect")
    metrics = suite.metrics(records)
    assert metrics["pass_rate"].value == 1.0 and metrics["point_rate"].value == 1.0 and metrics["pass_rate"].n == 48
    assert metrics["format_error_rate"].value == 0.0
    assert {k for k in metrics if k.startswith("pass_rate/")} == {"pass_rate/geometry", "pass_rate/circuit",
                                                                   "pass_rate/flowchart", "pass_rate/diagram"}
    assert records[0].calls[0].model == "synthetic/prograf-perfect" and records[0].status == "ok"
    assert records[0].output["extracted"] == "tagged block" and records[0].scores["points"][0]["passed"]


def test_faults_show_up_per_component_with_cis_and_runs_are_deterministic(corpus):
    suite, weak = run(corpus, "weak-circuits", per_category=20)
    metrics = suite.metrics(weak)
    wire, point = metrics["component_pass_rate/wire"], metrics["component_pass_rate/point"]
    assert wire.value < point.value and wire.ci_low <= wire.value <= wire.ci_high and wire.n == 20  # the circuits
    assert metrics["pass_rate/circuit"].value < metrics["pass_rate/geometry"].value
    assert suite.breakdowns(weak)["category"]["circuit"] == metrics["pass_rate/circuit"]
    failed = [p for r in weak for p in r.scores["points"] if not p["passed"]]
    assert failed and all(p["pattern"] for p in failed)
    _, again = run(corpus, "weak-circuits", per_category=20)
    assert [r.scores for r in weak] == [r.scores for r in again]
    counts = suite.counts(weak)
    assert counts["tasks"] == 80 and counts["passed"] == round(metrics["pass_rate"].value * 80)


def test_hostile_replies_are_recorded_failures_and_nothing_runs(corpus, tmp_path):
    suite, records = run(corpus, "hostile", per_category=6, format="auto")
    assert all(r.status == "ok" for r in records)  # a failure is a score, not a crash
    metrics = suite.metrics(records)
    assert metrics["pass_rate"].value == 0.0
    by_format = {r.scores["format"]: r.scores for r in records}
    assert by_format["svg"]["pattern"] == "rejected_input" and by_format["schemdraw-json"]["pattern"] == "rejected_input"
    assert "dropped attribute image" in by_format["dot"]["notes"]


def test_the_format_option_and_its_fallback(corpus):
    suite, records = run(corpus, "perfect", per_category=3, format="mermaid")
    formats = {r.output["category"]: r.output["format"] for r in records}
    assert formats == {"geometry": "svg", "circuit": "schemdraw-json", "flowchart": "mermaid", "diagram": "mermaid"}
    assert suite.metrics(records)["pass_rate"].value == 1.0
    suite, records = run(corpus, "perfect", per_category=3, format="schemdraw-py")
    assert {r.output["format"] for r in records if r.output["category"] == "circuit"} == {"schemdraw-py"}
    assert suite.metrics(records)["pass_rate"].value == 1.0


def test_rendered_scoring_through_the_suite(corpus):
    suite, records = run(corpus, "perfect", per_category=2, render=True, format="svg")
    assert all(r.scores["passed"] for r in records)
    assert {r.scores["rendered"] for r in records if r.output["format"] == "svg"} == {True}


def test_options_filters_and_the_mock_provider():
    with pytest.raises(HarnessError, match="format=png"):
        parse_options("prograf", ProGrafOptions, {"format": "png"})
    suite = ProGrafSuite(parse_options("prograf", ProGrafOptions, {"category": "circuit", "source": "handwritten"}))
    samples = suite.load_samples(None)
    assert len(samples) == 16 and {s.data["category"] for s in samples} == {"circuit"}
    assert suite.corpus_identity(None)["sha256"]
    provider = SyntheticProvider()
    provider.validate(ModelSpec(provider="synthetic", name="prograf-uniform"))
    with pytest.raises(HarnessError, match="unknown profile"):
        provider.validate(ModelSpec(provider="synthetic", name="prograf-nope"))


def test_no_reply_or_no_code_is_a_no_output_failure(corpus):
    suite = ProGrafSuite(parse_options("prograf", ProGrafOptions, {"render": False}))
    sample = suite.load_samples(None)[0]
    score = asyncio.run(suite._verify(sample, {"code": None, "format": "svg", "extracted": "no code block"}, None))
    assert score.values["pattern"] == "no_output" and not score.values["passed"]
    assert all(p["pattern"] == "no_output" for p in score.values["points"])


@pytest.mark.parametrize("reply, fmt, code, how", [
    ("Here:\n```svg\n<svg/>\n```\nthanks", "svg", "<svg/>", "tagged block"),
    ("```xml\n<svg a='1'/>\n```", "svg", "<svg a='1'/>", "tagged block"),
    ("```\ndigraph { a }\n```", "dot", "digraph { a }", "untagged block"),
    ("```python\nx\n```\n```dot\ndigraph{}\n```", "dot", "digraph{}", "tagged block"),
    ("sure! digraph G { a -> b } done", "dot", "digraph G { a -> b }", "bare text"),
    ("<p>x</p><svg><line/></svg> trailing", "svg", "<svg><line/></svg>", "bare text"),
    ("flowchart TD\nA-->B", "mermaid", "flowchart TD\nA-->B", "bare text"),
    ("```json\n{\"elements\": []}", "schemdraw-json", '{"elements": []}', "tagged block"),  # cut off by max_tokens
    ("I cannot draw.", "svg", None, "no code block"),
])
def test_extract_code(reply, fmt, code, how):
    assert extract_code(reply, fmt) == (code, how)
