"""`harness score`: the config of a run that scores another run's transcripts again.

The new run keeps everything that decided the transcripts (suite, version, options, corpus,
seed, the solver's models -- recorded, never called) and changes only the scoring: the scorer
and its judge(s). Samples keep their source seeds, so re-scoring with the source's own judge and
cache makes the very same calls and reproduces its scores exactly.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.records import RunConfig
from harness.run_folder import RunFolder
from harness.roles import RoleFlags, assign_roles
from harness.spec import DEFAULT_MODEL
from harness.suite import Suite, get_suite, role_family


def rescore_config(run_dir: Path, run_id: str, *, scorer: str | None, flags: RoleFlags | None = None,
                   base_url: str | None = None) -> tuple[RunConfig, Suite]:
    """The config of a re-score of `run_id`: its roles, with the scorer's roles as the flags name
    them (default: the source run's), and the scorer, source and endpoint."""
    flags = flags or RoleFlags()
    source = RunFolder(run_dir, run_id).read_manifest()
    suite = get_suite(source.suite, source.config.suite_options)
    if suite.version != source.suite_version:
        raise HarnessError(f"run {run_id} used {suite.name} version {source.suite_version}, installed is "
                           f"{suite.version}: its transcripts cannot be scored by this version's scorers")
    chosen = suite.scorer(scorer)
    if flags.role_models or flags.options or flags.settings.get("assistant"):
        given = [*(f"--{r.replace('_', '-')}-model" for r in flags.role_models), *(f"--{k}" for k in flags.options),
                 *(["assistant's generation settings"] if flags.settings.get("assistant") else [])]
        raise HarnessError(f"{given[0]}: a re-score calls only the scorer's roles ({', '.join(chosen.roles) or 'none'}); "
                           "drop it")
    if flags.judges and "judge" not in chosen.roles:
        raise HarnessError(f"--judge-model: scorer {chosen.name!r} of {suite.name} calls no judge; drop it")
    kept = {r: rc for r, rc in source.config.roles.items() if role_family(r) not in chosen.roles}
    scoring = {r: rc for r, rc in source.config.roles.items() if role_family(r) in chosen.roles}
    missing = [r for r in chosen.roles if r not in scoring and not (r == "judge" and flags.judges)
               and r not in flags.models]
    if missing:
        raise HarnessError(f"scorer {chosen.name!r} needs a {missing[0]} model and run {run_id} has none: "
                           f"pass --role {missing[0]}=SPEC")
    # Roles the scorer calls, from the flags over the source run's; every other role as it ran.
    scored = assign_roles(chosen.roles, DEFAULT_MODEL, flags, base=scoring)
    config = source.config.with_roles(kept | scored).model_copy(update={
        "scorer": chosen.name, "source_run": run_id, "base_url": base_url or source.config.base_url})
    return config, suite
