"""The registered claim "Recovery is the hardest trigger type": computed from the sixteen shared
metrics files (read there, never copied), its estimates checked against plain arithmetic on those
files, and a perturbed release -- Recovery made the easiest type -- turning the verdict over."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from environments.proact.claims import ARMS, CLAIM, METRIC_KEY, METRICS_GLOB, recovery_verdict
from harness.claims.prereg import entry_for, load_log
from harness.claims.registry import families
from harness.errors import HarnessError
from tests.conftest import SHARED_DATA

EVAL = SHARED_DATA / "proactbench" / "release" / "dataset" / "eval"


@pytest.fixture(scope="module")
def eval_dir() -> Path:
    if len(list(EVAL.glob(METRICS_GLOB))) != 16:
        pytest.skip(f"the release's sixteen metrics files not found in {EVAL}; set HARNESS_SHARED_DATA")
    return EVAL


def _scores(folder: Path) -> dict[str, dict[str, float]]:
    return {f.name: {k: json.loads(f.read_text())["metrics"][f"eval/proactivity_{k}_weighted_score"] for k in ARMS}
            for f in sorted(folder.glob(METRICS_GLOB))}


def test_the_claim_is_registered_and_found_by_the_core():
    family = families()["proact"]
    assert family.claims == (CLAIM,)
    assert entry_for(CLAIM, load_log(family.log)) is not None
    assert family.suite_of is None and "recovery-claim" in family.verdict_command


def test_the_verdict_is_computed_from_the_shared_files(eval_dir):
    verdict = recovery_verdict(eval_dir)
    scores = _scores(eval_dir)
    assert verdict.seeds == len(scores) == 16 and verdict.criterion_hash == CLAIM.criterion_hash()
    for cond, other in zip(verdict.conditions, ARMS[1:]):
        diffs = np.array([s["recovery"] - s[other] for s in scores.values()])
        half = stats.t.ppf(0.975, diffs.size - 1) * diffs.std(ddof=1) / np.sqrt(diffs.size)
        assert cond.estimate == pytest.approx(diffs.mean())
        assert cond.ci_high == pytest.approx(diffs.mean() + half)
        expected = "holds" if diffs.mean() + half < 0 else "fails" if diffs.mean() - half > 0 else "undecided"
        assert cond.outcome == expected
    outcomes = {c.outcome for c in verdict.conditions}
    assert verdict.verdict == ("reproduced" if outcomes == {"holds"} else
                               "not reproduced" if "fails" in outcomes else "inconclusive")
    lowest = sum(min(s, key=s.__getitem__) == "recovery" for s in scores.values())
    assert f"in {lowest} of 16 models" in verdict.note


def _perturbed(eval_dir: Path, tmp_path: Path, swap_with: str) -> Path:
    """A copy of the release in which each model's Recovery score trades places with another type's."""
    copy = tmp_path / "eval"
    copy.mkdir()
    for file in eval_dir.glob(METRICS_GLOB):
        data = json.loads(file.read_text())
        m = data["metrics"]
        a, b = METRIC_KEY.format(kind="recovery"), METRIC_KEY.format(kind=swap_with)
        m[a], m[b] = m[b], m[a]
        (copy / file.name).write_text(json.dumps(data))
    return copy


def test_recovery_made_the_easiest_type_turns_the_verdict(eval_dir, tmp_path):
    original = recovery_verdict(eval_dir)
    # Recovery takes the best of the three scores in every model: it is now the easiest type.
    copy = tmp_path / "easiest"
    copy.mkdir()
    for file in eval_dir.glob(METRICS_GLOB):
        data = json.loads(file.read_text())
        m = data["metrics"]
        keys = [METRIC_KEY.format(kind=k) for k in ARMS]
        best = max(m[k] for k in keys)
        others = sorted((m[k] for k in keys), reverse=True)[1:]
        m[keys[0]], m[keys[1]], m[keys[2]] = best, others[0], others[1]
        (copy / file.name).write_text(json.dumps(data))
    flipped = recovery_verdict(copy)
    assert flipped.verdict != original.verdict
    assert flipped.verdict in ("not reproduced", "inconclusive")
    assert all(c.estimate is not None and c.estimate >= 0 for c in flipped.conditions)
    assert "in 0 of 16 models" in flipped.note


def test_swapping_recovery_with_emergent_reverses_that_condition(eval_dir, tmp_path):
    original = {c.condition: c.estimate for c in recovery_verdict(eval_dir).conditions}
    swapped = recovery_verdict(_perturbed(eval_dir, tmp_path, "emergent"))
    first = swapped.conditions[0]
    assert first.estimate == pytest.approx(-original[first.condition])


def test_a_folder_without_the_sixteen_files_is_refused(eval_dir, tmp_path):
    copy = tmp_path / "eval"
    copy.mkdir()
    for file in sorted(eval_dir.glob(METRICS_GLOB))[:15]:
        shutil.copy(file, copy / file.name)
    with pytest.raises(HarnessError, match="15 metrics files"):
        recovery_verdict(copy)
