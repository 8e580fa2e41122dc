"""Task `procti_synth_imputation`: diffusion imputation of multichannel time series conditioned on
the local observations plus global prototypes retrieved from a bank (the paper's method, ProCTI),
against the same diffusion model without prototypes, KNN imputation, linear interpolation and the
mean, under random (MCAR 50%) and attribute-wise (3 of 6 channels missing) missingness (ours).

The series are synthetic (`procti_model.regime_series`: 5 regime templates, 6 channels, 48 steps).
The abstract's claim: ProCTI outperforms under random missingness and stays competitive under
attribute-wise missingness (the first criterion had this reversed; see criteria_log.toml).
Every solver sees a test series only through `(observed, mask)` with NaN behind the mask; the
scorer recomputes the error on the hidden entries from the cell alone.
"""

from __future__ import annotations

import math
import time
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers import procti_model as pm
from environments.papers.base import CellResult, Claim, Condition, Departure, PaperOptions, PaperTask, describe_claim

SETTINGS = ("random", "attribute")
KNN_NEIGHBOURS = 5
Solver = Literal["procti", "ddpm", "knn", "linear", "mean"]


class Options(PaperOptions):
    solver: Solver = Field(
        "procti",
        description="procti (the paper's method: DDPM + prototype bank), ddpm (the same "
        "DDPM without prototypes), knn, linear, mean (baselines)",
    )


