"""`judge_prompt=reference`: the reference code's prompt builders loaded from a checkout (here a
fixture of the same shape with our own text) and used as they are; its hash in the manifest and
the suite options; runs of the two prompts never share a leaderboard row; the reference preset;
checkouts without the builders."""

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from corpora.proact_types import Rubric
from environments.proact.judge_prompts import HARNESS_JUDGE, HARNESS_PROMPT
from environments.proact.judging import judge_reply
from environments.proact.reference import (
    REFERENCE_ANSWER_SCHEMA,
    judge_settings,
    load_reference_prompt,
    parse_reference_answer,
    reference_model_rule,
)
from environments.proact.suite import ProactOfflineSuite
from harness.errors import HarnessError
from harness.loopback import running_server
from harness.providers.base import GenerateConfig, ModelOutput
from harness.records import RunConfig
from harness.run_folder import RunFolder
from harness.runner import config_hash, execute, plan_run
from harness.suite import SampleContext, get_suite
from leaderboards.aggregate import build_leaderboard
from tests.conftest import JUDGE_PASS, REPO

FIXTURE = REPO / "tests" / "fixtures" / "proact_reference_repo"
CURRENT = REPO / "tests" / "fixtures" / "proact_current_layout.jsonl"
RUBRIC = Rubric(type="CRITICAL", pass_criteria="joins the budget and the date", partial_criteria="mentions one",
                fail_criteria="ignores both")
HISTORY = [{"role": "user", "content": "first ask"}, {"role": "assistant", "content": "first answer"},
           {"role": "user", "content": "second ask"}]
NESTED_PASS = json.dumps({"evaluation_result": {"status": "EVALUATED", "score": "PASS", "rationale": "joined them",
                                                "evidence": "PASS"}})


def _copy(tmp_path: Path) -> Path:
    repo = tmp_path / "checkout"
    shutil.copytree(FIXTURE, repo)
    return repo


def test_the_builders_are_called_as_they_are_and_the_package_init_never_runs():
    prompt = load_reference_prompt(FIXTURE)
    system, user = prompt.build(4, RUBRIC.model_copy(update={"extra": "not a rubric field"}), HISTORY, "the reply")
    # The fixture's root package imports an SDK that is not installed: loading it would have failed.
    assert system == {"role": "system", "content": "FIXTURE SYSTEM: grade the last assistant turn against the "
                                                   "rubric; answer in JSON."}
    assert user["role"] == "user"
    # The builder's own rendering: the turn, the rubric as its pydantic model dumps it (the four
    # rubric fields only), and the history ending with the reply under review.
    assert user["content"] == (
        "FIXTURE TRIGGER turn=4\n\n"
        f"FIXTURE RUBRIC {json.dumps(RUBRIC.model_dump(), separators=(',', ':'))}\n\n"
        "FIXTURE HISTORY\n<user> first ask\n<assistant> first answer\n<user> second ask\n<assistant> the reply\n\n"
        "FIXTURE END")
    assert prompt.name == "reference" and prompt.source.endswith("proactbench/prompts/runtime.py")
    assert len(prompt.sha256) == 64 and prompt.sha256 != HARNESS_PROMPT.sha256


def test_the_hash_follows_the_prompt_text_not_the_file(tmp_path):
    repo = _copy(tmp_path)
    before = load_reference_prompt(repo).sha256
    runtime = repo / "proactbench" / "prompts" / "runtime.py"
    runtime.write_text(runtime.read_text() + "\n# a comment changes no prompt\n")
    assert load_reference_prompt(repo).sha256 == before
    runtime.write_text(runtime.read_text().replace("FIXTURE END", "FIXTURE STOP"))
    assert load_reference_prompt(repo).sha256 != before


