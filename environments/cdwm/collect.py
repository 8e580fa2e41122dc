"""`harness cdwm collect`: (observation, action, ground-truth delta) transitions at scale, from the
worlds themselves, as a Hugging Face dataset -- training data for a delta world model.

Each world offers an exploring policy that needs no model (`WORLDS`: the household world's gold
plans and ALFWorld's planner expert, a breadth-first planner on MiniGrid levels, the web tasks'
gold plans, ScienceWorld's gold paths, a heuristic / random player on Atari). The collector
mixes it, per step and at seeded rates, with off-plan actions (uniform over what the world admits
now) and irreversible ones (a roll commits the episode to walk to the nearest irreversible action:
slicing, lava, an irreversible trap's script on the web, a wrong focus in ScienceWorld, letting
the ball past on Atari). Every row's delta is the environment's own (its ledger / typed delta),
never inferred here. A world whose evaluation has side effects answers `won` itself.

Splits: `train` and `validation` play the same task types on disjoint tasks (even / odd task
indices); `heldout_task_type` plays only the task types held out of both; `heldout_rule` plays
training task types under a rule perturbation a world offers (MiniGrid: `key_consumed`, Atari:
`mirrored_controls`, web: `order_keeps_cart` and `cancel_refunds_nothing`, science: `put_closes`);
a world's `rule_changes` says what each changes, and the card repeats it. The web world's task
types are its sites, so its held-out task type is a held-out website.

Determinism and resumption: the work is a fixed list of shards (world, split, index, size), each
played from its own `random.Random(f"{seed}:{world}:{split}:{index}")`, so a shard's rows depend
on nothing else. A shard is written whole (tmp file, then rename) and then entered in
`manifest.json` with its hash; a killed collection skips the shards the manifest lists and
re-plays the rest, and the assembled dataset equals an uninterrupted run's.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import JsonValue, TypeAdapter, ValidationError
from typing_extensions import NotRequired, TypedDict  # pydantic validates the manifest's TypedDicts only from here before 3.12

from environments.cdwm.deltas import Delta
from harness.errors import HarnessError, invalid

SCHEMA = "harness-cdwm-collect/1"
# World name -> module with WORLD (an exploring policy of the world's own). Named by string: the
# world folders import `cdwm`, so `cdwm` may not import them (the acyclic contract).
WORLDS = {"household": "environments.household.explore", "minigrid": "environments.procgen.explore",
          "web": "environments.web.explore", "science": "environments.science.explore",
          "atari": "environments.atari.explore"}
SPLITS = ("train", "validation", "heldout_task_type", "heldout_rule")
SHARE = {"validation": 0.1, "heldout_task_type": 0.1, "heldout_rule": 0.1}  # train: the rest
COLUMNS = ("world", "split", "task_type", "task", "perturbation", "episode", "step", "intent", "observation",
           "admissible", "action", "action_class", "source", "valid", "delta", "facts", "reversible",
           "irreversible_cost", "done", "won")
SOURCES = ("plan", "off_plan", "irreversible")
# The observation after the action (the generative baseline's target, generative_model.py). Not in
# COLUMNS: a folder collected before it existed still loads, and the column absent means "not collected".
NEXT = "next_observation"
# What a world keeps beside its observation text for the generative baseline, before and after the
# action (`Observation.info["status"]`: the household world's place and carried object,
# environments/household/reader.py; "" for a world that keeps none). Optional as NEXT is.
STATUS, NEXT_STATUS = "status", "next_status"
OPTIONAL = (NEXT, STATUS, NEXT_STATUS)


class EpisodeColumns(TypedDict):
    """The columns every row of one collected episode shares."""

    world: str
    split: str
    task_type: str
    perturbation: str  # "" when the rules are the world's own
    task: str  # the world's episode spec, as canonical JSON
    episode: str  # SHARD/N


class TransitionRow(EpisodeColumns):
    """One collected transition (`COLUMNS`): a line of a shard as written (a plain dict, so the
    shards and the dataset keep their format) and a row of the assembled dataset."""

    step: int
    intent: str
    observation: str
    admissible: list[str]
    action: str
    action_class: str
    source: str  # one of SOURCES
    valid: bool
    delta: str  # the environment's Delta, as JSON
    facts: list[str]
    reversible: bool
    irreversible_cost: float
    done: bool
    won: bool
    next_observation: NotRequired[str]  # NEXT: absent in rows collected before it was written
    status: NotRequired[str]  # STATUS, NEXT_STATUS: absent in rows collected before they were written
    next_status: NotRequired[str]


class ConfigJson(TypedDict):
    """`CollectConfig` as the manifest records it."""

    worlds: list[str]
    transitions: int
    seed: int
    off_plan_rate: float
    irreversible_rate: float
    shard_size: int
    heldout: dict[str, list[str]]


class ShardEntry(TypedDict):
    """A finished shard in the manifest: its rows, the hash of its file, the time it took."""

    rows: int
    sha256: str
    seconds: float


class Manifest(TypedDict):
    """`manifest.json`: the schema, the configuration and the shards done so far."""

    schema: str
    config: ConfigJson
    shards: dict[str, ShardEntry]


MANIFEST = TypeAdapter(Manifest)


def features(next_observation: bool = False, status: bool = False) -> Any:
    """The dataset's schema; with `next_observation`, the NEXT column too; with `status`, STATUS and
    NEXT_STATUS."""
    import datasets

    text = datasets.Value("string")
    return datasets.Features({
        **{c: text for c in ("world", "split", "task_type", "task", "perturbation", "episode", "intent", "observation",
                             "action", "action_class", "source", "delta")},
        "step": datasets.Value("int64"), "admissible": datasets.Sequence(text), "valid": datasets.Value("bool"),
        "facts": datasets.Sequence(text), "reversible": datasets.Value("bool"),
        "irreversible_cost": datasets.Value("float64"), "done": datasets.Value("bool"), "won": datasets.Value("bool"),
        **({NEXT: text} if next_observation else {}),
        **({STATUS: text, NEXT_STATUS: text} if status else {}),
    })


@dataclass(frozen=True)
class CollectConfig:
    worlds: tuple[str, ...]
    transitions: int
    seed: int = 0
    off_plan_rate: float = 0.2
    irreversible_rate: float = 0.03
    shard_size: int = 250
    heldout: dict[str, tuple[str, ...]] = field(default_factory=dict)  # world -> held-out task types

    def as_json(self) -> ConfigJson:
        return ConfigJson(worlds=list(self.worlds), transitions=self.transitions, seed=self.seed,
                          off_plan_rate=self.off_plan_rate, irreversible_rate=self.irreversible_rate,
                          shard_size=self.shard_size,
                          heldout={w: list(t) for w, t in sorted(self.heldout.items())})


@dataclass(frozen=True)
class Collected:
    """What `collect` made: rows per split and world, seconds per world, the dataset and its card."""

    counts: dict[str, dict[str, int]]
    seconds: dict[str, float]
    dataset: Path
    card: Path


@dataclass(frozen=True)
class Shard:
    world: str
    split: str
    index: int
    rows: int

    @property
    def name(self) -> str:
        return f"{self.world}-{self.split}-{self.index:04d}"


def load_world(name: str) -> Any:
    return importlib.import_module(WORLDS[name]).WORLD


def parse_worlds(spec: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(w.strip().lower() for w in spec.split(",") if w.strip()))
    unknown = [w for w in names if w not in WORLDS]
    if unknown or not names:
        raise HarnessError(f"--worlds {spec!r}: unknown world {', '.join(unknown) or '(none given)'}; "
                           f"choose from {', '.join(WORLDS)}")
    return names


def parse_heldout(spec: str | None, worlds: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """`world:type[+type],...` -> held-out task types; a world left out keeps its default."""
    held = {w: tuple(load_world(w).default_heldout) for w in worlds}
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        world, _, named = part.partition(":")
        world = world.strip().lower()
        if world not in worlds:
            raise HarnessError(f"--heldout {spec!r}: {world!r} is not among --worlds ({', '.join(worlds)})")
        held[world] = tuple(t.strip() for t in named.split("+") if t.strip())
    for world, types in held.items():
        known = load_world(world).task_types
        bad = [t for t in types if t not in known]
        if bad or not types or set(types) >= set(known):
            raise HarnessError(f"--heldout: {world} task types {', '.join(bad) or ', '.join(types) or '(none)'} "
                               f"{'are unknown' if bad else 'leave nothing to train on' if types else 'are empty'}; "
                               f"{world} has {', '.join(known)} (hold out at least one, not all)")
    return held


def plan_shards(config: CollectConfig) -> list[Shard]:
    """The fixed work list: the total shared evenly by the worlds, each world's share by the
    splits (`SHARE`; no rule split for a world without perturbations), cut into shards."""
    shards = []
    per_world, extra = divmod(config.transitions, len(config.worlds))
    for i, world in enumerate(config.worlds):
        n = per_world + (1 if i < extra else 0)
        offers_rule = bool(load_world(world).perturbations)
        quota = {s: int(n * r) for s, r in SHARE.items() if s != "heldout_rule" or offers_rule}
        quota = {"train": n - sum(quota.values()), **quota}
        for split in SPLITS:
            left, index = quota.get(split, 0), 0
            while left > 0:
                size = min(config.shard_size, left)
                shards.append(Shard(world, split, index, size))
                left, index = left - size, index + 1
    return shards


def split_types(world: Any, split: str, heldout: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """(task type, perturbation) pairs a split plays."""
    seen = [t for t in world.task_types if t not in heldout]
    if split == "heldout_task_type":
        return [(t, None) for t in heldout]
    if split == "heldout_rule":
        return [(t, p) for p, types in sorted(world.perturbations.items()) for t in types if t in seen]
    return [(t, None) for t in seen]


def play_shard(config: CollectConfig, shard: Shard) -> list[TransitionRow]:
    world = load_world(shard.world)
    rng = random.Random(f"{config.seed}:{shard.world}:{shard.split}:{shard.index}")
    pairs = split_types(world, shard.split, config.heldout[shard.world])
    if not pairs:
        raise HarnessError(f"--heldout: no {shard.world} task type is left for the {shard.split} split")
    rows: list[TransitionRow] = []
    episode = 0
    while len(rows) < shard.rows:
        task_type, perturbation = rng.choice(pairs)
        # Train plays even task indices, validation odd ones: the same types, never the same task.
        index = 2 * rng.randrange(1 << 29) + (1 if shard.split == "validation" else 0)
        spec = world.spec(task_type, index, config.seed, perturbation)
        rows += play_episode(config, world, spec, rng, EpisodeColumns(
            world=shard.world, split=shard.split, task_type=task_type, perturbation=perturbation or "",
            task=json.dumps(spec, sort_keys=True), episode=f"{shard.name}/{episode}"), shard.rows - len(rows))
        episode += 1
    return rows


def play_episode(config: CollectConfig, world: Any, spec: dict[str, JsonValue], rng: random.Random,
                 common: EpisodeColumns, limit: int) -> list[TransitionRow]:
    """One episode's rows. `spec` is the world's own episode spec (its JSON: each world types it)."""
    ep = world.open(spec)
    rows: list[TransitionRow] = []
    seeking = False
    try:
        obs = ep.observation
        for step in range(min(world.max_steps, limit)):
            admissible = ep.admissible()
            roll = rng.random()
            action, source = None, "plan"
            if seeking or roll < config.irreversible_rate:
                action, source = ep.toward_irreversible(), "irreversible"
                seeking = action is not None
            if action is None and (seeking or roll < config.irreversible_rate + config.off_plan_rate):
                action, source = rng.choice(admissible), "off_plan"
            if action is None:
                action = ep.expert()
                if action is None:  # the goal cannot be reached any more: the episode ends here
                    break
            if source != "plan":
                ep.detoured()
            result = ep.env.step(action)
            delta: Delta = result.delta
            if not delta.reversible:
                seeking = False  # it happened: back to the plan (or the episode is over)
            rows.append({**common, "step": step, "intent": ep.intent, "observation": obs.text, "admissible": admissible,
                         "action": action, "action_class": ep.env.action_class(action), "source": source,
                         "valid": bool(result.valid), "delta": delta.model_dump_json(),
                         "facts": sorted(" | ".join(str(x) for x in f) for f in delta.facts()),
                         "reversible": bool(delta.reversible), "irreversible_cost": float(delta.irreversible_cost),
                         "done": bool(result.done), "won": won(ep, bool(result.done)),
                         "next_observation": result.observation.text, "status": str(obs.info.get("status", "")),
                         "next_status": str(result.observation.info.get("status", ""))})
            obs = result.observation
            if result.done:
                break
    finally:
        ep.close()
    return rows


def won(ep: Any, done: bool) -> bool:
    """Whether the task is solved now; a world whose evaluation has side effects (the web's
    evaluator navigates) answers through its episode's `won(done)`."""
    if hasattr(ep, "won"):
        return bool(ep.won(done))
    return bool(ep.env.evaluate().get("success", 0.0) >= 1.0)


