"""Hand-set behaviour policies for the closed-loop attacker (issue 41, item 2): policies in the same
softmax-linear class as the learner (`closed_loop.ClosedLoopPolicy`), written by hand to visit
states the untrained reference rarely reaches, so their draws can seed the groups preference
learning pairs. A hand draw is off-policy (its trajectory joins the pairs, not the KL estimate) and
its log-probabilities under the learner and the reference are as exact as any other trajectory's.

- `steer_brake` (session 27, "steer-brake"): reads only the ego's s and d in the base block; steers
  into the ego's lane and brakes when the ego is behind. Measured on highway it crashes a lot, but
  almost always by its own fault (an unsafe cut-in), which the fault gate voids.
- `cut_in` (session 28, "cut-in"): reads the "gaps" block (`closed_loop.gap_features`): it moves
  into the ego's lane only while the ego, behind in the neighbouring lane, is 0-2 s past the safe
  cut-in gap (a cut-in there, then a brake, is the follower's fault: `geometry.py`'s rule 2c), stays
  out below the safe gap and speeds up to open it, and brakes once the ego is behind it in its lane.

`hand_policy(name, k, feature_set)` builds one by its name (`HAND_POLICIES`), in the learner's shape.

May import: numpy, `environments.adv0.sim.closed_loop`.
"""

from __future__ import annotations

from typing import Literal

from environments.adv0.sim.closed_loop import (
    ACTIONS,
    EGO_LANES,
    K_NEAREST,
    OWN_FEATURES,
    ClosedLoopPolicy,
    FeatureSet,
    n_features,
)

HandPolicy = Literal["steer-brake", "cut-in"]
HAND_POLICIES: tuple[HandPolicy, ...] = ("steer-brake", "cut-in")
EGO_S, EGO_D = OWN_FEATURES + 1, OWN_FEATURES + 2  # the ego's block in the base features: present, s, d, dv
UNSAFE, NEAR, FAR = 0, 1, 2  # `closed_loop.MARGIN_BINS_S`: below the safe gap, 0-1 s and 1-2 s over it
LEFT, SAME, RIGHT = range(len(EGO_LANES))  # the ego's lane relative to the attacker's


def _actions() -> list[tuple[str, str]]:
    return [(lat, lon) for lat, lon in (a.split(":") for a in ACTIONS)]


def steer_brake(
    k: int = K_NEAREST,
    feature_set: FeatureSet = "base",
    steer: float = 3.0,
    brake: float = 4.0,
    accelerate: float = 2.0,
    keep_bias: float = 2.0,
    hold_bias: float = 1.0,
) -> ClosedLoopPolicy:
    """"steer-brake": reads only the ego's block of the base features (s = ego.s / S_SCALE,
    d = ego.d / D_SCALE; 0 when no ego is observed), so it is the same policy whatever the feature
    set, and with no ego in range it is the reference:

    - `steer` * d on "right" and -`steer` * d on "left" (every longitudinal action): d > 0 is an
      ego to the right (a higher lane index), so it moves towards the ego's lane, and the pull
      fades as it gets there (keep's `keep_bias` then wins);
    - -`brake` * s on "brake": an ego behind (s < 0) makes it brake, the more the farther behind
      it is (the brake check: the follower must close the gap by braking in turn);
    - `accelerate` * s on "accelerate": an ego ahead makes it speed up to get back in front;
    - the reference's biases (`keep_bias` on "keep", `hold_bias` on "hold"), so it keeps its lane
      and speed when the ego's pull is weak.
    """
    ref = ClosedLoopPolicy.reference(k, keep_bias, hold_bias, feature_set)
    weights = ref.weights.copy()
    for i, (lat, lon) in enumerate(_actions()):
        weights[i, EGO_D] = steer * ((lat == "right") - (lat == "left"))
        weights[i, EGO_S] = accelerate * (lon == "accelerate") - brake * (lon == "brake")
    return ClosedLoopPolicy(weights, ref.bias, k, feature_set)


