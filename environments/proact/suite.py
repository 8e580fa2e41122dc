"""Suite `proact`: ProactBench's offline protocol over a corpus in the official format.

One sample = one dialogue (the independent unit). Solve: for each trigger point, rebuild the
curated history up to the trigger turn and regenerate that turn with the model under test.
Score (`judge`): the judge grades each regenerated reply against the Planner-authored rubric.

The corpus may be labelled or in the release's current rubrics-only layout: only the rubrics and
the curated turns are read. Options choose the judge's prompt (`judge_prompt=harness`, the
project's own, or `reference` with `reference_repo=PATH`: the reference code's builders, called as
they are) and the generation settings (`preset=harness` or `reference`: docs/proact_reference.md).
A reference-prompt run pins its prompt's sha256 in its suite options, so the config hash and the
leaderboard row tell the prompts apart; every run's manifest names its prompt and hash
(`corpus.judge_prompt`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, JsonValue, model_validator

from corpora.proact_types import CorpusRow, ResultRow, ResultTurnRecord, TriggerPoint
from environments.proact.corpus_suite import CorpusSuite
from environments.proact.judge_prompts import HARNESS_JUDGE, HARNESS_PROMPT, JudgePrompt
from environments.proact.metrics import (
    official_metrics,
    panel_agreement,
    proact_breakdowns,
    proact_counts,
    proact_metrics,
)
from environments.proact.protocol import ASSISTANT_CONFIG, history_messages
from environments.proact.reference import (
    REFERENCE_ASSISTANT_CONFIG,
    judge_settings,
    load_reference_prompt,
    reference_model_rule,
)
from environments.proact.payloads import ProactScores
from environments.proact.scoring import Reply, judge_transcript
from harness.errors import HarnessError
from harness.providers.base import GenerateConfig, ModelError
from harness.records import Metric, SampleRecord
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, SuiteOptions, Transcript, dump_payload

IDENTITY_FIELDS = ("blueprint_id", "scenario_id", "unique_id_eval", "uuid", "category_key",
                   "style_combination_index", "num_turns_completed")


def sorted_triggers(row: CorpusRow) -> list[TriggerPoint]:
    return sorted(row.trigger_points, key=lambda tp: tp.turn)


def regenerated_row(row: CorpusRow, replies: dict[int, Reply]) -> ResultRow:
    """The offline transcript: a results row (no verdicts yet) of the corpus row's identity, each
    trigger's rubric, and at each trigger turn the reply (`replies`: the reply, or why there is
    none) beside the curated one. `solve` writes it, and so does an Inspect log's import."""
    triggers = sorted_triggers(row)
    by_turn = {t.turn: t for t in row.turn_records}
    turn_records = []
    for tp in triggers:
        reply, error = replies.get(tp.turn, (None, None))
        record = ResultTurnRecord(turn=tp.turn, user_message=by_turn[tp.turn].user_message, assistant_response=reply,
                                  original_assistant_response=by_turn[tp.turn].assistant_response)
        if error:
            record.error = error
        turn_records.append(record)
    return ResultRow(**row.model_dump(include=set(IDENTITY_FIELDS)), source_evaluated_model=row.evaluated_model,
                     num_trigger_points=len(triggers),
                     trigger_points=[TriggerPoint(turn=tp.turn, evaluation_rubric=tp.evaluation_rubric) for tp in triggers],
                     turn_records=turn_records)


