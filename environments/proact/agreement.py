"""Suite `proact-judge`: how far a judge agrees with the labels stored in a corpus.

Each stored label (a curated response graded at curation time) is re-judged by the model(s)
under `--judge-model`, with the same prompt and parser the benchmark uses. Metrics: Cohen's kappa
and accuracy, overall and per trigger type, with bootstrap CIs over dialogues; the 3x3
confusion matrices go into the summary. Verdicts that do not parse (SKIPPED) or fail (ERROR)
are counted and left out of kappa -- never silently mapped to a label.

A corpus without stored labels (the release's current layout: rubrics only) is refused with
where labelled rows come from, rather than run into an empty kappa.
"""

from __future__ import annotations

import numpy as np
from pydantic import JsonValue

from corpora.proact_types import GRADES, TRIGGER_TYPES, CorpusRow, Grade, TriggerPoint
from environments.proact.corpus_suite import CorpusSuite
from environments.proact.judge_prompts import HARNESS_JUDGE
from environments.proact.payloads import AgreementScores, LabelPair, StoredReplies, StoredReply
from environments.proact.reference import judge_settings
from environments.proact.scoring import Reply, judge_transcript
from environments.proact.suite import JudgePromptOptions
from harness.errors import HarnessError
from harness.records import Metric, SampleRecord
from harness.stats import cohen_kappa, summed_metric
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, Transcript

LABELLED_SOURCES = (
    "labelled rows come from the project's own corpus (corpora/proact/dialogues.jsonl, the default: drop --corpus), "
    "from `harness corpus build` (every trigger carries the judge's verdict), or from a copy of the release made "
    "before its curation-time labels were removed; to set a judge against people instead, use "
    "`harness judge human-study` on the release's dataset/human_eval/ folder"
)


def stored_label(tp: TriggerPoint) -> Grade | None:
    res = tp.evaluation_result
    if res is not None and res.status == "EVALUATED":
        return res.score
    return None


def labelled_triggers(row: CorpusRow) -> list[tuple[TriggerPoint, Grade]]:
    """The row's triggers that carry a stored label, in turn order, with the label."""
    return [(tp, label) for tp in sorted(row.trigger_points, key=lambda t: t.turn)
            if (label := stored_label(tp)) is not None]


def pairs_of(record: SampleRecord) -> list[LabelPair]:
    return AgreementScores.model_validate(record.scores).pairs


def confusion_per_dialogue(records: list[SampleRecord], kind: str | None = None) -> np.ndarray:
    """(dialogues, 3, 3) counts, rows = stored label, columns = judge's label."""
    by_dialogue: dict[str, np.ndarray] = {}
    for rec in records:
        m = by_dialogue.setdefault(rec.sample_id, np.zeros((3, 3)))
        for pair in pairs_of(rec):
            if (kind is None or pair.type == kind) and pair.predicted in GRADES:
                m[GRADES.index(pair.reference), GRADES.index(pair.predicted)] += 1
    return np.stack(list(by_dialogue.values())) if by_dialogue else np.zeros((0, 3, 3))


def _accuracy(c: np.ndarray) -> float | None:
    return float(np.trace(c) / c.sum()) if c.sum() else None