def gap_column(k: int, margin_bin: int, lane: int) -> int:
    """The feature index of "the ego is behind in `lane`, its margin in `margin_bin`" (the "gaps" set)."""
    return n_features(k) + len(EGO_LANES) + margin_bin * len(EGO_LANES) + lane


def cut_in(
    k: int = K_NEAREST,
    cut: float = 4.0,
    stay_out: float = 3.0,
    brake: float = 4.0,
    open_gap: float = 3.0,
    chase: float = 2.0,
    no_chase_in_lane: float = 4.0,
    keep_bias: float = 2.0,
    hold_bias: float = 1.0,
) -> ClosedLoopPolicy:
    """"cut-in": "cut in at a safe gap, then brake", the band the fault gate credits (a cut-in at
    or past the follower's safe gap makes a later rear-end the follower's fault, brake or not). It
    needs the "gaps" feature set. Its logits are the reference's biases (`keep_bias` on "keep",
    `hold_bias` on "hold") plus, with m(b, lane) the margin-bin x lane feature (1 when the ego is
    behind in that lane with its margin over the safe gap in bin b) and s the ego's base s:

    - on "left" (every longitudinal action): `cut` * (m(0-1 s, left) + m(1-2 s, left)) -
      `stay_out` * m(below, left); on "right" the same with the right lane. So it moves into the
      ego's lane only in the credited band, and below the safe gap it keeps out more than the
      reference does. Past 2 s no bin is set: it waits (keeps its lane) for the ego to come closer;
    - on "brake": `brake` * (m(below, same) + m(0-1 s, same) + m(1-2 s, same)): the ego is behind it
      in its lane, after its cut-in or as an established follower (a brake check; its rear-end is
      the follower's fault either way);
    - on "accelerate": `open_gap` * (m(below, left) + m(below, right)) -- an ego behind in the next
      lane closer than the safe gap: speed up to open the gap until the band is reached --, plus
      `chase` * s -- an ego ahead: get in front of it; an ego behind: do not run away --, minus
      `no_chase_in_lane` * (the ego is in its lane) -- never close on an ego ahead in its own lane
      (a rear-end of the ego is the attacker's fault).

    With no ego in range every feature it reads is 0 and it is the reference.
    """
    ref = ClosedLoopPolicy.reference(k, keep_bias, hold_bias, "gaps")
    weights = ref.weights.copy()
    same_lane = n_features(k) + SAME
    for i, (lat, lon) in enumerate(_actions()):
        for side, lane in (("left", LEFT), ("right", RIGHT)):
            if lat == side:
                weights[i, gap_column(k, NEAR, lane)] += cut
                weights[i, gap_column(k, FAR, lane)] += cut
                weights[i, gap_column(k, UNSAFE, lane)] -= stay_out
        if lon == "brake":
            for margin_bin in (UNSAFE, NEAR, FAR):
                weights[i, gap_column(k, margin_bin, SAME)] += brake
        if lon == "accelerate":
            weights[i, gap_column(k, UNSAFE, LEFT)] += open_gap
            weights[i, gap_column(k, UNSAFE, RIGHT)] += open_gap
            weights[i, EGO_S] += chase
            weights[i, same_lane] -= no_chase_in_lane
    return ClosedLoopPolicy(weights, ref.bias, k, "gaps")


def hand_policy(name: str, k: int = K_NEAREST, feature_set: FeatureSet = "base") -> ClosedLoopPolicy:
    """The hand policy `name` in the learner's shape (`k`, `feature_set`: its trajectories join the
    learner's batch). "cut-in" reads the "gaps" block, so it needs that feature set."""
    if name == "steer-brake":
        return steer_brake(k, feature_set)
    if name == "cut-in":
        if feature_set != "gaps":
            raise ValueError(
                f"hand policy 'cut-in' reads the 'gaps' features; the learner has feature_set={feature_set!r} "
                "(use features 'gaps', or hand policy 'steer-brake')"
            )
        return cut_in(k)
    raise ValueError(f"hand policy {name!r} is not one of {list(HAND_POLICIES)}")

