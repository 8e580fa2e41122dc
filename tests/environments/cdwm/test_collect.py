"""`harness cdwm collect`: deltas are the environments' own (replayed), the seed fixes the dataset,
a killed collection resumes to the same dataset, held-out task types stay out of training, the
rule perturbation changes an effect, and bad input is one clear error."""

from __future__ import annotations

import json

import datasets
import pytest

from environments.cdwm.collect import CollectConfig, collect, load_world, parse_heldout, parse_worlds, plan_shards
from harness.errors import HarnessError
from tests.conftest import harness_cli

WORLDS = ("household", "minigrid")


def config(seed: int = 0, transitions: int = 40, worlds: tuple[str, ...] = WORLDS, **kw) -> CollectConfig:
    # Household rows cost ~0.1 s each here (an engine reset per episode): keep its share tiny.
    return CollectConfig(worlds=worlds, transitions=transitions, seed=seed, shard_size=5,
                         heldout=parse_heldout(None, worlds), **kw)


def rows_of(path) -> dict[str, list[dict]]:
    dd = datasets.load_from_disk(str(path / "dataset"))
    return {split: dd[split].to_list() for split in dd}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    out = tmp_path_factory.mktemp("collect") / "base"
    collect(out, config())
    return out


def test_deltas_equal_the_environment_replayed(base):
    """Replaying each recorded episode's actions in a fresh environment gives the same deltas."""
    rows = [r for split in rows_of(base).values() for r in split]
    episodes: dict[str, list[dict]] = {}
    for r in rows:
        episodes.setdefault(r["episode"], []).append(r)
    checked = {w: 0 for w in WORLDS}
    for steps in episodes.values():
        world = load_world(steps[0]["world"])
        if checked[world.name] >= 3:
            continue
        ep = world.open(json.loads(steps[0]["task"]))
        try:
            for r in sorted(steps, key=lambda r: r["step"]):
                result = ep.env.step(r["action"])
                assert result.delta.model_dump_json() == r["delta"], (r["episode"], r["step"], r["action"])
                assert result.delta.reversible == r["reversible"]
        finally:
            ep.close()
        checked[world.name] += 1
    assert checked == {"household": 3, "minigrid": 3}
    # The deltas are not all empty: the replay compared real changes.
    assert sum(1 for r in rows if r["facts"]) > len(rows) / 2
    assert {r["source"] for r in rows} >= {"plan", "off_plan"}


def test_same_seed_same_dataset_other_seed_differs(base, tmp_path):
    again = tmp_path / "again"
    collect(again, config())
    assert rows_of(again) == rows_of(base)
    other = tmp_path / "other"
    collect(other, config(seed=1))
    assert rows_of(other)["train"] != rows_of(base)["train"]


def test_killed_collection_resumes_to_the_same_dataset(base, tmp_path):
    out = tmp_path / "killed"
    done = []

    def kill_after_two(shard):
        done.append(shard.name)
        if len(done) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        collect(out, config(), on_shard=kill_after_two)
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(manifest["shards"]) == sorted(done) and not (out / "dataset").exists()
    (out / "shards" / "half-written.jsonl.tmp").write_text("{")  # a kill mid-write leaves only a tmp file
    replayed = []
    collect(out, config(), on_shard=lambda s: replayed.append(s.name))
    assert not set(replayed) & set(done)  # finished shards are not played again
    assert len(replayed) + 2 == len(plan_shards(config()))
    assert rows_of(out) == rows_of(base)


def test_splits_are_disjoint_in_task_type_and_task(base):
    splits = rows_of(base)
    for world in WORLDS:
        types = {s: {r["task_type"] for r in rows if r["world"] == world} for s, rows in splits.items()}
        tasks = {s: {r["task"] for r in rows if r["world"] == world} for s, rows in splits.items()}
        assert types["heldout_task_type"] == set(load_world(world).default_heldout)
        assert not types["heldout_task_type"] & (types["train"] | types["validation"])
        assert not tasks["train"] & tasks["validation"]
    assert {r["world"] for r in splits["heldout_rule"]} == {"minigrid"}
    assert {r["perturbation"] for r in splits["heldout_rule"]} == {"key_consumed"}


def test_rule_perturbation_changes_what_unlocking_does(tmp_path):
    out = tmp_path / "grid"
    collect(out, CollectConfig(worlds=("minigrid",), transitions=1500, seed=3, shard_size=500,
                               heldout=parse_heldout(None, ("minigrid",))))
    splits = rows_of(out)

    def unlocks(rows):
        return [r for r in rows if "attr | door:yellow | locked | false" in r["facts"]]

    trained, perturbed = unlocks(splits["train"]), unlocks(splits["heldout_rule"])
    assert trained and perturbed
    # In training the key stays in hand; under `key_consumed` the same toggle also takes it away.
    assert not any("rel- | agent | carries | key:yellow" in r["facts"] for r in trained)
    assert all("rel- | agent | carries | key:yellow" in r["facts"] for r in perturbed)


def test_bad_input_is_one_clear_error(tmp_path):
    with pytest.raises(HarnessError, match="--worlds 'household,atlantis': unknown world atlantis"):
        parse_worlds("household,atlantis")
    with pytest.raises(HarnessError, match="--heldout: minigrid task types nowhere are unknown"):
        parse_heldout("minigrid:nowhere", ("minigrid",))
    foreign = tmp_path / "exported"
    (foreign / "dataset").mkdir(parents=True)
    (foreign / "transitions.jsonl").write_text("{}\n")
    with pytest.raises(HarnessError, match="--out .*exported: the folder holds files but no manifest.json"):
        collect(foreign, config(worlds=("minigrid",)))
    other = tmp_path / "other-schema"
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps({"schema": "something-else/3"}))
    with pytest.raises(HarnessError, match="manifest.json: schema 'something-else/3'"):
        collect(other, config(worlds=("minigrid",)))
    mine = tmp_path / "mine"
    collect(mine, config(worlds=("minigrid",), transitions=10))
    with pytest.raises(HarnessError, match=r"other settings \(seed\)"):
        collect(mine, config(worlds=("minigrid",), transitions=10, seed=9))
    damaged = json.loads((mine / "manifest.json").read_text())
    name = next(iter(damaged["shards"]))
    del damaged["shards"][name]["sha256"]
    (mine / "manifest.json").write_text(json.dumps(damaged))
    with pytest.raises(HarnessError, match=rf"manifest.json: field `shards.{name}.sha256` is missing; choose another"):
        collect(mine, config(worlds=("minigrid",), transitions=10))
    res = harness_cli("cdwm", "collect", "--out", str(tmp_path / "x"), "--worlds", "minigrid,web2")
    assert res.returncode != 0 and "--worlds 'minigrid,web2': unknown world web2" in res.stderr + res.stdout