@pytest.mark.parametrize("breakage, file, missing", [
    ("no_runtime", "proactbench/prompts/runtime.py", "not found"),
    ("no_builder", "proactbench/prompts/runtime.py", "has no `build_judge_eval_message`"),
    ("no_system", "proactbench/prompts/runtime.py", "has no `JUDGE_SYSTEM_TEMPLATE`"),
    ("no_trigger_point", "proactbench/types.py", "has no `TriggerPoint`"),
    ("builder_fails", "proactbench/prompts/runtime.py", "failed on a probe input"),
    ("syntax", "proactbench/types.py", "could not be imported (SyntaxError"),
])
def test_a_checkout_without_the_builders_is_one_error_naming_the_file_and_what_is_missing(tmp_path, breakage, file,
                                                                                          missing):
    repo = _copy(tmp_path)
    runtime, types_py = repo / "proactbench" / "prompts" / "runtime.py", repo / "proactbench" / "types.py"
    if breakage == "no_runtime":
        runtime.unlink()
    elif breakage == "no_builder":
        runtime.write_text(runtime.read_text().replace("def build_judge_eval_message", "def build_other_message"))
    elif breakage == "no_system":
        runtime.write_text(runtime.read_text().replace("JUDGE_SYSTEM_TEMPLATE =", "OTHER_TEMPLATE ="))
    elif breakage == "no_trigger_point":
        types_py.write_text(types_py.read_text().replace("class TriggerPoint", "class TriggerTurn"))
        runtime.write_text(runtime.read_text().replace("from ..types import TriggerPoint", "TriggerPoint = object"))
    elif breakage == "builder_fails":
        runtime.write_text(runtime.read_text().replace("trigger_point.turn}", "trigger_point.no_such_field}"))
    else:
        types_py.write_text("class (:\n")
    with pytest.raises(HarnessError) as info:
        load_reference_prompt(repo)
    message = str(info.value)
    assert str(repo / file) in message and missing in message and "\n" not in message
    assert "boson-ai/ProactBench" in message
    # Through the suite options too: before any run starts.
    with pytest.raises(HarnessError, match="boson-ai/ProactBench"):
        get_suite("proact", {"judge_prompt": "reference", "reference_repo": str(repo)})


def test_options_need_both_and_pin_the_hash(tmp_path):
    with pytest.raises(HarnessError, match="judge_prompt=reference needs --suite-option reference_repo=PATH"):
        get_suite("proact", {"judge_prompt": "reference"})
    with pytest.raises(HarnessError, match="reference_repo: only read with judge_prompt=reference"):
        get_suite("proact", {"reference_repo": str(FIXTURE)})
    repo = _copy(tmp_path)
    suite = get_suite("proact", {"judge_prompt": "reference", "reference_repo": str(repo)})
    stored = suite.options.model_dump(mode="json", exclude_defaults=True)
    assert stored == {"judge_prompt": "reference", "reference_repo": str(repo.resolve()),
                      "judge_prompt_sha256": load_reference_prompt(repo).sha256}
    assert get_suite("proact", stored).judge.prompt.sha256 == stored["judge_prompt_sha256"]  # a resume reads it back
    runtime = repo / "proactbench" / "prompts" / "runtime.py"
    runtime.write_text(runtime.read_text().replace("FIXTURE END", "FIXTURE STOP"))
    with pytest.raises(HarnessError, match="the checkout's prompt changed"):
        get_suite("proact", stored)


class FakeJudge:
    """Stands in for a judge model: answers in turn, and keeps every call."""

    def __init__(self, answers: list[str]) -> None:
        self.name, self.answers, self.calls = "openai/gpt-4o", list(answers), []

    async def generate(self, messages, config):
        self.calls.append((messages, config))
        return ModelOutput(text=self.answers.pop(0))


def _judge(settings, answers: list[str]):
    model = FakeJudge(answers)
    ctx = SampleContext({"judge": model}, seed=7, overrides={})
    verdict = asyncio.run(judge_reply(ctx, RUBRIC, HISTORY, "PASS is quoted", turn=4, settings=settings))
    return verdict, model.calls


def test_the_reference_prompt_and_preset_reach_the_judge_and_its_answer_form_is_read():
    prompt = load_reference_prompt(FIXTURE)
    verdict, calls = _judge(judge_settings(prompt, "reference", HARNESS_JUDGE), ["no json here", NESTED_PASS])
    assert verdict.status == "EVALUATED" and verdict.score == "PASS" and verdict.judge_attempts == 2
    assert verdict.evidence_verbatim is True
    for messages, config in calls:
        assert messages == prompt.build(4, RUBRIC, HISTORY, "PASS is quoted")
        assert config.json_schema == REFERENCE_ANSWER_SCHEMA
        assert (config.temperature, config.max_tokens, config.top_p) == (0.7, 32768, 1.0)
    assert [c.seed for _, c in calls] == [7, 8]
    # The reference prompt under the project's settings: greedy first, the project's token limit.
    _, calls = _judge(judge_settings(prompt, "harness", HARNESS_JUDGE), [NESTED_PASS])
    assert (calls[0][1].temperature, calls[0][1].max_tokens) == (0.0, 512)
    # The reference's answer form lets the judge decline: counted SKIPPED, as the reference counts it.
    declined = json.dumps({"evaluation_result": {"status": "SKIPPED", "score": "", "rationale": "no reply",
                                                 "evidence": ""}})
    verdict, _ = _judge(judge_settings(prompt, "reference", HARNESS_JUDGE), [declined])
    assert verdict.status == "SKIPPED" and verdict.score is None


