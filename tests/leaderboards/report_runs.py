"""A run dir for the whole-report tests: an adv0 run whose crashes carry filmstrips, a prograf run
whose SVG is rendered, and saved claim checks of the papers family.

Records are written with the harness's records API and scored by the suites' own code (the
prograf verifier, adv0's metrics) from transcripts built here: running a model through highway-env
or the corpus would take minutes, and these tests are about the report, not the model.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

from harness.records import RunConfig, RunManifest, RunSummary, SampleRecord, now_iso
from harness.run_folder import RunFolder, RunIndex

HOSTILE = '<script>alert("x")</script>'
PAPERS = {"prefix_linear_forcing": "not reproduced", "ptq_priced_bitalloc": "reproduced", "made_up_task": "inconclusive"}


def _write(run_dir: Path, suite: str, version: str, headline: str, records: list[SampleRecord], metrics: dict,
           options: dict | None = None) -> str:
    run_id = f"{suite}-report-test"
    config = RunConfig(suite=suite, models={"assistant": "openai/report-test"}, suite_options=options or {})
    manifest = RunManifest(run_id=run_id, suite=suite, suite_version=version, config=config, config_hash=run_id,
                           started=now_iso(), ended=now_iso(), status="complete")
    folder = RunFolder(run_dir, run_id)
    folder.write_manifest(manifest)
    for rec in records:
        folder.append(rec)
    folder.close()
    summary = RunSummary(run_id=run_id, suite=suite, suite_version=version, headline_metric=headline, metrics=metrics)
    folder.write_summary(summary)
    index = RunIndex(run_dir)
    index.record(manifest, summary, len(records), 0)
    index.close()
    return run_id


def _record(sample_id: str, output: dict, scores: dict) -> SampleRecord:
    return SampleRecord(sample_id=sample_id, epoch=1, seed=0, status="ok", output=output, scores=scores,
                        started=now_iso(), duration_s=0.1)


def strip_png() -> str:
    """A small PNG standing in for a filmstrip: grey road, green ego, magenta attacker."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (240, 40), (100, 100, 100))
    draw = ImageDraw.Draw(img)
    draw.rectangle((30, 15, 45, 24), fill=(50, 200, 0))
    draw.rectangle((50, 12, 65, 21), fill=(230, 60, 200))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def adv0_run(run_dir: Path) -> str:
    from environments.adv0.metrics import EpisodeScores, driving_metrics

    def episode(i: int, crashed: bool, fault: str | None) -> tuple[dict, EpisodeScores]:
        scores = EpisodeScores(family="highway", held_out=False, attacked=True, manoeuvre="cut_in_brake", crashed=crashed,
                               defender_failure=fault == "defender", attacker_fault=fault == "attacker", near_miss=False,
                               min_ttc=0.0 if crashed else 3.2, reward=-1.0 if crashed else 0.8, mean_speed=24.5,
                               distance_m=180.0, steps=20, invalid_actions=0, attack_feasible=True,
                               failure_cluster="cut_in_brake|slot0|rear-end|dv1" if fault == "defender" else None)
        collision = {"t": 4.0 + i, "other": "attacker", "fault": fault, "rule": "rear-end: ego behind, closing"} if crashed else None
        output = {"episode": {"family": "highway", "seed": 1_000_000 + i, "collision": collision,
                              "attack": {"manoeuvre": "cut_in_brake", "slot": 0}},
                  "pictures": [{"caption": f"highway seed {1_000_000 + i}: crash {HOSTILE}", "png": strip_png()}] if crashed else []}
        return output, scores

    cases = [(0, True, "defender"), (1, True, "attacker"), (2, False, None)]
    made = [episode(*c) for c in cases]
    made[1][0]["pictures"].append({"caption": "not a png", "png": base64.b64encode(b"<svg onload=alert(1)>").decode()})
    records = [_record(f"highway/seed{1_000_000 + i}", out, s.model_dump()) for i, (out, s) in enumerate(made)]
    return _write(run_dir, "adv0", "0.1.0", "defender_failure_rate", records, driving_metrics([s for _, s in made]),
                  {"attacker": "scripted"})


def prograf_run(run_dir: Path) -> str:
    """Two geometry tasks in SVG (the reference, which passes, and a mutant, which fails a point) and a
    flowchart in DOT, verified with renders by the suite's own scorer code."""
    from environments.prograf.check.render import Renderer, cache_dir
    from environments.prograf.check.verify import verify
    from environments.prograf.generate.build import CORPUS
    from environments.prograf.metrics import prograf_metrics
    from environments.prograf.suite import point_summary
    from environments.prograf.task import load_tasks

    tasks = load_tasks(CORPUS)
    geometry = [t for t in tasks if t.category == "geometry" and t.mutants][:2]
    flow = next(t for t in tasks if t.category == "flowchart" and t.reference[0].format == "dot")
    cases = [(geometry[0], geometry[0].reference[0]), (geometry[1], geometry[1].mutants[0]), (flow, flow.reference[0])]
    renderer = Renderer(disk_cache=cache_dir())
    records = []
    try:
        for task, solution in cases:
            verdict = verify(task, solution.format, solution.code, renderer)
            output = {"task_id": task.id, "category": task.category, "format": solution.format, "code": solution.code}
            records.append(_record(task.id, output, point_summary(verdict) | {"category": task.category}))
    finally:
        renderer.close()
    return _write(run_dir, "prograf", "0.1.0", "pass_rate", records, prograf_metrics(records))


def papers_reports(run_dir: Path) -> None:
    """Saved claim verdicts, one per verdict, the way `harness papers check` saves them (RUN_DIR/claims/)."""
    from harness.claims import ClaimVerdict, ConditionResult, Departure, Look, save_verdict

    for task, verdict in PAPERS.items():
        outcome = {"reproduced": "holds", "not reproduced": "fails", "inconclusive": "undecided"}[verdict]
        cond = ConditionResult(condition=f"mean score({task}) >= 0.5 @ small", estimate=0.4, ci_low=0.3, ci_high=0.6,
                               n=5, level=0.95, outcome=outcome, seeds_needed=12 if outcome == "undecided" else None)
        save_verdict(run_dir, ClaimVerdict(
            claim=f"papers.{task}", sentence=f"the claim of {task} {HOSTILE}", setting="ours", criterion="c (5 seeds)",
            criterion_hash="0123456789abcdef", registered="2026-12-06", verdict=verdict, seeds=5, conditions=[cond],
            looks=[Look(seeds=5, level=0.95, verdict=verdict, conditions=[cond])],
            departures=[Departure(paper="uses real data", ours="use synthetic data", why="offline", effect="may favour it")],
            seeds_to_decide=12 if verdict == "inconclusive" else None, cells_s=10.0, wall_s=12.5))


def make_report_runs(run_dir: Path) -> Path:
    adv0_run(run_dir)
    prograf_run(run_dir)
    papers_reports(run_dir)
    return run_dir
