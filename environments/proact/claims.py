"""ProactBench's claims that its release can check, as the core registers them (`harness claims
list`, the pre-registration test): "Recovery is the hardest trigger type", over the sixteen
released models' metrics files.

The check is not a suite run: its evidence is the release's `dataset/eval/*_proactivity_bench_metrics.json`
(one file per model, reproduced by `harness proact metrics`). Each model is one unit, paired with
itself: Recovery's weighted score minus Emergent's, and minus Critical's. "Hardest" is read as
"lower than each other type", not "lower than their mean": a type below the mean of the two others
can still sit above one of them, and then it is not the hardest. Each difference's mean over the
models gets the core's Student-t interval (`harness.claims.decide`); the claim is reproduced when
both intervals lie wholly below 0.

`recovery_verdict(eval_dir)` computes the verdict; `harness proact recovery-claim DIR` prints and
saves it (`harness claims table` then shows it).

May import: `harness`, `corpora`.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.claims import Claim, Condition, SeedPlan
from harness.claims.decide import CellTable, combine, evaluate
from harness.claims.model import Departure
from harness.claims.registry import ClaimFamily
from harness.claims.verdict import ClaimVerdict, Look, Summary
from harness.errors import HarnessError
from harness.stats import mean_metric

CRITERIA_LOG = Path(__file__).with_name("criteria_log.toml")
SETTING = "release"
METRIC = "weighted score"
ARMS = ("recovery", "emergent", "critical")  # the claimed hardest type first
MODELS = 16
METRICS_GLOB = "*_proactivity_bench_metrics.json"
METRIC_KEY = "eval/proactivity_{kind}_weighted_score"  # the released files' key, per trigger type

# PAPERS.md's summary of the ProactBench abstract (only abstracts are known): "16 models evaluated;
# Recovery is hardest and weakly predicted by standard benchmarks."
SENTENCE = "16 models evaluated; Recovery is hardest and weakly predicted by standard benchmarks."

DEPARTURES = [
    Departure(paper="says Recovery is weakly predicted by standard benchmarks (the issue names six)",
              ours="check only that Recovery is the hardest type; the correlation half is not checked",
              why="the release holds no benchmark scores for its sixteen models and does not name the six benchmarks "
                  "in any file here; supplying our own scores would check a claim the paper did not make",
              effect="'reproduced' speaks for the first half of the sentence only"),
    Departure(paper="states 'hardest' without saying how it was decided (only the abstract is known)",
              ours="pair the types within each model and put a Student-t interval on the mean difference over the "
                   "sixteen models, Recovery against Emergent and against Critical, both required",
              why="a model is the unit the release reports; pairing removes how strong each model is overall",
              effect="the sixteen models are the paper's choice, not a random sample: the interval describes these "
                     "models, and a different panel of models could order the types differently"),
    Departure(paper="scored every reply with its offline judge (GPT-5.4, per the human-study README)",
              ours="take the released weighted scores as they are; no reply is re-judged",
              why="re-judging needs the released results files (~65 MB, not in the shared copy) and the judge",
              effect="the verdict is about that judge's grades: the human study puts its kappa with raters at "
                     "0.27-0.55 by type, so a judge swap could reorder close types"),
    Departure(paper="compares trigger types whose rubrics, counts (201 / 232 / 191) and dialogue phases differ",
              ours="make the same comparison: the release cannot separate a stricter rubric from a harder need",
              why="each trigger type has its own items; nothing in the release grades one reply against two types",
              effect="'hardest' means 'scored lowest under its own rubrics', not 'hardest for a model' in any deeper sense"),
]

CLAIM = Claim(
    id="proact.recovery_hardest",
    sentence=SENTENCE,
    setting="the sixteen released metrics files (dataset/eval), weighted score per trigger type (PASS 1, PARTIAL "
            "0.5, FAIL 0), paired within each model",
    arms=ARMS,
    settings=(SETTING,),
    conditions=[Condition(metric=METRIC, setting=SETTING, arm="recovery", versus=other, op="<", threshold=0.0)
                for other in ARMS[1:]],
    plan=SeedPlan(looks=(MODELS,), level=0.95, unit="models"),
    protocol={"source": "dataset/eval/" + METRICS_GLOB, "metric_key": METRIC_KEY, "pairing": "within model"},
    departures=DEPARTURES,
)


def claim_family() -> ClaimFamily:
    """ProactBench's claims and their criterion log, for the core's registry (entry point `proact`
    under `harness.claims`). Not cell runs: the verdict is computed from the release's files."""
    return ClaimFamily(name="proact", log=CRITERIA_LOG, claims=(CLAIM,), suite_of=None,
                       check_command="harness proact recovery-claim DATASET/eval --run-dir DIR",
                       verdict_command="harness proact recovery-claim DATASET/eval --run-dir DIR")


def read_scores(eval_dir: Path) -> dict[str, dict[str, float]]:
    """model -> trigger type (lower case) -> weighted score, from each released metrics file."""
    files = sorted(eval_dir.glob(METRICS_GLOB))
    if len(files) != MODELS:
        raise HarnessError(f"{eval_dir}: {len(files)} metrics files ({METRICS_GLOB}); the registered criterion is over "
                           f"the release's {MODELS} models -- pass the release's dataset/eval folder")
    scores: dict[str, dict[str, float]] = {}
    for file in files:
        try:
            metrics = json.loads(file.read_text(encoding="utf-8"))["metrics"]
            scores[file.name.removesuffix(METRICS_GLOB[1:])] = {
                kind: float(metrics[METRIC_KEY.format(kind=kind)]) for kind in ARMS}
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise HarnessError(f"{file}: no weighted score per trigger type ({exc!r}); expected "
                               f"metrics.{METRIC_KEY.format(kind='recovery')} and the like") from None
    return scores


def recovery_verdict(eval_dir: Path, registered: str | None = None) -> ClaimVerdict:
    """The claim's verdict from the metrics files alone (a pure function of them)."""
    scores = read_scores(eval_dir)
    models = sorted(scores)
    table: CellTable = {(kind, SETTING, i): {METRIC: scores[m][kind]} for i, m in enumerate(models) for kind in ARMS}
    seeds = list(range(len(models)))
    level = CLAIM.plan.look_level
    results = [evaluate(c, table, seeds, level) for c in CLAIM.conditions]
    verdict = combine(r.outcome for r in results)
    lowest = sum(min(scores[m], key=scores[m].__getitem__) == "recovery" for m in models)
    return ClaimVerdict(
        claim=CLAIM.id, sentence=CLAIM.sentence, setting=CLAIM.setting, criterion=CLAIM.criterion_text(),
        criterion_hash=CLAIM.criterion_hash(), registered=registered, verdict=verdict, seeds=len(models),
        unit=CLAIM.plan.unit, conditions=results,
        looks=[Look(seeds=len(models), level=level, verdict=verdict, conditions=results)],
        departures=CLAIM.departures,
        summaries=[Summary(arm=kind, setting=SETTING, metric=METRIC,
                           value=mean_metric([scores[m][kind] for m in models], level)) for kind in ARMS],
        runs={"release": [str(eval_dir)]},
        note=f"Recovery is the lowest of the three types in {lowest} of {len(models)} models")