def test_the_reference_answer_parser_says_what_is_wrong():
    assert parse_reference_answer("```json\n" + NESTED_PASS + "\n```")["score"] == "PASS"
    with pytest.raises(ValueError, match="evaluation_result` is missing"):
        parse_reference_answer(JUDGE_PASS)  # the project's flat form is not the reference's
    with pytest.raises(ValueError, match="score` is 'GOOD'"):
        parse_reference_answer(NESTED_PASS.replace('"PASS", "rationale"', '"GOOD", "rationale"'))


def test_the_reference_preset_raises_reasoning_models_as_the_reference_does():
    base = GenerateConfig(temperature=0.7, max_tokens=8192, top_p=1.0)
    for name in ("openai/gpt-5.4", "o4-mini-2025-04-16", "litellm/gemini/gemini-2.5-pro"):
        raised = reference_model_rule(base, name)
        assert (raised.temperature, raised.max_tokens) == (1.0, 32768), name
    assert reference_model_rule(base, "openai/gpt-4o") == base
    assert reference_model_rule(base, "local/smollm2-135m") == base
    suite = ProactOfflineSuite(ProactOfflineSuite.Options(preset="reference"))
    assert suite.assistant_config("openai/gpt-4o").max_tokens == 8192
    assert suite.assistant_config("openai/gpt-5.5").temperature == 1.0
    assert suite.judge.prompt is HARNESS_PROMPT and suite.judge.config_for("openai/gpt-4o").max_tokens == 32768


def _run(options: dict, reply: str, run_dir: Path):
    suite = get_suite("proact", options)
    with running_server("--echo", "--reply", reply) as url:
        config = RunConfig(suite="proact", models={"assistant": "openai/model", "judge": "openai/judge"},
                           base_url=url, corpus=str(CURRENT), limit=1,
                           suite_options=suite.options.model_dump(mode="json", exclude_defaults=True))
        plan = plan_run(config, run_dir, suite=suite)
        asyncio.run(execute(plan, show_progress=False))
    return suite, config, RunFolder(run_dir, plan.folder.run_id)


def test_the_manifest_names_the_prompt_and_the_leaderboard_keeps_the_two_apart(tmp_path):
    run_dir = tmp_path / "runs"
    own_suite, own_config, own = _run({}, JUDGE_PASS, run_dir)
    ref_options = {"judge_prompt": "reference", "reference_repo": str(FIXTURE)}
    ref_suite, ref_config, ref = _run(ref_options, NESTED_PASS, run_dir)
    reference = load_reference_prompt(FIXTURE)
    own_manifest, ref_manifest = own.read_manifest(), ref.read_manifest()
    assert own_manifest.corpus["judge_prompt"] == HARNESS_PROMPT.identity()
    assert ref_manifest.corpus["judge_prompt"] == reference.identity()
    assert ref_manifest.config.suite_options["judge_prompt_sha256"] == reference.sha256
    # Both runs were scored: every trigger of the first dialogue is a PASS under either prompt.
    for folder in (own, ref):
        [record] = folder.read_samples()
        assert {t["label"] for t in record.scores["triggers"]} == {"PASS"}
    # Same models, same corpus: only the prompt tells them apart, in the config hash and the rows.
    corpus_id = own_suite.corpus_identity(str(CURRENT))
    assert config_hash(own_suite, own_config, corpus_id) != config_hash(ref_suite, ref_config, corpus_id)
    board = build_leaderboard([run_dir], "proact")
    assert len(board.rows) == 2
    setups = sorted(row.setup for row in board.rows)
    assert setups[0] == "" and "judge_prompt=reference" in setups[1] and reference.sha256 in setups[1]
    assert all(len(row.runs) == 1 for row in board.rows)


@pytest.mark.parametrize("suite_name", ["proact-judge", "proact-live"])
def test_the_other_judging_suites_read_the_reference_prompt_too(suite_name):
    reference = load_reference_prompt(FIXTURE)
    suite = get_suite(suite_name, {"judge_prompt": "reference", "reference_repo": str(FIXTURE)})
    assert suite.judge.prompt.sha256 == reference.sha256
    assert suite.options.judge_prompt_sha256 == reference.sha256  # pinned, so a resume checks the checkout
    assert (suite.judge.config.temperature, suite.judge.config.max_tokens) == (0.0, 512)  # the project's settings
    assert get_suite(suite_name).judge.prompt.sha256 == HARNESS_PROMPT.sha256
    with pytest.raises(HarnessError, match="judge_prompt=reference needs --suite-option reference_repo=PATH"):
        get_suite(suite_name, {"judge_prompt": "reference"})
