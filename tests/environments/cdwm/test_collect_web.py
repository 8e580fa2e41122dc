"""`harness cdwm collect` on the web world: the collected deltas are the sites' server ledger
(replayed in a fresh episode: the same deltas, and together exactly the ledger's entries), and
the held-out website never reaches training."""

from __future__ import annotations

import json

import pytest

from environments.cdwm.collect import CollectConfig, Shard, parse_heldout, play_shard, split_types
from environments.cdwm.deltas import Delta, merge
from environments.web.explore import WORLD


def test_heldout_website_stays_out_of_training():
    held = parse_heldout(None, ("web",))["web"]
    assert held == ("mail",)
    for split in ("train", "validation"):
        assert {t for t, _ in split_types(WORLD, split, held)} == {"shop", "travel"}
    assert split_types(WORLD, "heldout_task_type", held) == [("mail", None)]
    # Train and validation play disjoint tasks of the same sites.
    train = {WORLD.spec("shop", 2 * k, 0, None)["task_id"] for k in range(40)}
    valid = {WORLD.spec("shop", 2 * k + 1, 0, None)["task_id"] for k in range(40)}
    assert train and valid and not train & valid


@pytest.mark.browser
def test_web_deltas_equal_the_server_ledger():
    config = CollectConfig(
        worlds=("web",), transitions=8, shard_size=8, irreversible_rate=0.3, heldout=parse_heldout(None, ("web",))
    )
    try:
        rows = play_shard(config, Shard("web", "train", 0, 8))
        assert len(rows) == 8
        # A check on empty deltas compares nothing: the shard must change the world, irreversibly too.
        assert any(r["facts"] for r in rows) and any(not r["reversible"] for r in rows)
        episodes: dict[str, list[dict]] = {}
        for r in rows:
            episodes.setdefault(r["episode"], []).append(r)
        for steps in episodes.values():
            ep = WORLD.open(json.loads(steps[0]["task"]))
            assert ep.observation.text == steps[0]["observation"]
            for r in steps:
                result = ep.env.step(r["action"])
                assert result.delta.model_dump_json() == r["delta"], (r["episode"], r["step"], r["action"])
            # The rows' deltas together are exactly what the server's ledger recorded.
            ledger = merge([e.delta for e in ep.env.env.ledger]) if ep.env.env.ledger else Delta()
            recorded = merge([Delta.model_validate_json(r["delta"]) for r in steps])
            assert sorted(map(str, recorded.facts())) == sorted(map(str, ledger.facts()))
    finally:
        WORLD.shutdown()
