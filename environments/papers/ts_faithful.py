"""Task `ts_faithful_eval_mb`: the position paper's faithful transition-state (TS) evaluation --
a valid TS is a first-order saddle whose steepest-descent (IRC) paths connect the intended reactant
and product -- against the standard geometric metric (RMSD to the benchmark's reference TS), on the
Mueller-Brown surface with random Gaussian bumps (ours; numerics in ts_surface.py).

An entry is one elementary reaction on its own bumped surface: reactant and product are two
adjacent minima (A <-> C or C <-> B of Mueller-Brown, relaxed on the bumped surface) and the true
TS is the saddle between them (relaxed, then verified by the faithful checker). The benchmark's
reference TS (its "label") is the true TS, except on a share of implausible entries (ours: 30%),
whose label is what a careless workflow records: one of the minima, the other reaction's saddle,
or a point 0.15 off the saddle along its stable direction. Predictors: `cineb` (climbing-image
NEB on the entry's surface), `knn` and `mlp` (learned from the reactant and product coordinates
on the benchmark's training split, labels as recorded) and `midpoint` (of reactant and product).
The scorer measures RMSD to the label (the standard metric), distance to the true TS, and
validity by the faithful checker; and the share of the cell's implausible labels the checker
flags and of its clean labels it accepts.

The paper's argument (amendment, issue 43): a `panel` arm runs six predictors on the cell -- the four
above, `noisy_saddle` (the true TS jittered) and `eq_biased` (the true TS pulled towards its nearer
minimum) -- and reports how far the ranking by RMSD disagrees with the ranking by validity (Kendall
tau-b) and whether the RMSD-best is invalid; `along_path` measures whether a predictor's error points
towards equilibrium (along the true TS's negative mode). Setting `mb3d_coupled` repeats everything on
a 3-D surface with a coupled harmonic coordinate (ts_coupled.py).
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field

from scipy.stats import kendalltau

from environments.papers.base import CellResult, Claim, Condition, Departure, PaperOptions, PaperTask, describe_claim
from environments.papers.ts_coupled import CoupledSurface
from environments.papers.ts_surface import (
    MINIMA,
    SADDLES,
    Surface,
    climbing_image_neb,
    connects,
    egh,
    faithful_check,
    irc_ends,
    negative_modes,
    newton_stationary,
)

SETTINGS = ("mb_bumps", "mb3d_coupled")  # the 2-D surface; the same entries lifted onto the 3-D one (ts_coupled.py)
ENTRIES, TRAIN_ENTRIES = 30, 150  # test entries per seed; the fixed training split
BUMPS, BUMP_HEIGHT, BUMP_WIDTH = 4, 8.0, (0.1, 0.2)
BOX = ((-1.5, 1.2), (-0.3, 2.0))
IMPLAUSIBLE_SHARE = 0.3
IMPLAUSIBLE_KINDS = ("minimum", "other_saddle", "off_saddle")
OFF_SADDLE = 0.15
REACTIONS = (("A", "C", "AC"), ("C", "B", "CB"))
TRAIN_STREAM = 10_000  # training entries use seeds from here on, disjoint from the test seeds
NOISE = 0.05  # noisy_saddle: the true TS plus N(0, NOISE^2) per coordinate
EQ_PULL = 0.3  # eq_biased: the true TS moved this share of the way to the nearer of its two minima
PANEL = ("cineb", "mlp", "knn", "midpoint", "noisy_saddle", "eq_biased")  # ranked by RMSD and by validity
Solver = Literal["mlp", "knn", "midpoint", "cineb", "noisy_saddle", "eq_biased", "panel"]


class Options(PaperOptions):
    solver: Solver = Field(
        "mlp",
        description="mlp, knn, midpoint (learned/geometric predictors the paper "
        "criticises the metric for), cineb (the physics baseline), "
        "noisy_saddle, eq_biased (synthetic predictors), panel (all six, "
        "ranked by RMSD and by validity)",
    )


class Entry(BaseModel):
    surface: Surface | CoupledSurface
    reactant: tuple[float, ...]
    product: tuple[float, ...]
    true_ts: tuple[float, ...]
    label: tuple[float, ...]
    label_kind: str  # "true" or one of IMPLAUSIBLE_KINDS


def lifted(entry: Entry) -> Entry:
    """The entry on the 3-D coupled surface: its surface as the base, every point on the sheet
    (stationary points stay stationary with the same signature there; ts_coupled.py)."""
    assert isinstance(entry.surface, Surface)
    surface = CoupledSurface(base=entry.surface)
    up = {k: tuple(surface.lift(getattr(entry, k))) for k in ("reactant", "product", "true_ts", "label")}
    return Entry(surface=surface, label_kind=entry.label_kind, **up)


def on_setting(setting: str, entries: tuple[Entry, ...]) -> tuple[Entry, ...]:
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; use one of {SETTINGS}")
    return entries if setting == "mb_bumps" else tuple(lifted(e) for e in entries)


def random_surface(rng: np.random.Generator) -> Surface:
    return Surface(
        heights=rng.uniform(-BUMP_HEIGHT, BUMP_HEIGHT, BUMPS).tolist(),
        centres=[(float(rng.uniform(*BOX[0])), float(rng.uniform(*BOX[1]))) for _ in range(BUMPS)],
        widths=rng.uniform(*BUMP_WIDTH, BUMPS).tolist(),
    )


def relaxed_minimum(surface: Surface, name: str) -> np.ndarray | None:
    p, ok = newton_stationary(surface, np.array(MINIMA[name]))
    return p if ok and negative_modes(surface, p) == 0 else None


def relaxed_saddle(surface: Surface, name: str, reactant: np.ndarray, product: np.ndarray) -> np.ndarray | None:
    p, ok = newton_stationary(surface, np.array(SADDLES[name]))
    if not ok or negative_modes(surface, p) != 1 or not connects(irc_ends(surface, p), reactant, product):
        return None
    return p


def make_entry(stream: int, index: int) -> Entry:
    """Entry `index` of a seeded stream; surfaces whose bumps break the reaction are redrawn."""
    for attempt in range(100):
        rng = np.random.default_rng([stream, index, attempt])
        surface = random_surface(rng)
        first, second, saddle_name = REACTIONS[int(rng.integers(2))]
        relaxed = {n: relaxed_minimum(surface, n) for n in MINIMA}
        mins = {n: m for n, m in relaxed.items() if m is not None}
        if (
            len(mins) < len(MINIMA)
            or min(np.linalg.norm(mins[a] - mins[b]) for a, b in (("A", "B"), ("A", "C"), ("B", "C"))) < 0.1
        ):
            continue
        ts = relaxed_saddle(surface, saddle_name, mins[first], mins[second])
        if ts is None:
            continue
        reactant, product = (mins[first], mins[second]) if rng.random() < 0.5 else (mins[second], mins[first])
        label, kind = ts, "true"
        if rng.random() < IMPLAUSIBLE_SHARE:
            kind = IMPLAUSIBLE_KINDS[int(rng.integers(len(IMPLAUSIBLE_KINDS)))]
            label = implausible_label(surface, kind, ts, reactant, product, saddle_name, rng)
        return Entry(
            surface=surface,
            reactant=tuple(reactant),
            product=tuple(product),
            true_ts=tuple(ts),
            label=tuple(label),
            label_kind=kind,
        )
    raise RuntimeError(f"no valid surface in 100 draws for entry {index} of stream {stream}")


def implausible_label(
    surface: Surface,
    kind: str,
    ts: np.ndarray,
    reactant: np.ndarray,
    product: np.ndarray,
    saddle_name: str,
    rng: np.random.Generator,
) -> np.ndarray:
    """What a careless workflow records instead of the TS."""
    if kind == "minimum":
        return reactant if rng.random() < 0.5 else product
    if kind == "other_saddle":
        other = "CB" if saddle_name == "AC" else "AC"
        p, ok = newton_stationary(surface, np.array(SADDLES[other]))
        if ok and negative_modes(surface, p) == 1:
            return p
    stable = np.linalg.eigh(egh(surface, ts)[2][0])[1][:, 1]
    return ts + OFF_SADDLE * (1 if rng.random() < 0.5 else -1) * stable


@lru_cache(maxsize=16)
def cell_entries(setting: str, seed: int) -> tuple[Entry, ...]:
    return on_setting(setting, tuple(make_entry(seed, i) for i in range(ENTRIES)))


@lru_cache(maxsize=2)
def training_split(setting: str) -> tuple[Entry, ...]:
    return on_setting(setting, tuple(make_entry(TRAIN_STREAM, i) for i in range(TRAIN_ENTRIES)))


def features(entries: tuple[Entry, ...]) -> np.ndarray:
    """Reactant and product coordinates, ordered by x so that a reaction and its reverse agree."""
    rows = []
    for e in entries:
        pair = sorted([e.reactant, e.product])  # by x (then y, z)
        rows.append([*pair[0], *pair[1]])
    return np.array(rows)


K_NEIGHBOURS = 5


def knn_predict(setting: str, x: np.ndarray) -> np.ndarray:
    """The mean label of the K nearest training entries (Euclidean, in feature space)."""
    train = training_split(setting)
    x_train, y_train = features(train), np.array([e.label for e in train])
    dist = np.linalg.norm(x[:, None, :] - x_train[None, :, :], axis=2)
    nearest = np.argsort(dist, axis=1, kind="stable")[:, :K_NEIGHBOURS]
    return np.asarray(y_train[nearest].mean(axis=1))


@lru_cache(maxsize=2)
def trained_mlp(setting: str) -> Any:
    from sklearn.neural_network import MLPRegressor
    from threadpoolctl import threadpool_limits

    train = training_split(setting)
    model = MLPRegressor(hidden_layer_sizes=(64, 64), max_iter=3000, random_state=0, tol=1e-6)
    with threadpool_limits(1):
        return model.fit(features(train), np.array([e.label for e in train]))


def nearer_minimum(e: Entry) -> np.ndarray:
    ts, r, p = (np.array(x) for x in (e.true_ts, e.reactant, e.product))
    return r if np.linalg.norm(r - ts) <= np.linalg.norm(p - ts) else p


def predict(setting: str, seed: int, solver: str, entries: tuple[Entry, ...]) -> list[tuple[float, ...]]:
    if solver == "midpoint":  # linear interpolation between reactant and product
        return [tuple((np.array(e.reactant) + np.array(e.product)) / 2) for e in entries]
    if solver == "cineb":
        return [tuple(climbing_image_neb(e.surface, np.array(e.reactant), np.array(e.product))[0]) for e in entries]
    if solver == "noisy_saddle":  # a plausible geometry: the true TS, jittered
        noise = np.random.default_rng([seed, SETTINGS.index(setting), 7]).normal(
            0.0, NOISE, (len(entries), len(entries[0].true_ts))
        )
        return [tuple(np.array(e.true_ts) + n) for e, n in zip(entries, noise)]
    if solver == "eq_biased":  # pulled towards equilibrium: part of the way to the nearer minimum
        return [tuple(np.array(e.true_ts) + EQ_PULL * (nearer_minimum(e) - np.array(e.true_ts))) for e in entries]
    if solver in ("knn", "mlp"):
        x = features(entries)
        points = knn_predict(setting, x) if solver == "knn" else trained_mlp(setting).predict(x)
        return [tuple(p) for p in points]
    raise ValueError(f"unknown solver {solver!r}; use one of {TSFaithfulTask.solvers}")


@lru_cache(maxsize=16)
def label_checks(setting: str, seed: int) -> tuple[tuple[str, bool], ...]:
    """(label kind, accepted by the faithful checker) of every test entry's label."""
    return tuple(
        (e.label_kind, faithful_check(e.surface, np.array(e.label), np.array(e.reactant), np.array(e.product))[0])
        for e in cell_entries(setting, seed)
    )


