"""ProactBench's human study, reproduced: how far raters agree with each other and with a judge.

The release's human-study folder (`dataset/human_eval/`) holds 60 trigger items with the
published judge's score (`sample_items.json`), one ratings file per rater (`results/A01.jsonl`
...), and the study's own statistics (`analysis_stats.json`). From them, per trigger type and
over all items:

- ordinal Krippendorff's alpha among the raters, computed by the `krippendorff` package (PyPI,
  pinned in pyproject.toml; not written again here), with a percentile bootstrap CI that
  resamples items;
- Cohen's kappa (unweighted) of the raters' majority vote against a judge's score, with a
  percentile bootstrap CI that resamples items -- for the published judge, and for any judge the
  harness runs on the same items (`judge_items_corpus` turns them into rows of the `proact-judge`
  suite, which grades them with the benchmark's own judge prompt and parser).

The study's statistics come out as stored when the study's settings are kept: every rater kept
(the stored figures use all 275 ratings although the study's README describes a quality
exclusion), unweighted kappa (the README says quadratic-weighted; the stored figures are not),
10,000 resamples, seed 2026 for alpha and 2027 for kappa. `published_differences` compares.

Bad input -- a rater file the study lists but the folder lacks, an item rated by nobody beyond
what the study records, a score outside Fail/Partial/Pass -- is one `HarnessError` naming the file
and what is missing.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import krippendorff
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from corpora.proact_types import GRADES, TRIGGER_TYPES
from harness.errors import HarnessError, invalid
from harness.records import Metric
from harness.stats import cohen_kappa, resampled_metric, summed_metric

Score = Literal["Fail", "Partial", "Pass"]
SCALE: tuple[Score, ...] = ("Fail", "Partial", "Pass")  # ordinal, lowest first (the alpha's codes 0, 1, 2)
TriggerType = Literal["EMERGENT", "CRITICAL", "RECOVERY"]
# The study breaks a majority-vote tie this way. Its analysis script says so in one sentence:
# "Ties (e.g. one vote for each of 3 categories) resolved by priority: Partial > Pass > Fail
# (middle wins ties, then Pass over Fail)." (dataset/human_eval/analyze_results.py,
# `majority_vote_consensus`, boson-ai/ProactBench commit 249ed22).
TIE_ORDER: tuple[Score, ...] = ("Partial", "Pass", "Fail")
STUDY_SEED = 2026  # the study's bootstrap seed; kappa's resamples use seed + 1, as the study's did
STUDY_RESAMPLES = 10_000
PUBLISHED = "published judge"
OVERALL = "OVERALL"

ITEMS_FILE = "sample_items.json"
RESULTS_DIR = "results"
STATS_FILE = "analysis_stats.json"
# A corpus row's id must read `{...}__style{N}__{...}` (the release's composite key); the item id is its tail.
ROW_PREFIX = "human_study"


class Message(BaseModel):
    role: Literal["user", "assistant"]
    content: str


class StudyItem(BaseModel):
    """One trigger point shown to raters, with the published judge's verdict."""

    model_config = ConfigDict(extra="ignore")

    item_id: str
    dialogue_id: str
    trigger_type: TriggerType
    turn_index: int = Field(ge=1)
    evaluated_model: str
    judge_score: Score
    persona_category: str
    dialogue_history: list[Message] = Field(min_length=1, description="every turn before the reply, ending with "
                                            "the user's message at the trigger")
    model_response: str
    rubric: dict[str, str]


class Rating(BaseModel):
    """One rater's score of one item (a line of `results/Axx.jsonl`)."""

    model_config = ConfigDict(extra="ignore")

    annotator_id: str
    item_id: str
    score: Score
    confidence: int | None = None
    time_spent_seconds: float | None = None


class Study(BaseModel):
    folder: Path
    items: list[StudyItem]
    ratings: list[Rating]
    unrated: list[str] = Field(description="items no rater scored (left out of every statistic, as in the study)")