class ProactJudgeAgreementSuite(CorpusSuite[StoredReplies, AgreementScores]):
    name = "proact-judge"
    version = "1.0.0"
    headline_metric = "judge_kappa_overall"
    description = "Judge agreement: re-judge a corpus' curated responses against its stored labels"
    Options = JudgePromptOptions
    options: JudgePromptOptions
    transcript_type = StoredReplies
    scores_type = AgreementScores

    def __init__(self, options: JudgePromptOptions | None = None) -> None:
        super().__init__(options)
        # The judge under test reads the options' prompt with the project's generation settings.
        self.judge = judge_settings(self.options.judge_prompt_in_use(), "harness", HARNESS_JUDGE)

    def corpus_identity(self, corpus: str | None) -> dict[str, JsonValue]:
        return {**super().corpus_identity(corpus), "judge_prompt": self.judge.prompt.identity()}

    def keep(self, row: CorpusRow) -> bool:
        return bool(labelled_triggers(row))

    def load_samples(self, corpus: str | None) -> list[Sample[CorpusRow]]:
        samples = super().load_samples(corpus)
        if not samples:
            identity = self._identity[corpus]
            kind = ("it is in the release's current layout (trigger_points carry rubrics only)"
                    if identity.get("layout") == "rubrics" else "no trigger has an EVALUATED label")
            raise HarnessError(f"corpus {identity['path']} has no stored labels to agree with: {kind}, so there "
                               f"is no kappa to compute; {LABELLED_SOURCES}")
        return samples

    @property
    def solver_roles(self) -> tuple[str, ...]:
        return ()  # the curated responses are the transcript; the judge under test is the scorer

    async def solve(self, sample: Sample[CorpusRow], ctx: SampleContext) -> Transcript:
        """The stored replies to grade again, with their stored labels (no model call)."""
        row = sample.data
        by_turn = {t.turn: t for t in row.turn_records}
        return Transcript(output=StoredReplies(unique_id_eval=row.unique_id_eval, turn_records=[
            StoredReply(turn=tp.turn, assistant_response=by_turn[tp.turn].assistant_response, stored=label)
            for tp, label in labelled_triggers(row)]))

    def scorers(self) -> dict[str, Scorer[StoredReplies]]:
        return {"agreement": FunctionScorer("agreement", self._agreement, roles=("judge",),
                                            description="the judge regrades each stored reply; pairs (stored, judge) for kappa")}

    async def _agreement(self, sample: Sample[CorpusRow], transcript: StoredReplies, ctx: SampleContext) -> Score:
        row = sample.data
        labelled = labelled_triggers(row)
        replies: dict[int, Reply] = {t.turn: (t.assistant_response, None) for t in transcript.turn_records}
        judged, errors = await judge_transcript(ctx, row.turn_records, [tp for tp, _ in labelled], replies, self.judge)
        pairs = [LabelPair(turn=tp.turn, type=tp.evaluation_rubric.type, reference=label, predicted=lab.label)
                 for (tp, label), lab in zip(labelled, judged.triggers)]
        scores = AgreementScores(triggers=judged.triggers, verdicts=judged.verdicts, trigger_stats=judged.trigger_stats,
                                 pairs=pairs)
        return Score(values=scores, errors=errors)

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        out = {}
        for kind in (None, *TRIGGER_TYPES):
            key = "overall" if kind is None else kind.lower()
            per_dialogue = confusion_per_dialogue(records, kind)
            out[f"judge_kappa_{key}"] = summed_metric(per_dialogue, cohen_kappa, seed=seed)
            out[f"judge_accuracy_{key}"] = summed_metric(per_dialogue, _accuracy, seed=seed)
        return out

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        pairs = [p for r in records for p in pairs_of(r)]
        return {"dialogues": len({r.sample_id for r in records}), "labelled_triggers": len(pairs),
                "judged": sum(p.predicted in GRADES for p in pairs),
                "skipped": sum(p.predicted == "SKIPPED" for p in pairs),
                "errors": sum(p.predicted == "ERROR" for p in pairs)}

    def official_summary(self, records: list[SampleRecord]) -> dict[str, JsonValue]:
        """Confusion matrices (rows: stored label, columns: judge), overall and per type."""
        out: dict[str, JsonValue] = {"labels": [*GRADES]}
        for kind in (None, *TRIGGER_TYPES):
            matrix = confusion_per_dialogue(records, kind).sum(axis=0) if records else np.zeros((3, 3))
            out[f"confusion_{'overall' if kind is None else kind.lower()}"] = [[int(v) for v in row] for row in matrix]
        return out