def point_scores(entries: tuple[Entry, ...], points: np.ndarray) -> dict[str, float | None]:
    """One predictor's metrics on a cell: validity by the faithful checker, RMSD to the label,
    distances to the true TS and to the nearest minimum, and the equilibrium pull."""
    valid = [
        faithful_check(e.surface, p, np.array(e.reactant), np.array(e.product))[0] for e, p in zip(entries, points)
    ]
    to_ts = np.array([np.linalg.norm(p - np.array(e.true_ts)) for e, p in zip(entries, points)])
    to_min = np.array(
        [
            min(np.linalg.norm(p - np.array(e.reactant)), np.linalg.norm(p - np.array(e.product)))
            for e, p in zip(entries, points)
        ]
    )
    return {
        "validity": float(np.mean(valid)),
        "rmsd": float(np.mean([np.linalg.norm(p - np.array(e.label)) for e, p in zip(entries, points)])),
        "true_distance": float(to_ts.mean()),
        "min_distance": float(to_min.mean()),
        "nearer_minimum": float(np.mean(to_min < to_ts)),
        "along_path": along_path(entries, points),
    }


def along_path(entries: tuple[Entry, ...], points: np.ndarray) -> float | None:
    """Mean share of the error's squared length along the true TS's negative-curvature direction
    (the reaction coordinate, downhill to a minimum either way): 1/d for an error of random
    direction in d dimensions, 1 for a prediction slid towards a minimum along the path."""
    shares = []
    for e, p in zip(entries, points):
        err = p - np.array(e.true_ts)
        if np.linalg.norm(err) < 1e-9:
            continue
        v = np.linalg.eigh(egh(e.surface, np.array(e.true_ts))[2][0])[1][:, 0]
        shares.append(float(err @ v) ** 2 / float(err @ err))
    return float(np.mean(shares)) if shares else None


