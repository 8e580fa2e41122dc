"""Task `fedforest_shift`: federated random forests whose splits come from summed client
histograms, with a client-indicator split candidate (the paper's method), against pooled and local
forests, on five synthetic clients under IID, covariate and concept shift (ours).

Every client bins its features with edges the server agreed from the clients' quantile sketches,
draws its own Poisson(1) bootstrap weights per tree, and at each node sends the (feature x bin x
class) weight histogram of its samples there, plus its class totals. The server sums them, scores
every bin threshold of the node's sampled features by weighted Gini impurity, and also the
"client k versus the rest" candidates (personalisation), and grows the tree. Because impurity only
needs counts, the tree is identical to a centralised builder's on the pooled binned data: the
scorer rebuilds every tree that way and counts the identical ones (`split_agreement`). Baselines:
scikit-learn random forests pooled (`pooled_rf`), pooled with a one-hot client id
(`pooled_id`), each client's own (`local_only`), and the clients' forests averaged (`averaged_local`);
and exact unbinned CART on the pooled rows (`exact_cart`), against which the scorer also compares the
method node by node and counts each solver's communication (`fedforest_exact.py`). The data and the
tree builders live in `fedforest_trees.py`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers.base import (
    CellResult,
    Claim,
    Condition,
    Departure,
    PaperOptions,
    PaperTask,
    SeedPlan,
    describe_claim,
)
from environments.papers.fedforest_exact import comm_cost, compare_to_exact, exact_forest
from environments.papers.fedforest_trees import (  # noqa: F401 (re-exported: the tests and fedforest_exact read them here)
    CentralStats,
    Client,
    ExactNode,
    FederatedStats,
    LABEL_NOISE,
    MAX_DEPTH,
    MIN_LEAF,
    MTRY,
    N_BINS,
    N_CLIENTS,
    N_FEATURES,
    N_PER_CLIENT,
    N_TRAIN,
    Node,
    SETTINGS,
    TREES,
    agreed_edges,
    baseline_predictions,
    binned,
    bootstrap_weights,
    central_forest,
    check_clients,
    choose_split,
    federated_forest,
    federated_forest_of,
    federation,
    forest_nodes,
    forest_predictions,
    gini_impurity,
    grow,
    node_features,
    nonlinear_rule,
    predict_tree,
    sklearn_forest,
)

Solver = Literal["fedforest", "pooled_rf", "pooled_id", "local_only", "averaged_local", "exact_cart"]


class Options(PaperOptions):
    solver: Solver = Field(
        "fedforest",
        description="fedforest (the paper's method), pooled_rf, pooled_id, local_only, "
        "averaged_local, exact_cart (baselines)",
    )
    seeds: int = Field(6, ge=1, le=500, description="seeds per setting (samples = settings x seeds, seeds 0..N-1)")


# The abstract's own claim (issue 43): splits from aggregated statistics closely approximate the
# centralised split (the binned builder exactly; exact CART closely), personalisation through
# client-indicator splits, communication efficiency. The last three conditions are ours.
ABSTRACT_CONDITIONS = (
    [
        Condition(metric="split_agreement", setting=s, solver="fedforest", op=">=", threshold=1.0, stat="min")
        for s in SETTINGS
    ]
    + [Condition(metric="split_identity", setting=s, solver="fedforest", op=">=", threshold=0.9) for s in SETTINGS]
    + [Condition(metric="impurity_gap", setting=s, solver="fedforest", op="<=", threshold=0.05) for s in SETTINGS]
    + [
        Condition(metric="accuracy", setting=s, solver="fedforest", versus="exact_cart", op=">=", threshold=-0.01)
        for s in SETTINGS
    ]
    + [
        Condition(
            metric="accuracy", setting="concept", solver="fedforest", versus="pooled_rf", op=">=", threshold=0.08
        ),
        Condition(
            metric="bytes_per_tree", setting="iid", solver="fedforest", versus="pooled_rf", op="<=", threshold=0.0
        ),
    ]
)
OUR_CONDITIONS = [
    Condition(metric="accuracy", setting=s, solver="fedforest", versus="pooled_rf", op=">=", threshold=-0.01)
    for s in ("iid", "covariate")
] + [Condition(metric="accuracy", setting="concept", solver="fedforest", versus="local_only", op=">=", threshold=0.0)]


class FedForestTask(PaperTask[Options]):
    task = "fedforest_shift"
    name = "papers.fedforest_shift"
    version = "0.2.0"
    headline_metric = "accuracy@concept"
    Options = Options
    solvers = ("fedforest", "pooled_rf", "pooled_id", "local_only", "averaged_local", "exact_cart")
    settings = SETTINGS
    metric_names = (
        "accuracy",
        "split_agreement",
        "split_identity",
        "impurity_gap",
        "client_splits",
        "bytes_per_tree",
        "rounds_per_tree",
    )
    claim: ClassVar[Claim] = Claim(
        id=name,
        arms=solvers,
        settings=settings,
        plan=SeedPlan(looks=(6,)),
        sentence="FedForest: federated random forests in which a split computed from aggregated client statistics "
        "closely approximates the centralized split; client-indicator splits personalise; communication "
        "efficient; robust to covariate and concept shift",
        setting=f"{N_CLIENTS} synthetic clients x {N_PER_CLIENT} ({N_TRAIN} train), {N_FEATURES} features, binary labels "
        f"({LABEL_NOISE:.0%} flipped); iid / covariate (per-client input mean) / concept (per-client labelling "
        f"direction) shift; {TREES} trees, depth {MAX_DEPTH}, min leaf {MIN_LEAF}, {MTRY} features per node, "
        f"{N_BINS} bins from averaged client quantile sketches, Poisson bootstrap per client; references: a "
        f"centralised binned builder, exact unbinned CART on the pooled rows, scikit-learn forests",
        conditions=ABSTRACT_CONDITIONS + OUR_CONDITIONS,
        note=f"the first {len(ABSTRACT_CONDITIONS)} conditions are the abstract's own claim (its verdict alone: "
        "`python -m environments.papers.fedforest RUN_DIR`); the last three are ours. split_agreement: the "
        "share of trees identical to the centralised binned builder's; split_identity / impurity_gap: against "
        "exact CART node by node; bytes_per_tree / rounds_per_tree: communication per tree built",
        departures=[
            Departure(
                paper="evaluates on federated data the summary does not name",
                ours="use 5 synthetic clients x 600 samples (8 Gaussian features, 10% of labels flipped) in "
                "three generated settings: iid, covariate shift (a per-client input mean) and concept "
                "shift (each client labels by its own random direction)",
                why="no downloads; each shift is one known mechanism",
                effect="our concept shift gives every client an unrelated rule, which favours purely local "
                "forests; partly shared concepts would favour federation, and real shifts mix "
                "mechanisms",
            ),
            Departure(
                paper="claims personalisation through client-indicator splits and robustness to shift; it "
                "does not claim to beat each client's own forest",
                ours="also require fedforest >= local-only at concept shift, and within 1 point of "
                "scikit-learn's pooled forest at iid and covariate shift (the last three conditions)",
                why="PAPER_TASKS.md's reading, from a prototype run; kept from the first criterion so its "
                "verdict stays comparable",
                effect="under our concept shift (no shared rule) local forests are the natural winner, so "
                "'>= local-only' can fail while the abstract's claim holds; the abstract's conditions "
                "alone have their own verdict (the note says how to print it)",
            ),
            Departure(
                paper="claims the federated split closely approximates the centralized split",
                ours="test it three ways: identical trees to a centralised builder on the same bins (exact by "
                "construction), the same feature as exact unbinned CART at >= 90% of nodes with <= 5% of "
                "its Gini decrease lost (node by node on the same rows), and accuracy within 1 point of "
                "an exact CART forest with the same weights and feature draws",
                why="the abstract gives no tolerance; 90% and 5% are ours",
                effect="the node-by-node identity counts near-ties between features as misses; the thresholds are ours",
            ),
            Departure(
                paper="claims communication efficiency (against what is not in the summary)",
                ours="count bytes and rounds per tree: int32 histograms up from every client holding weight at "
                "a node, 12-byte split broadcasts down, quantile sketches once; against shipping every "
                "training row once (36 bytes a row, one round) and shipping the local forests (16 bytes a "
                "node); the condition: fewer bytes per tree than shipping the data",
                why="the issue's reading; a check needs a comparison",
                effect="with 400 rows per client, 30 trees of depth 10 and 32 bins, histograms cost far more "
                "than the rows themselves (arithmetic before any run: 10^5-10^6 bytes per tree against "
                "~2.4 x 10^3); the comparison turns only at millions of rows, so at our size this "
                "condition is expected to fail: it measures scale, not the protocol's design",
            ),
            Departure(
                paper="compares with centralised forests (the summary names no implementation)",
                ours="use scikit-learn random forests (exact thresholds, multinomial bootstrap) for pooled_rf, "
                "pooled_id, local_only and averaged_local; exact_cart is ours (same Poisson weights and "
                "feature draws as the method)",
                why="standard reference implementations, plus one that isolates binning",
                effect="the iid and covariate conditions against pooled_rf compare two forest implementations "
                "(binning and bootstrap differ); the exact_cart conditions isolate binning alone",
            ),
            Departure(
                paper="is a federated protocol (the summary does not say what the server may see)",
                ours="send every node's per-client histograms to the server in the clear: no secure "
                "aggregation, no differential-privacy noise",
                why="the claim tested is about splits, accuracy and bytes",
                effect="secure aggregation would add bytes; privacy noise would lower accuracy and break the "
                "exact split agreement, so our setting is the favourable case for those conditions",
            ),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        answer: dict[str, Any] = {}
        if solver in ("fedforest", "exact_cart"):
            clients = federation(setting, seed)
            federated = federated_forest(setting, seed) if solver == "fedforest" else None
            forest: Sequence[Sequence[ExactNode]] = federated if federated is not None else exact_forest(clients, seed)
            answer["forest"] = [[list(n[:4]) + list(n[4]) for n in tree] for tree in forest]
            if federated is not None:
                answer["predictions"] = forest_predictions(federated, setting, seed)
            else:
                answer["predictions"] = [
                    (np.mean([predict_tree(t, c.x_test, k) for t in forest], axis=0) > 0.5).astype(int).tolist()
                    for k, c in enumerate(clients)
                ]
        else:
            answer["predictions"], answer["model_nodes"] = baseline_predictions(setting, seed, solver)
        return CellResult(
            solver=solver, setting=setting, seed=seed, answer=answer, wall_s=round(time.perf_counter() - t0, 4)
        )

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        clients = federation(result.setting, result.seed)
        predictions = result.answer["predictions"]
        if len(predictions) != N_CLIENTS or any(len(p) != len(c.y_test) for p, c in zip(predictions, clients)):
            raise ValueError(f"predictions must be {N_CLIENTS} lists of {N_PER_CLIENT - N_TRAIN} labels")
        accuracy = float(np.mean([np.mean(np.asarray(p) == c.y_test) for p, c in zip(predictions, clients)]))
        out: dict[str, float | None] = {
            "accuracy": accuracy,
            "split_agreement": None,
            "split_identity": None,
            "impurity_gap": None,
            "client_splits": None,
        }
        if result.solver == "fedforest":
            reference = central_forest(result.setting, result.seed)
            mine = [
                [(int(n[0]), int(n[1]), int(n[2]), int(n[3]), (float(n[4]), float(n[5]))) for n in tree]
                for tree in result.answer["forest"]
            ]
            out["split_agreement"] = float(np.mean([a == b for a, b in zip(mine, reference, strict=True)]))
            out["split_identity"], out["impurity_gap"] = compare_to_exact(mine, clients, result.seed)
            inner = [n for tree in mine for n in tree if n[0] != -2]
            out["client_splits"] = float(np.mean([n[0] == -1 for n in inner])) if inner else 0.0
        out["bytes_per_tree"], out["rounds_per_tree"] = comm_cost(result.solver, result.answer, clients, result.seed)
        return out


def abstract_verdict(verdict: Any) -> tuple[str, list[Any]]:
    """The verdict on the abstract's own conditions alone, from a saved check's `ClaimVerdict`."""
    from harness.claims.decide import combine

    wanted = {c.text() for c in ABSTRACT_CONDITIONS}
    results = [r for r in verdict.conditions if r.condition in wanted]
    if len(results) != len(wanted):
        raise ValueError(
            f"the verdict has {len(results)} of the abstract's {len(wanted)} conditions: "
            "it was not computed under this criterion"
        )
    return combine(r.outcome for r in results), results


if __name__ == "__main__":
    import sys
    from pathlib import Path

    from harness.claims.verdict import ClaimVerdict, verdict_path

    saved = verdict_path(Path(sys.argv[1]), FedForestTask.name)
    verdict_, results_ = abstract_verdict(ClaimVerdict.model_validate_json(saved.read_text()))
    for r in results_:
        print(f"{r.outcome:10} {r.condition}: {r.estimate} [{r.ci_low}, {r.ci_high}] (n = {r.n})")
    print(f"the abstract's own claim: {verdict_} (the whole criterion, ours included: {FedForestTask.name} in {saved})")