# -- the output folder -------------------------------------------------------------------------------

def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _shard_text(rows: list[TransitionRow]) -> str:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows)


def open_manifest(out: Path, config: CollectConfig) -> Manifest:
    """The manifest of `out` (new, or one this same configuration started); anything else in
    `out` is refused, naming the file."""
    path = out / "manifest.json"
    if path.is_file():
        try:
            manifest = json.loads(path.read_text())
        except ValueError as exc:
            raise HarnessError(f"{path}: not JSON ({exc}); not a `harness cdwm collect` manifest") from exc
        if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
            found = manifest.get("schema") if isinstance(manifest, dict) else None
            raise HarnessError(f"{path}: schema {found!r}, not {SCHEMA!r}: --out holds a dataset of another schema; "
                               f"choose another --out")
        if manifest.get("config") != config.as_json():
            theirs = manifest.get("config") or {}
            diff = sorted(k for k in set(theirs) | set(config.as_json()) if theirs.get(k) != config.as_json().get(k))
            raise HarnessError(f"--out {out}: a collection with other settings ({', '.join(diff)}) is there "
                               f"(see {path}); resume it with the same options or choose another --out")
        try:
            return MANIFEST.validate_python(manifest)
        except ValidationError as exc:
            raise HarnessError(invalid(exc, str(path), "choose another --out")) from None
    if out.exists() and any(out.iterdir()):
        raise HarnessError(f"--out {out}: the folder holds files but no manifest.json of `harness cdwm collect` "
                           f"(another schema, e.g. `harness cdwm export-transitions` output?); choose an empty folder")
    out.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(schema=SCHEMA, config=config.as_json(), shards={})
    _write_atomic(path, json.dumps(manifest, indent=1, sort_keys=True))
    return manifest