def rank_disagreement(scores: dict[str, dict[str, float | None]]) -> dict[str, float]:
    """Kendall's tau-b between the panel's ranking by RMSD (lower is better) and by validity
    (0 when either ranking is all ties), and whether the RMSD-best predictor is invalid on most
    entries (validity < 0.5; ties in RMSD go to the first in PANEL)."""
    rmsd = np.array([scores[n]["rmsd"] for n in PANEL], dtype=float)
    validity = np.array([scores[n]["validity"] for n in PANEL], dtype=float)
    tau = float(kendalltau(-rmsd, validity).statistic)
    best = int(np.argmin(rmsd))
    return {"rank_tau": 0.0 if np.isnan(tau) else tau, "rmsd_best_invalid": float(validity[best] < 0.5)}


class TSFaithfulTask(PaperTask[Options]):
    task = "ts_faithful_eval_mb"
    name = "papers.ts_faithful_eval_mb"
    version = "0.2.0"
    headline_metric = "validity@mb_bumps"
    Options = Options
    solvers = ("mlp", "knn", "midpoint", "cineb", "noisy_saddle", "eq_biased", "panel")
    settings = SETTINGS
    metric_names = (
        "validity",
        "rmsd",
        "true_distance",
        "min_distance",
        "nearer_minimum",
        "along_path",
        "rank_tau",
        "rmsd_best_invalid",
        "implausible_flagged",
        "clean_accepted",
    )
    lower_is_better = frozenset({"rmsd", "true_distance"})
    claim: ClassVar[Claim] = Claim(
        id=name,
        arms=solvers,
        settings=settings,
        sentence="Faithful transition-state evaluation (position paper): a valid TS is a first-order saddle (one "
        "imaginary frequency) connecting the intended reactant and product; geometric metrics reward "
        "plausible but wrong predictions",
        setting=f"Mueller-Brown + {BUMPS} random Gaussian bumps (|h| <= {BUMP_HEIGHT}, width {BUMP_WIDTH}) per entry; "
        f"reactions A<->C and C<->B; {ENTRIES} test entries per seed, {TRAIN_ENTRIES} fixed training entries; "
        f"{IMPLAUSIBLE_SHARE:.0%} of labels implausible (a minimum, the other saddle, or {OFF_SADDLE} off the saddle); "
        "validity: Newton-refines within 0.02 to a point with one negative Hessian eigenvalue whose "
        "steepest-descent paths end at the entry's reactant and product; the same entries lifted onto a 3-D "
        "surface with a coupled harmonic coordinate (mb3d_coupled); a panel of six predictors (CI-NEB, MLP, kNN, "
        f"midpoint, the true TS + N(0, {NOISE}^2) noise, the true TS pulled {EQ_PULL:.0%} of the way to its nearer "
        "minimum) ranked by RMSD to the label and by validity",
        conditions=[
            Condition(metric="rmsd", setting="mb_bumps", solver="mlp", versus="cineb", op="<=", threshold=0.0),
            Condition(metric="validity", setting="mb_bumps", solver="mlp", op="<=", threshold=0.5),
            Condition(metric="validity", setting="mb_bumps", solver="cineb", op=">=", threshold=0.9),
            Condition(metric="implausible_flagged", setting="mb_bumps", solver="cineb", op=">=", threshold=0.95),
            # amendment 2026-12-06 (issue 43 item 6): the paper's argument on both surfaces --
            # RMSD and validity rank the predictor panel differently, the RMSD-best is invalid,
            # the learned predictor's error points towards a minimum more than a random
            # direction's would (1/d) -- and the checker's controls on the 3-D surface
            *[
                c
                for setting, null in (("mb_bumps", 0.5), ("mb3d_coupled", 1 / 3))
                for c in (
                    Condition(metric="rank_tau", setting=setting, solver="panel", op="<=", threshold=0.5),
                    Condition(metric="rmsd_best_invalid", setting=setting, solver="panel", op=">=", threshold=0.5),
                    Condition(metric="along_path", setting=setting, solver="mlp", op=">", threshold=round(null, 4)),
                )
            ],
            Condition(metric="validity", setting="mb3d_coupled", solver="cineb", op=">=", threshold=0.9),
            Condition(metric="implausible_flagged", setting="mb3d_coupled", solver="cineb", op=">=", threshold=0.95),
        ],
        note="the solver listed first (mlp) is the learned predictor the claim is about, not the paper's method; "
        "the paper's method is the checker, scored by implausible_flagged",
        departures=[
            Departure(
                paper="is about molecular TS benchmarks and learned TS predictors (the summary names none)",
                ours="use the 2-D Mueller-Brown surface plus 4 random Gaussian bumps per entry; 30 test "
                "entries per seed and 150 fixed training entries",
                why="exact Hessians and cheap descent paths on CPU; no quantum chemistry here",
                effect="in 2-D a regressor's guess almost never refines within 0.02 to a saddle, so 'invalid' "
                "is near-guaranteed (MLP validity 0); molecular predictors could be valid more often; "
                "the failing RMSD part depends on our label model (next)",
            ),
            Departure(
                paper="says benchmark metrics (RMSD to a reference TS) reward plausible but wrong predictions",
                ours="make 30% of the reference labels implausible by construction (a minimum, the other "
                "reaction's saddle, or a point 0.15 off the saddle along its stable direction)",
                why="a known ground truth of which labels are wrong; the share and the kinds are ours",
                effect="CI-NEB's RMSD comes only from those labels, so the share decides the RMSD condition: "
                "with fewer implausible labels CI-NEB wins more easily (the condition fails harder), "
                "with more a learned predictor could win; the 'not reproduced' rests on 30%",
            ),
            Departure(
                paper="criticises learned TS predictors from the literature",
                ours="use midpoint, kNN and a 64-64 MLP on the reactant and product coordinates (the "
                "criterion's 'predictor' fixed as the MLP before any run), with CI-NEB as the "
                "physics-based reference",
                why="PAPER_TASKS.md's predictors",
                effect="our MLP is weak (0.10 from the true saddle) and its RMSD is above CI-NEB's; a stronger "
                "learner fitting the recorded labels could get below CI-NEB and satisfy the condition "
                "that failed",
            ),
            Departure(
                paper="defines validity by one imaginary frequency and an IRC that connects reactant and product",
                ours="check a 2-D analogue: Newton refinement within 0.02 to a stationary point (|grad| < "
                "1e-4) with exactly one negative Hessian eigenvalue whose steepest-descent paths end at "
                "the entry's minima (no mass weighting, no frequencies)",
                why="the same test on a 2-D surface; the tolerances are ours",
                effect="a looser refinement radius would accept more predictions as valid; the checker's 100% "
                "flagging of implausible labels is partly by construction (each kind fails a different "
                "part of the test)",
            ),
            Departure(
                paper="is a position paper with no numeric thresholds in the summary",
                ours="require validity(mlp) <= 0.5, validity(CI-NEB) >= 0.9, >= 95% of implausible labels "
                "flagged, and the MLP's RMSD below CI-NEB's",
                why="PAPER_TASKS.md's thresholds; only the abstract is known (PAPERS.md), and a check needs a "
                "comparison and a margin",
                effect="the verdict is on these thresholds and on the RMSD ordering, which our label model decides",
            ),
            Departure(
                paper="argues that RMSD rewards plausible but invalid TSs, about the models in the literature",
                ours="rank a panel of six predictors by RMSD and by validity (Kendall tau-b) and ask whether the "
                "RMSD-best is invalid; two of the six are synthetic (the true TS + N(0, 0.05^2) per coordinate; the "
                "true TS pulled 30% of the way to its nearer minimum)",
                why="a known panel with known errors; the parameters were set before any panel run (criteria_log.toml)",
                effect="tau and the RMSD-best depend on who is in the panel: CI-NEB, exact on the clean labels, "
                "can be RMSD-best and valid at once, which refutes 'the RMSD-best is invalid' for this panel, not "
                "for a panel of learned models only; a smaller noise would make noisy_saddle both RMSD-better and "
                "valid more often",
            ),
            Departure(
                paper="says models are biased towards equilibrium geometries",
                ours="measure the direction of the learned MLP's error at the true TS: the share of its squared "
                "length along the negative-curvature direction (downhill to a minimum either way), against 1/d "
                "for a random direction; distances to the nearest minimum and to the true TS reported beside it",
                why="a distance-only comparison confounds bias with error size; the direction has an exact null",
                effect="our MLP is trained on TS labels (30% implausible, a third of those minima), not on "
                "equilibrium-dominated data as molecular models are, so it has less reason to be biased; a "
                "straight slide to a minimum scores below 1 where the path curves (the eq_biased control)",
            ),
            Departure(
                paper="is about molecules (many coupled coordinates)",
                ours="add a 3-D surface: the same bumped Mueller-Brown entries with z held by a stiff spring "
                "(k = 300) to the curved sheet z = 0.3 sin(3x) + 0.2y",
                why="its stationary points are the 2-D ones lifted, exactly, with the same Hessian signatures, "
                "so the true TS is known; predictors must still get the coupled coordinate right",
                effect="it is not an independent surface: the saddles and minima are Mueller-Brown's; a result "
                "that holds on both is less tied to the 2-D geometry, not to Mueller-Brown",
            ),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        if setting not in SETTINGS:
            raise ValueError(f"unknown setting {setting!r}; use one of {SETTINGS}")
        t0 = time.perf_counter()
        entries = cell_entries(setting, seed)
        if solver == "panel":
            answer: dict[str, Any] = {
                "panel": {n: [list(p) for p in predict(setting, seed, n, entries)] for n in PANEL}
            }
        else:
            answer = {"predicted_ts": [list(p) for p in predict(setting, seed, solver, entries)]}
        return CellResult(
            solver=solver, setting=setting, seed=seed, answer=answer, wall_s=round(time.perf_counter() - t0, 4)
        )

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        entries = cell_entries(result.setting, result.seed)
        checks = label_checks(result.setting, result.seed)
        implausible = [ok for kind, ok in checks if kind != "true"]
        clean = [ok for kind, ok in checks if kind == "true"]
        out: dict[str, float | None] = {name: None for name in self.metric_names}
        out["implausible_flagged"] = float(np.mean([not ok for ok in implausible])) if implausible else None
        out["clean_accepted"] = float(np.mean(clean)) if clean else None
        if result.solver == "panel":
            panel = result.answer.get("panel", {})
            if set(panel) != set(PANEL):
                raise ValueError(f"panel answer names {sorted(panel)}; expected one list of points for each of {PANEL}")
            scores = {n: point_scores(entries, self.points(panel[n], entries, n)) for n in PANEL}
            return {**out, **rank_disagreement(scores)}
        return {**out, **point_scores(entries, self.points(result.answer["predicted_ts"], entries, "predicted_ts"))}

    @staticmethod
    def points(raw: Any, entries: tuple[Entry, ...], name: str) -> np.ndarray:
        points = np.array(raw, dtype=float)
        dim = len(entries[0].true_ts)
        if points.shape != (len(entries), dim):
            raise ValueError(f"{name} has shape {points.shape}; expected ({len(entries)}, {dim}), one point per entry")
        return points
