"""Roles as data from the command line: the general form names any role of any suite --
`--role ROLE=SPEC` (its model) and `--role-config ROLE.KEY=VALUE` (its endpoint or a generation
override: base_url, max_tokens, temperature) -- and the older flags stay as shorthands for it
(`harness.cli.options` lists them; they arrive here as the command's extra arguments):

    --judge-model SPEC (repeatable: a panel)   = --role judge=SPEC [--role judge_2=SPEC ...]
    --ROLE-model SPEC, for each role the suite has (--planner-model, --user-model, --world-model)
    --max-tokens N / --temperature T           = --role-config assistant.max_tokens=N / .temperature=T
    --judge-max-tokens N                       = --role-config judge.max_tokens=N, for every judge of a panel
    --role-base-url ROLE=URL                   = --role-config ROLE.base_url=URL
    --agent NAME / --action-format FORM        = --suite-option agent=NAME / action_format=FORM
    --allow-embedded ROLE                      lets ROLE default to the embedded model (see below)

A suite's roles bring their own `--ROLE-model` shorthand. Where the general form and a shorthand
name the same thing, the general form wins. No role name is special here beyond the defaults
(the model under test is the assistant and, unless named, the world model; the judge is a panel).

No silent default judge: a role left unnamed falls back to the embedded 135M model, which is right
for the demo (everything embedded) and wrong for a real model under test, where it would grade
(measured: PASS to almost everything) or simulate the user without anyone having chosen it. So when
the model under test is not the embedded model, an unnamed graded or simulating role is an error
before any call, naming the flag; `--allow-embedded ROLE` (repeatable) opts in.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ValidationError

from harness.errors import HarnessError, invalid
from harness.providers.embedded import is_embedded
from harness.records import RoleConfig
from harness.spec import DEFAULT_MODEL, ModelSpec, judge_panel, panel_roles
from harness.suite import role_family

# One of a role's settings (a RoleConfig field but its model): as a RoleConfig dumps it, or as the
# command line wrote it (text, which RoleConfig coerces).
Setting = str | int | float


# ---------------------------------------------------------------- the roles of one run
class RoleFlags(BaseModel):
    """What the command line said about roles and suite options, general form and shorthands."""

    models: dict[str, str] = {}  # --role ROLE=SPEC
    settings: dict[str, dict[str, str]] = {}  # --role-config ROLE.KEY=VALUE
    judges: list[str] = []  # --judge-model, in order
    role_models: dict[str, str] = {}  # --ROLE-model SPEC
    options: dict[str, str] = {}  # --agent, --action-format
    panel_settings: dict[str, str] = {}  # --judge-max-tokens: every judge of the panel
    allow_embedded: list[str] = []  # --allow-embedded ROLE: may default to the embedded model


def pairs(items: Sequence[str], flag: str, example: str = "judge=openai/gpt-4o", form: str = "ROLE=VALUE",
          ) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise HarnessError(f"{flag} {item!r}: write it as {form}, e.g. {example}")
        out[key.strip()] = value.strip()
    return out


def role_settings(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """`--role-config judge.max_tokens=256` -> {"judge": {"max_tokens": "256"}}."""
    out: dict[str, dict[str, str]] = {}
    for key, value in pairs(items, "--role-config", "judge.max_tokens=256", "ROLE.KEY=VALUE").items():
        role, dot, name = key.partition(".")
        if not dot or name not in ("base_url", *RoleConfig.GENERATION):
            raise HarnessError(f"--role-config {key}={value}: write it as ROLE.KEY=VALUE with KEY one of base_url, "
                               f"{', '.join(RoleConfig.GENERATION)} (e.g. judge.max_tokens=256)")
        out.setdefault(role, {})[name] = value
    return out


def parse_role_flags(role: Sequence[str], role_config: Sequence[str], extra: Sequence[str]) -> RoleFlags:
    """The general form (`--role`, `--role-config`) and the shorthands among the extra arguments.
    An extra argument that is not a shorthand is an error naming it."""
    flags = RoleFlags(models=pairs(role, "--role"), settings=role_settings(role_config))
    tokens = list(extra)
    while tokens:
        token = tokens.pop(0)
        flag, eq, value = token.partition("=")
        if not flag.startswith("--"):
            raise HarnessError(f"unexpected argument {token!r}: see --help")
        if not eq:
            if not tokens or tokens[0].startswith("--"):
                raise HarnessError(f"{flag} needs a value, or no such option: see --help")
            value = tokens.pop(0)
        name = flag[2:].replace("-", "_")
        if flag == "--judge-model":
            flags.judges.append(value)
        elif flag in ("--max-tokens", "--temperature"):
            flags.settings.setdefault("assistant", {}).setdefault(name, value)
        elif flag == "--judge-max-tokens":
            flags.panel_settings["max_tokens"] = value
        elif flag == "--role-base-url":
            for r, url in pairs([value], "--role-base-url", "judge=http://host:8000/v1").items():
                flags.settings.setdefault(r, {}).setdefault("base_url", url)
        elif flag in ("--agent", "--action-format"):
            flags.options[name] = value
        elif flag == "--allow-embedded":
            flags.allow_embedded.append(value)
        elif name.endswith("_model") and name != "_model":
            flags.role_models[name[: -len("_model")]] = value
        else:
            raise HarnessError(f"no such option: {flag} (see --help)")
    return flags


def assign_roles(roles: Sequence[str], model: str, flags: RoleFlags, base: dict[str, RoleConfig] | None = None,
                 ) -> dict[str, RoleConfig]:
    """role -> RoleConfig for every role of the run: `--role` first, then the shorthands, then
    `base` (a source run's roles, for `score`), then the embedded default (the world model
    defaults to the model under test). Several judges make a panel (judge, judge_2, ...)."""
    shorthand: dict[str, str] = {}  # role -> the --ROLE-model flag that named it
    for stem in flags.role_models:  # --planner-model names `planner`, --world-model names `world_model`
        role = next((r for r in (stem, f"{stem}_model") if r in roles), None)
        if role is None:
            raise HarnessError(f"--{stem.replace('_', '-')}-model: this run has no role {stem!r} "
                               f"(roles: {', '.join(roles)}); drop it")
        shorthand[role] = stem
    if flags.judges and "judge" not in roles:
        raise HarnessError(f"--judge-model: this run calls no judge (roles: {', '.join(roles)}); drop it")
    base = base or {}
    defaults = {"assistant": model, "world_model": model}
    given = {"assistant": "--model"} if "assistant" in roles else {}
    models = {r: base[r].model if r in base else defaults.get(r, DEFAULT_MODEL) for r in roles}
    for role, stem in shorthand.items():
        models[role], given[role] = flags.role_models[stem], f"--{stem.replace('_', '-')}-model"
    if "judge" in models and flags.judges:
        models = {r: m for r, m in models.items() if role_family(r) != "judge"} | judge_panel(flags.judges)
        given |= {r: "--judge-model" for r in panel_roles(models)}
    elif "judge" in models:
        models |= {r: rc.model for r, rc in base.items() if role_family(r) == "judge"}
    for r, spec in flags.models.items():
        if r not in models and role_family(r) not in models:
            raise HarnessError(f"--role {r}={spec}: this run has no role {r!r} (roles: {', '.join(models)})")
        models[r], given[r] = spec, f"--role {r}="
    for r, flag in given.items():  # what the user wrote is named in the error
        ModelSpec.parse(models[r], flag=flag.rstrip("="))
    # A role keeps the base's endpoint and overrides only while it keeps the base's model.
    settings: dict[str, dict[str, Setting]] = {r: base[r].model_dump(exclude={"model"}, exclude_none=True)
                                           for r in models if r in base and base[r].model == models[r]}
    for r in panel_roles(models):
        settings.setdefault(r, {}).update(flags.panel_settings)
    for r, values in flags.settings.items():
        if r not in models:
            raise HarnessError(f"--role-config {r}.{next(iter(values))}=...: this run has no role {r!r} "
                               f"(roles: {', '.join(models)})")
        settings.setdefault(r, {}).update(values)
    out = {r: role_config(r, spec, settings.get(r, {})) for r, spec in models.items()}
    defaulted = [r for r in models if r not in given and r not in base and r not in defaults]
    refuse_silent_embedded(models, models.get("assistant", model), defaulted, flags.allow_embedded)
    return out


def refuse_silent_embedded(models: dict[str, str], under_test: str, defaulted: Sequence[str],
                           allowed: Sequence[str]) -> None:
    """An error when a role nobody named (`defaulted`) would be the embedded model while the model
    under test (the assistant's, or `--model` for a suite without one, such as a judge-only suite)
    is not (see the module's docstring); `allowed`: roles (or role families) opted in."""
    for role in allowed:
        if role not in models and role_family(role) not in models:
            raise HarnessError(f"--allow-embedded {role}: this run has no role {role!r} (roles: {', '.join(models)})")
    if is_embedded(under_test):
        return
    for role in defaulted:
        if is_embedded(models[role]) and role not in allowed and role_family(role) not in allowed:
            flag = "--judge-model SPEC" if role_family(role) == "judge" else f"--{role.replace('_', '-')}-model SPEC"
            raise HarnessError(
                f"the {role} role is not named, and the model under test ({under_test}) is not the embedded model: "
                f"the {role} would silently be the embedded 135M model ({models[role]}). Name it with {flag} "
                f"(or --role {role}=SPEC), or opt in with --allow-embedded {role}")


def role_config(role: str, model: str, settings: dict[str, Setting]) -> RoleConfig:
    try:
        return RoleConfig(model=model, **settings)
    except ValidationError as exc:
        key = ".".join(map(str, exc.errors()[0]["loc"]))
        raise HarnessError(invalid(exc, f"--role-config {role}.{key}={settings.get(key)!r}",
                                   f"give {role}.{key} a value of its kind")) from None