def _done(out: Path, manifest: Manifest, shard: Shard) -> bool:
    entry = manifest["shards"].get(shard.name)
    path = out / "shards" / f"{shard.name}.jsonl"
    if not entry or not path.is_file() or entry.get("rows") != shard.rows:
        return False  # (a shard of another plan's size is played again)
    return bool(hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"])


def collect(out: Path, config: CollectConfig, *, on_rows: Callable[[str, int], None] | None = None,
            on_shard: Callable[[Shard], None] | None = None) -> Collected:
    """Play every shard not yet done, then assemble `out/dataset` and the card `out/README.md`.
    `on_rows(world, n)` reports progress; `on_shard` is called after each shard is saved."""
    manifest = open_manifest(out, config)
    (out / "shards").mkdir(exist_ok=True)
    shards = plan_shards(config)
    for shard in shards:
        if _done(out, manifest, shard):
            if on_rows:
                on_rows(shard.world, shard.rows)
            continue
        start = time.perf_counter()
        rows = play_shard(config, shard)
        text = _shard_text(rows)
        _write_atomic(out / "shards" / f"{shard.name}.jsonl", text)
        manifest["shards"][shard.name] = ShardEntry(rows=len(rows), sha256=hashlib.sha256(text.encode()).hexdigest(),
                                                    seconds=round(time.perf_counter() - start, 3))
        _write_atomic(out / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True))
        if on_rows:
            on_rows(shard.world, len(rows))
        if on_shard:
            on_shard(shard)
    counts = assemble(out, shards)
    seconds: dict[str, float] = {}
    for shard in shards:
        seconds[shard.world] = seconds.get(shard.world, 0.0) + manifest["shards"][shard.name]["seconds"]
    write_card(out, config, counts, seconds)
    return Collected(counts, seconds, out / "dataset", out / "README.md")