class JudgePromptOptions(SuiteOptions):
    """Which prompt the judge reads: the options of every ProactBench suite that judges (`proact`,
    `proact-live`, `proact-judge`)."""

    judge_prompt: Literal["harness", "reference"] = Field(
        "harness", description="the judge's prompt: the project's own, or the reference code's (needs reference_repo)")
    reference_repo: str | None = Field(
        None, description="a local checkout of boson-ai/ProactBench (judge_prompt=reference reads its prompt builders)")
    judge_prompt_sha256: str | None = Field(
        None, description="set by judge_prompt=reference to its prompt's hash; given, the checkout must match it")

    @model_validator(mode="before")
    @classmethod
    def _pin_the_reference_prompt(cls, data: Any) -> Any:
        """Load the reference prompt once options are read, so a bad checkout is one error before
        anything runs, and store its hash (a resumed or re-scored run checks it again)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("judge_prompt", "harness") != "reference":
            for key in ("reference_repo", "judge_prompt_sha256"):
                if data.get(key) is not None:
                    raise HarnessError(f"--suite-option {key}: only read with judge_prompt=reference; add "
                                       f"--suite-option judge_prompt=reference, or drop {key}")
            return data
        if not data.get("reference_repo"):
            raise HarnessError("--suite-option judge_prompt=reference needs --suite-option reference_repo=PATH, a local "
                               "checkout of boson-ai/ProactBench (see docs/proact_reference.md)")
        repo = Path(str(data["reference_repo"])).expanduser().resolve()
        prompt = load_reference_prompt(repo)
        pinned = data.get("judge_prompt_sha256")
        if pinned and pinned != prompt.sha256:
            raise HarnessError(f"the reference judge prompt in {repo} has sha256 {prompt.sha256}, not {pinned} "
                               f"(judge_prompt_sha256, the run's): the checkout's prompt changed; check out the "
                               f"version the run used, or start a new run")
        data["reference_repo"], data["judge_prompt_sha256"] = str(repo), prompt.sha256
        return data

    def judge_prompt_in_use(self) -> JudgePrompt:
        """The prompt the options name, checked again against the hash they pinned."""
        if self.judge_prompt != "reference":
            return HARNESS_PROMPT
        prompt = load_reference_prompt(Path(self.reference_repo or ""))
        if prompt.sha256 != self.judge_prompt_sha256:  # changed since the options were read
            raise HarnessError(f"the reference judge prompt in {self.reference_repo} changed while "
                               f"the run was being set up (sha256 {prompt.sha256}); start it again")
        return prompt


class ProactOptions(JudgePromptOptions):
    preset: Literal["harness", "reference"] = Field(
        "harness", description="generation settings: the project's, or the reference's (docs/proact_reference.md)")


class ProactOfflineSuite(CorpusSuite[ResultRow, ProactScores]):
    name = "proact"
    version = "1.0.0"
    headline_metric = "proactivity_overall_weighted_score"
    description = "ProactBench offline protocol: regenerate each trigger turn, judge against its rubric"
    Options = ProactOptions
    options: ProactOptions
    transcript_type = ResultRow  # a results row without verdicts (format 1: with them)
    scores_type = ProactScores

    def __init__(self, options: ProactOptions | None = None) -> None:
        super().__init__(options)
        self.judge = judge_settings(self.options.judge_prompt_in_use(), self.options.preset, HARNESS_JUDGE)

    def corpus_identity(self, corpus: str | None) -> dict[str, JsonValue]:
        """The corpus' identity, and the judge prompt that scores the run (name, sha256, source):
        recorded in the manifest, outside the config hash (a reference prompt's hash is in the
        suite options, which the config hash covers)."""
        return {**super().corpus_identity(corpus), "judge_prompt": self.judge.prompt.identity()}

    def assistant_config(self, model_name: str) -> GenerateConfig:
        if self.options.preset == "reference":
            return reference_model_rule(REFERENCE_ASSISTANT_CONFIG, model_name)
        return ASSISTANT_CONFIG

    async def solve(self, sample: Sample[CorpusRow], ctx: SampleContext) -> Transcript:
        """The trigger turns regenerated by the model under test: the results row's `turn_records`."""
        row = sample.data
        turns = [tp.turn for tp in sorted_triggers(row)]
        replies = dict(zip(turns, await asyncio.gather(*(self._reply(row, turn, ctx) for turn in turns))))
        errors = [f"turn {turn}: {error}" for turn, (_, error) in replies.items() if error]
        return Transcript(output=regenerated_row(row, replies), errors=errors)

    async def _reply(self, row: CorpusRow, turn: int, ctx: SampleContext) -> Reply:
        try:
            config = self.assistant_config(ctx.models["assistant"].name)
            return (await ctx.generate("assistant", history_messages(row.turn_records, turn), config)).text, None
        except ModelError as exc:
            return None, f"assistant: {exc}"

    def scorers(self) -> dict[str, Scorer[ResultRow]]:
        return {"judge": FunctionScorer("judge", self._judge, roles=("judge",),
                                        description="the ProactBench judge (or a panel: majority, ties to the lower label)")}

    async def _judge(self, sample: Sample[CorpusRow], transcript: ResultRow, ctx: SampleContext) -> Score:
        triggers = sorted_triggers(sample.data)
        replies = {t.turn: (t.assistant_response, t.error) for t in transcript.turn_records}
        scores, errors = await judge_transcript(ctx, sample.data.turn_records, triggers, replies, self.judge)
        scores.expected_types = [tp.evaluation_rubric.type for tp in triggers]
        return Score(values=scores, errors=errors)

    def scores_on_failure(self, sample: Sample[CorpusRow]) -> dict[str, JsonValue]:
        expected = [tp.evaluation_rubric.type for tp in sample.data.trigger_points]
        return dump_payload(ProactScores(triggers=[], expected_types=expected))

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        return proact_metrics(records, seed=seed) | panel_agreement(records, seed=seed)

    def breakdowns(self, records: list[SampleRecord], seed: int = 0) -> dict[str, dict[str, Metric]]:
        return proact_breakdowns(records, seed=seed)

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        return proact_counts(records)

    def official_summary(self, records: list[SampleRecord]) -> dict[str, Any]:
        return dict(official_metrics(records))  # the harness writes it to the run's summary as is
