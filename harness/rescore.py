"""`harness score`: the config of a run that scores another run's transcripts again.

The new run keeps everything that decided the transcripts (suite, version, options, corpus,
seed, the solver's models -- recorded, never called) and changes only the scoring: the scorer
and its judge(s). Samples keep their source seeds, so re-scoring with the source's own judge and
cache makes the very same calls and reproduces its scores exactly.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.records import RunConfig, RunFolder
from harness.spec import judge_panel
from harness.suite import Suite, get_suite, role_family


def rescore_config(run_dir: Path, run_id: str, *, scorer: str | None, judge_models: list[str],
                   judge_max_tokens: int | None = None, base_url: str | None = None) -> tuple[RunConfig, Suite]:
    source = RunFolder(run_dir, run_id).read_manifest()
    suite = get_suite(source.suite, source.config.suite_options)
    if suite.version != source.suite_version:
        raise HarnessError(f"run {run_id} used {suite.name} version {source.suite_version}, installed is "
                           f"{suite.version}: its transcripts cannot be scored by this version's scorers")
    chosen = suite.scorer(scorer)
    models = {r: spec for r, spec in source.config.models.items() if role_family(r) not in chosen.roles}
    if judge_models:
        if "judge" not in chosen.roles:
            raise HarnessError(f"--judge-model: scorer {chosen.name!r} of {suite.name} calls no judge; drop it")
        models |= judge_panel(judge_models)
    else:
        models |= {r: spec for r, spec in source.config.models.items() if role_family(r) in chosen.roles}
    missing = [r for r in chosen.roles if not any(role_family(m) == r for m in models)]
    if missing:
        raise HarnessError(f"scorer {chosen.name!r} needs a {missing[0]} model and run {run_id} has none: "
                           f"pass --{missing[0].replace('_', '-')}-model SPEC")
    config = source.config.model_copy(update={
        "models": models, "scorer": chosen.name, "source_run": run_id,
        "judge_max_tokens": judge_max_tokens if judge_max_tokens is not None else source.config.judge_max_tokens,
        "base_url": base_url or source.config.base_url,
    })
    return config, suite