def read_shard(path: Path) -> list[TransitionRow]:
    rows: list[TransitionRow] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        row = json.loads(line)
        if set(row) - set(OPTIONAL) != set(COLUMNS):
            raise HarnessError(f"{path}:{n}: columns {sorted(row)} are not this schema's ({SCHEMA})")
        try:
            Delta.model_validate_json(row["delta"])
        except ValidationError as exc:
            raise HarnessError(invalid(exc, f"{path}:{n}: its delta does not match the Delta schema",
                                       "collect it again with `harness cdwm collect`")) from None
        rows.append(row)
    return rows


def assemble(out: Path, shards: list[Shard]) -> dict[str, dict[str, int]]:
    """All shards, in plan order, as one DatasetDict (one split per split name) in `out/dataset`;
    returns split -> world -> rows."""
    import datasets

    datasets.disable_progress_bars()  # the command draws its own bar; theirs would interleave with it
    by_split: dict[str, list[TransitionRow]] = {s: [] for s in SPLITS}
    counts: dict[str, dict[str, int]] = {}
    for shard in shards:
        rows = read_shard(out / "shards" / f"{shard.name}.jsonl")
        by_split[shard.split] += rows
        counts.setdefault(shard.split, {}).setdefault(shard.world, 0)
        counts[shard.split][shard.world] += len(rows)
    # An optional column is in the dataset only when every row has it (shards of an older collection lack it).
    has_next, has_status = (all(c in r for rows in by_split.values() for r in rows) for c in (NEXT, STATUS))
    names = COLUMNS + ((NEXT,) if has_next else ()) + ((STATUS, NEXT_STATUS) if has_status else ())
    dd = datasets.DatasetDict({s: datasets.Dataset.from_list([{c: p[c] for c in names} for p in map(dict, rows)],
                                                                  features=features(has_next, has_status))
                               for s, rows in by_split.items() if rows})
    tmp = out / "dataset.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    dd.save_to_disk(str(tmp))
    shutil.rmtree(out / "dataset", ignore_errors=True)
    os.replace(tmp, out / "dataset")
    return counts