def cell_data(setting: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(truth, mask) of a cell: the seed's test series and the setting's missingness (True = observed)."""
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}, got {setting!r}")
    truth = pm.regime_series(seed, "test")
    return truth, pm.missing_mask(setting, len(truth), np.random.default_rng([seed, 5, SETTINGS.index(setting)]))  # type: ignore[arg-type]


def channel_means(seed: int) -> np.ndarray:
    """(CHANNELS, 1): the training series' per-channel mean, the fallback for a channel with nothing observed."""
    return np.asarray(pm.regime_series(seed, "train").mean(axis=(0, 2))[:, None])


def mean_impute(visible: np.ndarray, seed: int) -> np.ndarray:
    observed_mean = np.nanmean(np.where(np.isnan(visible).all(2, keepdims=True), 0.0, visible), axis=2, keepdims=True)
    fill = np.where(np.isnan(visible).all(2, keepdims=True), channel_means(seed)[None], observed_mean)
    return np.where(np.isnan(visible), fill, visible)


def linear_impute(visible: np.ndarray, seed: int) -> np.ndarray:
    """Per channel along time through the observed points (held constant beyond the ends)."""
    out = visible.copy()
    fallback = channel_means(seed)[:, 0]
    t = np.arange(pm.LENGTH)
    for i, c in np.ndindex(visible.shape[:2]):
        seen = ~np.isnan(visible[i, c])
        out[i, c] = np.interp(t, t[seen], visible[i, c, seen]) if seen.any() else fallback[c]
    return out


def knn_impute(visible: np.ndarray, seed: int) -> np.ndarray:
    """scikit-learn's KNNImputer with the training series as donors (NaN-Euclidean on the observed entries)."""
    from sklearn.impute import KNNImputer

    train = pm.regime_series(seed, "train").reshape(pm.N_TRAIN, -1)
    imputer = KNNImputer(n_neighbors=KNN_NEIGHBOURS).fit(train)
    return np.asarray(imputer.transform(visible.reshape(len(visible), -1)).reshape(visible.shape))


def impute(solver: str, observed: np.ndarray, mask: np.ndarray, seed: int) -> np.ndarray:
    """The solver's imputation of a batch; it sees only the observed entries (NaN behind the mask)."""
    visible = pm.sanitise(observed, mask)
    if solver in ("procti", "ddpm"):
        model = pm.train_imputer(seed, use_prototypes=solver == "procti")
        return pm.ddpm_impute(model, visible, mask, seed)
    if solver == "knn":
        return knn_impute(visible, seed)
    if solver == "linear":
        return linear_impute(visible, seed)
    if solver == "mean":
        return mean_impute(visible, seed)
    raise ValueError(f"solver must be one of procti, ddpm, knn, linear, mean, got {solver!r}")


def imputation_errors(imputed: np.ndarray, truth: np.ndarray, mask: np.ndarray) -> dict[str, float]:
    """MAE and RMSE over the hidden entries only; log_mae makes the ratio criteria paired differences."""
    err = (imputed - truth)[~mask]
    mae = float(np.abs(err).mean())
    return {"mae": mae, "rmse": float(np.sqrt((err**2).mean())), "log_mae": math.log(mae)}


class ProCTITask(PaperTask[Options]):
    task = "procti_synth_imputation"
    name = "papers.procti_synth_imputation"
    version = "0.1.0"
    headline_metric = "mae@attribute"
    Options = Options
    solvers = ("procti", "ddpm", "knn", "linear", "mean")
    settings = SETTINGS
    metric_names = ("mae", "rmse", "log_mae")
    lower_is_better = frozenset({"mae", "rmse", "log_mae"})
    claim: ClassVar[Claim] = Claim(
        id=name,
        arms=solvers,
        settings=settings,
        sentence="ProCTI (diffusion imputation conditioned on local observations plus global prototypes retrieved "
        "from a learned bank) outperforms under random missingness and stays competitive under "
        "attribute-wise missingness",
        setting=f"synthetic series: {pm.REGIMES} regime templates, {pm.CHANNELS} channels, L={pm.LENGTH}, "
        f"{pm.N_TRAIN} complete training / {pm.N_TEST} test series per seed; missingness random (MCAR, exactly "
        f"50% of each series) or attribute-wise (exactly {pm.ATTR_MISSING} of {pm.CHANNELS} channels); CSDI-trained "
        f"DDPM ({pm.DIFF_STEPS} steps, residual-MLP x0 predictor, {pm.TRAIN_STEPS} training steps, median of "
        f"{pm.N_SAMPLES} samples) with / without a k-means bank of M={pm.BANK_SIZE} training prototypes and "
        f"top-{pm.TOP_K} attention on the observed entries",
        conditions=[
            # "outperforms under random missingness": better than every baseline, paired by seed
            *(
                Condition(metric="log_mae", setting="random", solver="procti", versus=b, op="<=", threshold=0.0)
                for b in ("ddpm", "knn", "linear", "mean")
            ),
            # "stays competitive under attribute-wise missingness": within 10% of every baseline's
            # geometric-mean MAE (the margin is ours: the abstract gives none)
            *(
                Condition(
                    metric="log_mae", setting="attribute", solver="procti", versus=b, op="<=", threshold=math.log(1.10)
                )
                for b in ("ddpm", "knn", "linear", "mean")
            ),
        ],
        note="ratios as paired log differences: log MAE(procti) - log MAE(b) <= 0 at random (outperforms every "
        "baseline b) and <= log 1.10 at attribute (competitive: the geometric-mean MAE ratio over seeds within "
        "10%). Amended 2026-12-06 (criteria_log.toml): the first criterion asked for the biggest gain under "
        "attribute-wise missingness, the reverse of the abstract",
        departures=[
            Departure(
                paper="evaluates on real multivariate time-series benchmarks",
                ours="uses synthetic regime series (5 sine templates, 6 channels, L = 48)",
                why="no data downloads on this machine; a regime structure that prototypes can exploit is "
                "known by construction",
                effect="the synthetic regimes may favour (or starve) retrieval more than real data would",
            ),
            Departure(
                paper="uses a CSDI-style transformer denoiser",
                ours="uses a residual-MLP x0 predictor trained 600 steps",
                why="CPU budget; an eps-predicting MLP diverged in sampling (README)",
                effect="a weaker denoiser can make the prototype input matter more or less than in the paper",
            ),
            Departure(
                paper="learns the prototype bank",
                ours="builds the bank by k-means (M = 16) of the standardised training series",
                why="a fixed, testable bank (a k-means fixed point)",
                effect="a learned bank could retrieve better; a miss may understate the method",
            ),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        truth, mask = cell_data(setting, seed)
        imputed = impute(solver, np.where(mask, truth, np.nan), mask, seed)
        return CellResult(
            solver=solver,
            setting=setting,
            seed=seed,
            answer={"imputed": imputed.round(5).tolist()},
            wall_s=round(time.perf_counter() - t0, 4),
        )

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        truth, mask = cell_data(result.setting, result.seed)
        imputed = np.asarray(result.answer["imputed"], dtype=float)
        if imputed.shape != truth.shape or not np.isfinite(imputed).all():
            raise ValueError(f"imputed must be {truth.shape} finite values, got shape {imputed.shape}")
        return dict(imputation_errors(imputed, truth, mask))
