"""Defender failures split by the other vehicle of the contact (issue 41, session 28): the attacker,
background traffic, or "unknown" for a record that does not name it -- and the split printed beside
each check's defender-failure rates, on constructed episode results."""

from __future__ import annotations

from environments.adv0.checks import checks_exposure, verdicts
from environments.adv0.checks.cells import Cell
from environments.adv0.sim.scenario import EpisodeResult, failures_by_party, party_text


def episode(seed: int, other: str | None = None, fault: str = "defender") -> EpisodeResult:
    """A highway episode; `other` None: no crash; "": a collision record written without `other`."""
    data: dict[str, object] = dict(family="highway", seed=seed, attack=None, defender="idm", steps=10,
                                   duration_s=10.0, crashed=other is not None)
    if other is not None:
        collision: dict[str, object] = dict(t=5.0, fault=fault, rule="test", geometry=[])
        if other:
            collision["other"] = other
        data["collision"] = collision
    return EpisodeResult.model_validate(data)


def test_each_failure_names_its_other_party_and_a_record_without_it_is_unknown():
    assert episode(0, "attacker").failure_party == "attacker"
    assert episode(1, "bg:3", "shared").failure_party == "background"
    assert episode(2, "obstacle").failure_party == "background"  # merge's ramp end: not the attacker
    old = episode(3, "", "shared")  # loads, and is neither side
    assert old.collision is not None and old.collision.other == "" and old.failure_party == "unknown"
    # not defender failures: no party
    assert episode(4).failure_party is None
    assert episode(5, "attacker", "attacker").failure_party is None
    assert episode(6, "bg:1", "background").failure_party is None


def test_the_split_counts_only_defender_failures_and_prints_unknown_only_when_there_is_one():
    rs = [episode(0, "attacker"), episode(1, "attacker", "shared"), episode(2, "bg:0", "shared"),
          episode(3, "attacker", "attacker"), episode(4, "bg:2", "background"), episode(5)]
    assert failures_by_party(rs) == {"attacker": 2, "background": 1, "unknown": 0}
    assert party_text(failures_by_party(rs)) == "with the attacker 2 / with background 1"
    assert party_text(failures_by_party([*rs, episode(6, "", "defender")])) == (
        "with the attacker 2 / with background 1 / unknown 1"
    )
    # a saved count without the split (old record): the failures it does not account for are unknown
    assert party_text({}, 3) == "with the attacker 0 / with background 0 / unknown 3"
    assert party_text({"attacker": 1}, 3) == "with the attacker 1 / with background 0 / unknown 2"


def test_c3_prints_each_arms_split_beside_its_verdict_and_its_rate():
    adv0 = [episode(0, "attacker"), episode(1, "bg:1", "shared"), episode(2, "", "shared"), episode(3),
            episode(4, "attacker", "attacker")]
    other = [episode(0, "bg:0"), episode(1), episode(2), episode(3), episode(4)]
    cells = {arm: [Cell(check="C3", arm=arm, seed=0, episodes={"eval": adv0 if arm == "adv0" else other})]
             for arm in ("adv0", "random", "scripted", "cat")}
    finding = checks_exposure.judge_c3(cells)
    first = finding.parts[0]
    assert first.n == "3/5 vs 1/5"  # the judged counts are unchanged: the split is beside them
    assert first.by_party == (
        "adv0: with the attacker 1 / with background 1 / unknown 1; random: with the attacker 0 / with background 1"
    )
    assert finding.numbers["adv0: defender-failure rate"].endswith(
        "(3/5); with the attacker 1 / with background 1 / unknown 1"
    )
    text = verdicts.render(finding)
    assert (
        "    defender failures by the other vehicle: adv0: with the attacker 1 / with background 1 / unknown 1; "
        "cat: with the attacker 0 / with background 1"
    ) in text
    assert "  random: defender-failure rate: 0.200 [" in text and "(1/5); with the attacker 0 / with background 1" in text