def write_card(out: Path, config: CollectConfig, counts: dict[str, dict[str, int]], seconds: dict[str, float]) -> None:
    worlds = list(config.worlds)
    lines = [
        "# CDWM transitions (`harness cdwm collect`)", "",
        "(observation, action, action class, ground-truth delta, reversibility, irreversible cost) rows from the "
        "worlds themselves, for training a delta world model. Load with `datasets.load_from_disk(\"dataset\")`.", "",
        f"Command: `harness cdwm collect --out {out.name} --worlds {','.join(worlds)} --transitions {config.transitions} "
        f"--seed {config.seed} --off-plan-rate {config.off_plan_rate} --irreversible-rate {config.irreversible_rate} "
        f"--shard-size {config.shard_size}` (schema `{SCHEMA}`; the same options give the same rows).", "",
        "## Counts", "", "| split | " + " | ".join(worlds) + " | all |", "|---|" + "---|" * (len(worlds) + 1),
    ]
    for split in SPLITS:
        row = [counts.get(split, {}).get(w, 0) for w in worlds]
        lines.append(f"| {split} | " + " | ".join(str(n) for n in row) + f" | {sum(row)} |")
    lines += ["", "## Splits", ""]
    for w in worlds:
        world = load_world(w)
        held = config.heldout[w]
        seen = [t for t in world.task_types if t not in held]
        changes = getattr(world, "rule_changes", {})  # what each perturbation changes, where the world says
        rule = (", ".join(f"`{p}`" + (f" ({changes[p]})" if p in changes else "")
                          + f" on {', '.join(t for t in ts if t in seen)}" for p, ts in sorted(world.perturbations.items()))
                or "none (this world offers no cheap rule perturbation)")
        lines.append(f"- **{w}**: train / validation task types {', '.join(seen)} (validation: other tasks of those "
                     f"types); held-out task types {', '.join(held)}; held-out rule perturbation: {rule}.")
    lines += [
        "", "## How it was collected", "",
        "- Policies (no model): household -- the task's gold plan, ALFWorld's planner expert after any detour; "
        "minigrid -- a breadth-first planner over the full level state; web -- the task's gold plan (its "
        "`reference_actions`), restarted from the start page after any detour; science -- ScienceWorld's gold path; "
        "atari -- keep the paddle with the ball (Breakout, Pong), cross (Freeway), seeded random play (Boxing).",
        f"- Mix, per step and seeded: off-plan action (uniform over the admissible actions) with probability "
        f"{config.off_plan_rate}; with probability {config.irreversible_rate} the episode turns to the nearest "
        "irreversible action (household: fetch a knife and slice; minigrid: walk into lava; web: an irreversible trap's "
        "script (the task's own, else the site's first), e.g. close the account, cancel a booking, send a mail; science: focus on an object the gold path does "
        "not; atari: move away from the ball) until one happens. "
        "Column `source` says which (`plan`, `off_plan`, `irreversible`).",
        "- Deltas are the environment's own typed deltas (household: the PDDL engine's facts; minigrid: the full "
        "level state; web: the sites' server ledger; science: the diff of the simulator's object "
        "tree; atari: objects read from the console's RAM), never predicted; `facts` is their flat fact list.",
        "", "## Wall time (this collection's shards)", "",
    ]
    for w in worlds:
        n = sum(counts.get(s, {}).get(w, 0) for s in SPLITS)
        rate = n / seconds[w] * 60 if seconds.get(w) else 0.0
        lines.append(f"- {w}: {n} transitions in {seconds.get(w, 0.0):.1f} s ({rate:,.0f} per minute)")
    (out / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
