"""Scenario families as data: a JSON or TOML file declares a highway-env environment id, its
configuration, the traffic density and the closed-loop attacker's limits, and `register_family`
makes it a family `highway.start_episode` plays like the built-in ones -- a long-tail family without
code (suite `adv0`: `--suite-option family_file=PATH`).

    name = "exit-dense"            # the family's name in results (must not shadow a built-in one)
    env_id = "exit-v0"             # any highway-env environment id (gymnasium's registry)
    density = 1.5                  # optional: highway-env's `vehicles_density` (where the env has it)
    duration_s = 15                # our cap on the episode
    speed_range = [20, 30]         # the defender's progress scale (m/s)
    held_out = true                # a generalisation family (never trained on)
    [config]                       # highway-env configuration keys of that environment
    vehicles_count = 15
    [attacker_limits]              # closed_loop.ClosedLoopLimits
    max_brake = 5.0

Every family keeps the project's common timing and observation (5 Hz simulation, a decision a
second, the Kinematics observation) so every defender reads it; the file may not override them.
Bad input -- an unknown id, a configuration key that environment does not know, a density where it
has none, limits that leave nothing feasible -- is one error naming the family and the key.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from environments.adv0.sim import highway
from environments.adv0.sim.closed_loop import ClosedLoopLimits
from environments.adv0.sim.scenario import DATA_HELD_OUT
from harness.errors import invalid

_FIXED = tuple(highway._COMMON)  # the common timing and observation: what makes every defender fit every family
DATA_FAMILIES: dict[str, "FamilyFile"] = {}  # registered from files in this process


class FamilyFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1)
    env_id: str
    config: dict[str, JsonValue] = Field(default_factory=dict)  # highway-env's configuration keys, as the file has them
    density: float | None = Field(None, gt=0.0)
    duration_s: float = Field(20.0, gt=0.0, le=120.0)
    speed_range: tuple[float, float] = (20.0, 30.0)
    held_out: bool = True
    attacker_limits: ClosedLoopLimits = Field(default_factory=ClosedLoopLimits)


def _fail(name: str, key: str, why: str) -> ValueError:
    return ValueError(f"scenario family {name!r}: {key}: {why}")


def _read(path: Path) -> dict[str, JsonValue]:
    if not path.is_file():
        raise ValueError(f"family file {path}: no such file")
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"family file {path}: not {'TOML' if path.suffix.lower() == '.toml' else 'JSON'} ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"family file {path}: the top level must be a table of keys")
    return data


def parse_family(data: dict[str, JsonValue], source: str = "<data>") -> FamilyFile:
    """`data` as a family declaration; `source` names where it came from (a file's path)."""
    name = str(data.get("name", Path(source).stem))
    try:
        family = FamilyFile.model_validate(data)
    except ValidationError as exc:
        keys = ", ".join(FamilyFile.model_fields)
        raise ValueError(invalid(exc, f"{source}: scenario family {name!r}",
                                 f"see the format in environments/adv0/sim/families.py (keys: {keys})")) from None
    if family.name in highway.FAMILIES and family.name not in DATA_FAMILIES:
        raise _fail(family.name, "name", f"shadows a built-in family ({', '.join(highway.WORLD_FAMILIES)})")
    lo, hi = family.speed_range
    if not 0.0 <= lo < hi:
        raise _fail(family.name, "speed_range", f"{[lo, hi]} must be [low, high] with 0 <= low < high")
    return family


def env_class_of(family: FamilyFile) -> Any:  # a highway-env class (highway-env ships no types)
    """The highway-env class behind `env_id` (gymnasium's registry, filled by importing highway_env)."""
    import highway_env  # noqa: F401  -- registers highway-env's ids with gymnasium
    from gymnasium.envs.registration import load_env_creator, registry
    from highway_env.envs.common.abstract import AbstractEnv

    spec = registry.get(family.env_id)
    if spec is None:
        known = sorted(k for k, s in registry.items() if str(s.entry_point).startswith("highway_env"))
        raise _fail(family.name, "env_id", f"unknown highway-env id {family.env_id!r}; known: {', '.join(known)}")
    creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    if not (isinstance(creator, type) and issubclass(creator, AbstractEnv)):
        raise _fail(family.name, "env_id", f"{family.env_id!r} is not a highway-env environment")
    return creator


def spec_of(family: FamilyFile) -> highway.FamilySpec:
    env_class = env_class_of(family)
    known = env_class.default_config()
    for key in family.config:
        if key not in known:
            raise _fail(family.name, f"config.{key}", f"{family.env_id} has no configuration key {key!r}")
        if key in _FIXED:
            raise _fail(family.name, f"config.{key}", "is fixed for every family (5 Hz simulation, a decision a "
                                                      "second, the Kinematics observation)")
    config = {**highway._COMMON, "other_vehicles_type": "highway_env.vehicle.behavior.IDMVehicle", **family.config}
    if family.density is not None:
        if "vehicles_density" not in known:
            raise _fail(family.name, "density", f"{family.env_id} has no traffic density (`vehicles_density`)")
        config["vehicles_density"] = family.density
    return highway.FamilySpec(env_class, config, family.duration_s, family.speed_range)


def register_family(family: FamilyFile) -> str:
    """Make `family` playable by name (idempotent for the same declaration)."""
    spec = spec_of(family)
    previous = DATA_FAMILIES.get(family.name)
    if previous is not None and previous != family:
        raise _fail(family.name, "name", "is already registered with another declaration in this process")
    highway.FAMILIES[family.name] = spec
    DATA_FAMILIES[family.name] = family
    if family.held_out:
        DATA_HELD_OUT.add(family.name)
    return family.name


def load_family_file(path: str | Path) -> FamilyFile:
    """Read, validate and register a family file; returns its declaration."""
    file = Path(path)
    family = parse_family(_read(file), source=str(file))
    register_family(family)
    return family