class AgreementRow(BaseModel):
    """One line of the table: a trigger type (or OVERALL)."""

    group: str
    items: int = Field(description="items with at least one rating")
    ratings: int
    alpha: Metric
    kappa: dict[str, Metric] = Field(description="judge name -> kappa of the raters' majority vote against it")
    confusion: dict[str, list[list[int]]] = Field(description="judge name -> 3x3 counts, rows = majority vote, "
                                                  "columns = judge, in SCALE order")


# ---------------------------------------------------------------- reading the folder
def _read_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise HarnessError(f"{path}: not found; a human-study folder holds {what} (pass the release's "
                           f"dataset/human_eval folder)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None


def load_items(folder: Path) -> list[StudyItem]:
    path = folder / ITEMS_FILE
    data = _read_json(path, f"{ITEMS_FILE} (the rated items)")
    if not isinstance(data, list) or not data:
        raise HarnessError(f"{path}: holds no list of items")
    items = []
    for i, raw in enumerate(data):
        try:
            items.append(StudyItem.model_validate(raw))
        except ValidationError as exc:
            raise HarnessError(invalid(exc, f"{path}: item {i}", "restore the file from the release")) from None
    dupes = [k for k, n in Counter(it.item_id for it in items).items() if n > 1]
    if dupes:
        raise HarnessError(f"{path}: item {dupes[0]} appears {Counter(it.item_id for it in items)[dupes[0]]} times")
    return items


def _roster(folder: Path) -> dict[str, int] | None:
    """The raters the study's own statistics list, with their rating counts (None: no stats file)."""
    path = folder / STATS_FILE
    if not path.is_file():
        return None
    per = _read_json(path, STATS_FILE).get("per_annotator") or {}
    return {str(k): int(v.get("n_ratings", 0)) for k, v in per.items()}


def load_ratings(folder: Path, item_ids: set[str]) -> list[Rating]:
    results = folder / RESULTS_DIR
    files = sorted(results.glob("*.jsonl")) if results.is_dir() else []
    roster = _roster(folder)
    for rater, n in sorted((roster or {}).items()):
        if not (results / f"{rater}.jsonl").is_file():
            raise HarnessError(f"{results / f'{rater}.jsonl'}: missing; {STATS_FILE} lists rater {rater} "
                               f"with {n} ratings -- restore the file from the release")
    if not files:
        raise HarnessError(f"{results}: no rater files (*.jsonl); a human-study folder holds one per rater")
    ratings: list[Rating] = []
    for file in files:
        lines = [ln for ln in file.read_text(encoding="utf-8").splitlines()]
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                rating = Rating.model_validate_json(line)
            except ValidationError as exc:
                raise HarnessError(invalid(exc, f"{file}:{lineno}", f"scores are one of {', '.join(SCALE)}")) from None
            if rating.item_id not in item_ids:
                raise HarnessError(f"{file}:{lineno}: rates item {rating.item_id}, which {ITEMS_FILE} does not hold")
            ratings.append(rating)
        expected = (roster or {}).get(file.stem)
        found = sum(r.annotator_id == file.stem for r in ratings)
        if expected is not None and found != expected:
            raise HarnessError(f"{file}: {found} ratings, but {STATS_FILE} lists {expected} for rater {file.stem}: "
                               f"the file is incomplete or not the study's")
    return ratings


def load_study(folder: Path) -> Study:
    """The items and every rating; each bad input is one error naming the file and what is wrong."""
    items = load_items(folder)
    ratings = load_ratings(folder, {it.item_id for it in items})
    rated = {r.item_id for r in ratings}
    unrated = [it.item_id for it in items if it.item_id not in rated]
    stats_path = folder / STATS_FILE
    # The study itself left some items unrated (its stats say how many); any more means ratings are lost.
    allowed = 0
    if stats_path.is_file():
        allowed = int((_read_json(stats_path, STATS_FILE).get("coverage") or {}).get("items_with_0_ratings", 0))
    if len(unrated) > allowed:
        # Which of them the study meant to leave unrated is not recorded, so every one is named.
        raise HarnessError(f"{folder / RESULTS_DIR}: {len(unrated)} items of {ITEMS_FILE} are rated by nobody where "
                           f"the study records {allowed} -- a rater file is incomplete; unrated: {', '.join(unrated)}")
    return Study(folder=folder, items=items, ratings=ratings, unrated=unrated)


# ---------------------------------------------------------------- the statistics
def majority_vote(scores: Iterable[Score]) -> Score:
    """The most frequent score; a tie goes to the first of TIE_ORDER among the tied."""
    counts = Counter(scores)
    top = max(counts.values())
    return next(s for s in TIE_ORDER if counts.get(s) == top)


def consensus(ratings: Iterable[Rating]) -> dict[str, Score]:
    by_item: dict[str, list[Score]] = {}
    for r in ratings:
        by_item.setdefault(r.item_id, []).append(r.score)
    return {item: majority_vote(scores) for item, scores in sorted(by_item.items())}


def reliability_matrix(ratings: list[Rating]) -> np.ndarray:
    """(items, raters) codes 0/1/2 of SCALE, NaN where a rater did not score an item; items in
    id order. A rater who scored an item twice counts once, with the later score."""
    items = sorted({r.item_id for r in ratings})
    raters = sorted({r.annotator_id for r in ratings})
    col = {a: j for j, a in enumerate(raters)}
    row = {i: j for j, i in enumerate(items)}
    matrix = np.full((len(items), len(raters)), np.nan)
    for r in ratings:
        matrix[row[r.item_id], col[r.annotator_id]] = SCALE.index(r.score)
    return matrix


def ordinal_alpha(items_by_raters: np.ndarray) -> float | None:
    """Krippendorff's alpha, ordinal, by the `krippendorff` package (it wants raters by items);
    None where it is undefined (fewer than two distinct scores, nothing pairable)."""
    try:
        value = float(krippendorff.alpha(reliability_data=items_by_raters.T, level_of_measurement="ordinal"))
    except (ValueError, ZeroDivisionError):
        return None
    return None if math.isnan(value) else value


def one_hot_pairs(reference: list[Score], judged: list[str]) -> np.ndarray:
    """(items, 3, 3) one confusion cell per item (rows: reference, columns: judge), so a bootstrap
    that resamples items sums them (`summed_metric`). A judge label outside the scale (a verdict
    that did not parse) is an empty matrix: the item counts as a unit, never as a grade."""
    cells = np.zeros((len(reference), len(SCALE), len(SCALE)))
    for i, (ref, got) in enumerate(zip(reference, judged)):
        if got in SCALE:
            cells[i, SCALE.index(ref), SCALE.index(got)] = 1
    return cells


def agreement_row(group: str, ratings: list[Rating], judges: dict[str, dict[str, str]], *, seed: int,
                  resamples: int) -> AgreementRow:
    alpha = resampled_metric(reliability_matrix(ratings), ordinal_alpha, seed=seed, resamples=resamples)
    votes = consensus(ratings)
    kappas, confusions = {}, {}
    for name, labels in judges.items():
        items = [i for i in votes if i in labels]
        cells = one_hot_pairs([votes[i] for i in items], [labels[i] for i in items])
        kappas[name] = summed_metric(cells, cohen_kappa, seed=seed + 1, resamples=resamples)
        confusions[name] = cells.sum(axis=0).astype(int).tolist()
    return AgreementRow(group=group, items=len(votes), ratings=len(ratings), alpha=alpha, kappa=kappas,
                        confusion=confusions)


def agreement_table(study: Study, judges: dict[str, dict[str, str]] | None = None, *, seed: int = STUDY_SEED,
                    resamples: int = STUDY_RESAMPLES) -> list[AgreementRow]:
    """One row per trigger type, then OVERALL (all items pooled: the study printed no such row).
    `judges` maps a judge's name to its label per item id, in SCALE spelling; the published
    judge is always the first column."""
    kind = {it.item_id: it.trigger_type for it in study.items}
    all_judges = {PUBLISHED: {it.item_id: str(it.judge_score) for it in study.items}} | (judges or {})
    def of_type(t: str) -> Callable[[Rating], bool]:
        return lambda r: kind[r.item_id] == t

    groups: list[tuple[str, Callable[[Rating], bool]]] = [(t, of_type(t)) for t in TRIGGER_TYPES]
    groups.append((OVERALL, lambda r: True))
    return [agreement_row(name, [r for r in study.ratings if keep(r)], all_judges, seed=seed, resamples=resamples)
            for name, keep in groups]


# ---------------------------------------------------------------- the study's quality exclusion
# The study's README: raters are excluded "under the pre-registered quality criterion", a
# quadratic-weighted kappa below 0.10 against the judge over at least 5 items.
QUALITY_KAPPA = 0.10
QUALITY_MIN_ITEMS = 5


class RaterQuality(BaseModel):
    rater: str
    items: int
    kappa_quadratic: float | None = Field(description="the rater's scores against the published judge's")
    excluded: bool


def rater_quality(study: Study, *, threshold: float = QUALITY_KAPPA,
                  min_items: int = QUALITY_MIN_ITEMS) -> list[RaterQuality]:
    """Each rater's quadratic-weighted kappa against the published judge over the items they
    scored, and whether the study's quality criterion excludes them (kappa below `threshold` with
    at least `min_items` items; an undefined kappa excludes nobody)."""
    judge = {it.item_id: str(it.judge_score) for it in study.items}
    out = []
    for rater in sorted({r.annotator_id for r in study.ratings}):
        mine = {r.item_id: r.score for r in study.ratings if r.annotator_id == rater}  # the later score wins
        confusion = np.zeros((len(SCALE), len(SCALE)))
        for item, score in mine.items():
            if judge.get(item) in SCALE:
                confusion[SCALE.index(score), SCALE.index(judge[item])] += 1
        kappa = cohen_kappa(confusion, weights="quadratic")
        n = int(confusion.sum())
        out.append(RaterQuality(rater=rater, items=n, kappa_quadratic=kappa,
                                excluded=kappa is not None and n >= min_items and kappa < threshold))
    return out


def without_raters(study: Study, raters: Iterable[str]) -> Study:
    """The study with these raters' ratings left out; an id the study does not have is an error
    naming it and the ids it has."""
    drop = set(raters)
    have = {r.annotator_id for r in study.ratings}
    unknown = sorted(drop - have)
    if unknown:
        raise HarnessError(f"--exclude-rater {unknown[0]}: no such rater in {study.folder / RESULTS_DIR} "
                           f"(raters: {', '.join(sorted(have))})")
    kept = [r for r in study.ratings if r.annotator_id not in drop]
    rated = {r.item_id for r in kept}
    return study.model_copy(update={"ratings": kept,
                                    "unrated": [it.item_id for it in study.items if it.item_id not in rated]})


# ---------------------------------------------------------------- the study's own figures
def published_differences(folder: Path, rows: list[AgreementRow], tolerance: float = 1e-9) -> list[str]:
    """Each stored figure of `analysis_stats.json` (per trigger type: items, ratings, alpha and its
    CI, kappa against the published judge and its CI, the confusion matrix) that our rows do not
    reproduce within `tolerance`; empty: all reproduced. Call with rows computed at the study's
    seed and resamples."""
    stored = _read_json(folder / STATS_FILE, STATS_FILE).get("per_trigger_type") or {}
    ours = {r.group: r for r in rows}
    diffs: list[str] = []
    for kind, figures in stored.items():
        row = ours.get(kind)
        if row is None:
            diffs.append(f"{kind}: no row")
            continue
        k = row.kappa[PUBLISHED]
        pairs = [("n_items", row.items, figures.get("n_items")), ("n_ratings", row.ratings, figures.get("n_ratings")),
                 ("krippendorff_alpha", row.alpha.value, figures.get("krippendorff_alpha")),
                 ("cohen_kappa_consensus_vs_judge", k.value, figures.get("cohen_kappa_consensus_vs_judge"))]
        pairs += [(f"krippendorff_alpha_ci95[{i}]", v, (figures.get("krippendorff_alpha_ci95") or [None, None])[i])
                  for i, v in enumerate((row.alpha.ci_low, row.alpha.ci_high))]
        pairs += [(f"cohen_kappa_ci95[{i}]", v, (figures.get("cohen_kappa_ci95") or [None, None])[i])
                  for i, v in enumerate((k.ci_low, k.ci_high))]
        matrix = figures.get("confusion_matrix") or {}
        pairs += [(f"confusion_matrix[{h}][{j}]", row.confusion[PUBLISHED][a][b], matrix.get(h, {}).get(j))
                  for a, h in enumerate(SCALE) for b, j in enumerate(SCALE)]
        for name, got, want in pairs:
            if want is None or got is None or abs(float(got) - float(want)) > tolerance:
                diffs.append(f"{kind} {name}: ours {got}, stored {want}")
    return diffs


# ---------------------------------------------------------------- re-judging the items
def judge_items_corpus(study: Study) -> list[dict[str, JsonValue]]:
    """The items as rows of a ProactBench corpus, one row per item with its one trigger, so the
    `proact-judge` suite re-grades each stored reply with the benchmark's judge (same prompt,
    same parser) and pairs it with the published judge's score (the row's stored label)."""
    rows: list[dict[str, JsonValue]] = []
    for it in study.items:
        history = it.dialogue_history
        turns: list[JsonValue] = [{"turn": t + 1, "user_message": history[2 * t].content,
                  "assistant_response": history[2 * t + 1].content if 2 * t + 1 < len(history) else it.model_response}
                 for t in range((len(history) + 1) // 2)]
        uuid, scenario, style = (it.dialogue_id.split("__") + ["", "", ""])[:3]
        index = int(style[1:]) if style[1:].isdigit() and 1 <= int(style[1:]) <= 24 else 1
        rows.append({
            "blueprint_id": it.dialogue_id, "scenario_id": scenario or it.dialogue_id,
            "unique_id_eval": f"{ROW_PREFIX}__style{index}__{it.item_id}",
            "uuid": uuid or None, "category_key": it.persona_category, "style_combination_index": index,
            "evaluated_model": it.evaluated_model, "num_turns_completed": len(turns), "turn_records": turns,
            "trigger_points": [{"turn": it.turn_index,
                                "evaluation_rubric": {"type": it.trigger_type, **it.rubric},
                                "evaluation_result": {"status": "EVALUATED", "score": it.judge_score.upper()}}]})
    return rows


def check_corpus_turns(study: Study) -> None:
    """Each item's history must end at its trigger turn (2 * turn - 1 messages), or the re-judged
    reply would be graded against the wrong conversation."""
    for it in study.items:
        if len(it.dialogue_history) != 2 * it.turn_index - 1 or it.dialogue_history[-1].role != "user":
            raise HarnessError(f"{study.folder / ITEMS_FILE}: item {it.item_id}: dialogue_history has "
                               f"{len(it.dialogue_history)} messages, expected {2 * it.turn_index - 1} ending with "
                               f"the user's message at turn {it.turn_index}")


def labels_from_pairs(records: Iterable[Any]) -> dict[str, str]:
    """item id -> the re-judging judge's label in SCALE spelling (SKIPPED / ERROR kept as is)."""
    out = {}
    for rec in records:
        for pair in rec.scores.get("pairs", []):
            label = pair["predicted"]
            item = rec.sample_id.split("__style", 1)[-1].split("__", 1)[-1]  # the row id's tail is the item id
            out[item] = label.capitalize() if label in GRADES else label
    return out
