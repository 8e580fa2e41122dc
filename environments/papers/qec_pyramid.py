"""Task `qec_precision_pyramid`: a weight-binarised neural decoder whose activation precision rises
toward the output (the paper's "precision pyramid", hidden-layer activation bits 2 -> 4 -> 8)
against minimum-weight perfect matching, a float decoder and the same binarised decoder at uniform
1/2/8-bit activations, on stim's rotated surface-code memory experiment (ours: d=3, 3 rounds,
circuit-level depolarising noise p = 0.006).

Every decoder reads the 24 detector bits of a shot and predicts whether the logical observable
flipped. The neural decoders are numpy MLPs 24-128-128-128-1 trained with Adam on stim samples
(hand-written back-propagation; quantisers pass gradients straight through inside their clip
range). Binarised layers use sign(W) times the mean |W| of each output unit; a k-bit activation
is the midrise uniform grid of 2^k levels on [-1, 1], so 1 bit is exactly sign. The quantised
decoders start from the seed's float decoder and are fine-tuned quantisation-aware (one epoch):
the float decoder is trained once per seed and cached. MWPM is pymatching on the circuit's
detector error model. The solver records its predictions on the distinct test syndromes; the
scorer regenerates the seed's test shots and counts logical errors (Wilson 95% interval).

The paper also compares with Relay-BP on a bivariate-bicycle code: settings `bb72_p*` decode the
[[72,12,6]] code under code-capacity depolarising noise with BP-OSD (ldpc), a Relay-BP written here
and plain min-sum BP (`qec_bb.py`, `qec_relay_bp.py`); there the neural solvers and MWPM, and on
the surface code the BB decoders, record "not applicable" and score None.
"""

from __future__ import annotations

import base64
import math
import time
from functools import lru_cache
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers import qec_bb
from environments.papers.base import CellResult, Claim, Condition, Departure, PaperOptions, PaperTask, describe_claim

DISTANCE, ROUNDS, NOISE = 3, 3, 0.006
SETTINGS = ("d3_p006",)
BB_CODE, BB_SHOTS = "bb72", 4000
BB_SETTINGS = {"bb72_p02": 0.02, "bb72_p03": 0.03, "bb72_p05": 0.05}  # setting -> depolarising p
BB_SOLVERS = ("bposd", "relay_bp", "minsum_bp")
RELAY_VS_BPOSD = 1.1  # "Relay-BP matches BP-OSD": its LER at most 1.1x BP-OSD's on the same shots
N_TRAIN, N_TEST = 1_000_000, 1_000_000
HIDDEN = (128, 128, 128)
FLOAT_EPOCHS, QAT_EPOCHS = 2, 1
FLOAT_LR, QAT_LR, BATCH = 3e-3, 1e-3, 1024
# Activation bits of the hidden layers, per solver (None: float; binary weights unless float).
ACTIVATION_BITS: dict[str, tuple[int | None, ...]] = {
    "pyramid": (2, 4, 8), "float": (None, None, None), "int1": (1, 1, 1), "int2": (2, 2, 2), "int8": (8, 8, 8)}
NOMINAL_LER = 0.024  # the prototype's MWPM rate: sets "sigma", the binomial s.e. of one cell's test LER
SIGMA = math.sqrt(NOMINAL_LER * (1 - NOMINAL_LER) / N_TEST)
Solver = Literal["pyramid", "mwpm", "float", "int1", "int2", "int8", "bposd", "relay_bp", "minsum_bp"]
Params = list[tuple[np.ndarray, np.ndarray]]


class Options(PaperOptions):
    solver: Solver = Field("pyramid", description="pyramid (the paper's method), mwpm, float, int1, int2, int8 "
                                                   "(baselines); bposd, relay_bp, minsum_bp (BB-code decoders)")
    seeds: int = Field(5, ge=1, le=500, description="seeds per setting (each trains five neural decoders)")


def memory_circuit() -> Any:
    import stim

    return stim.Circuit.generated("surface_code:rotated_memory_z", distance=DISTANCE, rounds=ROUNDS,
                                  after_clifford_depolarization=NOISE, before_round_data_depolarization=NOISE,
                                  before_measure_flip_probability=NOISE, after_reset_flip_probability=NOISE)


def shots(seed: int, split: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(detector bits, observable flips) of the seed's train or test shots; disjoint stim seeds."""
    stim_seed = 1000 * seed + {"train": 1, "test": 2}[split]
    det, obs = memory_circuit().compile_detector_sampler(seed=stim_seed).sample(n, separate_observables=True)
    return det, obs[:, 0]


def distinct_syndromes(det: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct syndromes (as 0/1 float rows) and each shot's index into them."""
    packed, index = np.unique(np.packbits(det, axis=1), axis=0, return_inverse=True)
    return np.unpackbits(packed, axis=1)[:, :det.shape[1]].astype(np.float32), index.ravel()


def quantise_activation(x: np.ndarray, bits: int | None) -> np.ndarray:
    """Midrise uniform grid of 2^bits levels on [-1, 1]: levels (2i + 1 - 2^bits) / (2^bits - 1);
    1 bit is exactly sign (0 -> +1); None is the float hardtanh."""
    if bits is None:
        return np.clip(x, -1.0, 1.0)
    n = 2 ** bits
    idx = np.clip(np.floor((x + 1.0) / 2.0 * n), 0, n - 1)
    return ((2 * idx + 1 - n) / (n - 1)).astype(x.dtype)


def binarise(w: np.ndarray) -> np.ndarray:
    """sign(W) (0 -> +1) times the mean |W| of each output unit (column)."""
    return np.where(w >= 0, 1.0, -1.0).astype(w.dtype) * np.abs(w).mean(axis=0, keepdims=True)


def forward(params: Params, x: np.ndarray, bits: tuple[int | None, ...], binary: bool) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """The logit of a flip per row, and each layer's (input, used weights, pre-activation)."""
    a, cache = x, []
    for i, (w, b) in enumerate(params):
        used = binarise(w) if binary else w
        z = a @ used + b
        cache.append((a, used, z))
        a = quantise_activation(z, bits[i]) if i < len(params) - 1 else z
    return a[:, 0], cache


def gradients(params: Params, x: np.ndarray, y: np.ndarray, bits: tuple[int | None, ...], binary: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """Gradients of the mean binary cross-entropy; quantisers and binarisation pass the gradient
    straight through (inside the activation clip range |z| <= 1)."""
    logit, cache = forward(params, x, bits, binary)
    g = ((1.0 / (1.0 + np.exp(-logit)) - y) / len(y))[:, None].astype(np.float32)
    grads: list[tuple[np.ndarray, np.ndarray]] = []
    for i in range(len(params) - 1, -1, -1):
        a, used, z = cache[i]
        if i < len(params) - 1:
            g = g * (np.abs(z) <= 1.0)
        grads.insert(0, (a.T @ g, g.sum(axis=0)))
        g = g @ used.T
    return grads


def train(x: np.ndarray, y: np.ndarray, bits: tuple[int | None, ...], binary: bool, epochs: int, lr: float,
          seed: int, init: Params | None = None) -> Params:
    """Adam with a cosine learning-rate decay over shuffled mini-batches of shots."""
    rng = np.random.default_rng(seed)
    sizes = (x.shape[1], *HIDDEN, 1)
    params = ([(w.copy(), b.copy()) for w, b in init] if init else
              [(rng.normal(0, 1 / math.sqrt(m), (m, n)).astype(np.float32), np.zeros(n, np.float32))
               for m, n in zip(sizes[:-1], sizes[1:])])
    moments = [[np.zeros_like(p) for p in layer for _ in (0, 1)] for layer in params]
    per_epoch = len(y) // BATCH
    total, step = epochs * per_epoch, 0
    for _ in range(epochs):
        order = rng.permutation(len(y))
        for k in range(per_epoch):
            batch = order[k * BATCH:(k + 1) * BATCH]
            step += 1
            rate = lr * 0.5 * (1 + math.cos(math.pi * step / total))
            for layer, grads, mom in zip(params, gradients(params, x[batch], y[batch], bits, binary), moments):
                for j, g in enumerate(grads):
                    mom[2 * j] = 0.9 * mom[2 * j] + 0.1 * g
                    mom[2 * j + 1] = 0.999 * mom[2 * j + 1] + 0.001 * g * g
                    m_hat, v_hat = mom[2 * j] / (1 - 0.9 ** step), mom[2 * j + 1] / (1 - 0.999 ** step)
                    layer[j][...] -= rate * m_hat / (np.sqrt(v_hat) + 1e-8)
    return params


def training_set(seed: int) -> tuple[np.ndarray, np.ndarray]:
    det, obs = shots(seed, "train", N_TRAIN)
    return det.astype(np.float32), obs.astype(np.float32)


@lru_cache(maxsize=8)
def float_decoder(seed: int) -> Params:
    """The seed's float decoder (also the quantised decoders' starting point), trained once."""
    from threadpoolctl import threadpool_limits

    x, y = training_set(seed)
    with threadpool_limits(1):  # small matrices on shared cores: one BLAS thread is fastest
        return train(x, y, ACTIVATION_BITS["float"], False, FLOAT_EPOCHS, FLOAT_LR, seed)


def neural_decoder(seed: int, solver: str) -> Params:
    from threadpoolctl import threadpool_limits

    start = float_decoder(seed)
    if solver == "float":
        return start
    x, y = training_set(seed)
    with threadpool_limits(1):
        return train(x, y, ACTIVATION_BITS[solver], True, QAT_EPOCHS, QAT_LR, seed + 1, init=start)


@lru_cache(maxsize=1)
def matching() -> Any:
    """pymatching's decoder for the circuit's detector error model (built once)."""
    import pymatching

    return pymatching.Matching.from_detector_error_model(memory_circuit().detector_error_model(decompose_errors=True))


def mwpm_predictions(syndromes: np.ndarray) -> np.ndarray:
    return matching().decode_batch(syndromes.astype(np.uint8))[:, 0].astype(bool)


def predict(solver: str, seed: int, syndromes: np.ndarray) -> np.ndarray:
    if solver == "mwpm":
        return mwpm_predictions(syndromes)
    params = neural_decoder(seed, solver)
    return forward(params, syndromes, ACTIVATION_BITS[solver], solver != "float")[0] > 0


def pack(bits: np.ndarray) -> str:
    return base64.b64encode(np.packbits(bits.astype(bool)).tobytes()).decode()


def unpack(text: str, n: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8))[:n].astype(bool)


def wilson(errors: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion."""
    p = errors / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


@lru_cache(maxsize=4)
def held_out_shots(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    det, obs = shots(seed, "test", N_TEST)
    syndromes, index = distinct_syndromes(det)
    return syndromes, index, obs


def solve_bb(setting: str, seed: int, solver: str) -> dict[str, Any]:
    """A BB decoder's corrections of the cell's shots, X and Z sectors (it sees only syndromes)."""
    cx, cz = qec_bb.corrections(solver, BB_CODE, BB_SETTINGS[setting], BB_SHOTS, seed)
    return {"applicable": True, "code": BB_CODE, "shots": BB_SHOTS, "corrections_x": qec_bb.pack_bits(cx),
            "corrections_z": qec_bb.pack_bits(cz)}


def solve(setting: str, seed: int, solver: str) -> dict[str, Any]:
    """The decoder's flip prediction for every distinct test syndrome (it never sees test flips);
    on a BB setting, a BB decoder's corrections. A solver of the other half records "not applicable"."""
    if setting not in SETTINGS and setting not in BB_SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; use one of {SETTINGS + tuple(BB_SETTINGS)}")
    if (setting in BB_SETTINGS) != (solver in BB_SOLVERS):
        return {"applicable": False}
    if setting in BB_SETTINGS:
        return solve_bb(setting, seed, solver)
    syndromes, _, _ = held_out_shots(seed)
    predictions = predict(solver, seed, syndromes)
    return {"applicable": True, "distinct_syndromes": int(len(syndromes)), "predictions": pack(predictions),
            "activation_bits": list(ACTIVATION_BITS.get(solver, ())), "binary_weights": solver not in ("mwpm", "float")}


class QECPyramidTask(PaperTask):
    task = "qec_precision_pyramid"
    name = "papers.qec_precision_pyramid"
    version = "0.1.0"
    headline_metric = "ler@d3_p006"
    Options = Options
    solvers = ("pyramid", "mwpm", "float", "int1", "int2", "int8", *BB_SOLVERS)
    settings = SETTINGS + tuple(BB_SETTINGS)
    metric_names = ("ler", "ler_over_mwpm", "ler_low", "ler_high", "mwpm_ler", "ler_over_bposd", "unsatisfied")
    lower_is_better = frozenset(metric_names)
    claim: ClassVar[Claim] = Claim(
        id=name, arms=solvers, settings=settings,
        sentence="Precision Pyramid: a weight-binarised neural decoder for quantum error correction with activation "
                 "precision rising toward the output; compared with MWPM and Relay-BP",
        setting=f"stim rotated surface-code memory d={DISTANCE}, {ROUNDS} rounds, circuit-level depolarising p={NOISE}; "
                f"numpy MLP 24-{'-'.join(map(str, HIDDEN))}-1, {N_TRAIN} training and {N_TEST} test shots per seed; "
                "binarised weights, hidden activation bits 2/4/8 (pyramid) vs 1/1/1, 2/2/2, 8/8/8 and float; MWPM "
                f"by pymatching. sigma = binomial s.e. of one cell's LER at {NOMINAL_LER} = {SIGMA:.2e}. "
                f"BB [[72,12,6]] code, code-capacity depolarising p = {', '.join(map(str, BB_SETTINGS.values()))}, "
                f"{BB_SHOTS} shots per seed: Relay-BP (numpy, ours) vs BP-OSD-CS-{qec_bb.OSD_ORDER} (ldpc) and "
                "plain min-sum BP",
        conditions=[Condition(metric="ler_over_mwpm", setting="d3_p006", solver="pyramid", op="<=", threshold=1.02),
                   Condition(metric="ler", setting="d3_p006", solver="pyramid", versus="int8", op="<=", threshold=2 * SIGMA),
                   Condition(metric="ler", setting="d3_p006", solver="int1", versus="pyramid", op=">=", threshold=4 * SIGMA),
                   # The BB half (PAPER_TASKS.md row 9 names the comparison, not a bound; these two were
                   # fixed before any BB run): Relay-BP matches BP-OSD and beats plain min-sum BP.
                   Condition(metric="ler_over_bposd", setting="bb72_p03", solver="relay_bp", op="<=", threshold=RELAY_VS_BPOSD),
                   Condition(metric="ler", setting="bb72_p03", solver="minsum_bp", versus="relay_bp", op=">=", threshold=0.0)],
        note="on the BB settings the neural decoders and MWPM score None (not applicable), as do the BB decoders "
             "on the surface code",
        departures=[
            Departure(paper="is compared with MWPM and Relay-BP (the summary gives no numbers); PAPER_TASKS.md "
                            "states the claim as: matches or beats MWPM where uniform low-bit activations collapse",
                      ours="test pyramid LER <= 1.02 x MWPM and <= INT8 + 2 sigma, and INT1 >= pyramid + 4 sigma "
                           "(sigma = 1.53e-4, one cell's binomial s.e. at LER 0.024), plus two Relay-BP conditions "
                           "on a BB code",
                      why="only the abstract is known (PAPERS.md), and a check needs a comparison and a margin",
                      effect="the margins are ours; 1.02 x MWPM is a tight bar that a small training budget (below) "
                             "can miss"),
            Departure(paper="decodes surface codes at distances and noise rates the summary does not give",
                      ours="decode only the d = 3 rotated surface-code memory, 3 rounds, one noise rate p = 0.006 "
                           "(stim's uniform circuit-level depolarising)",
                      why="training budget: five neural decoders per seed on 1e6 shots",
                      effect="at d = 3 the float MLP already beats MWPM (0.0225 vs 0.0238), so matching MWPM is "
                             "reachable in principle; how the pyramid fares at larger distance, where neural "
                             "decoders are harder to train and MWPM relatively stronger, is untested"),
            Departure(paper="compares the pyramid with Relay-BP (on bivariate-bicycle codes, by PAPER_TASKS.md's "
                            "reading)",
                      ours="never run the pyramid or any neural decoder on a BB code: the BB half compares our "
                           "Relay-BP with BP-OSD and plain min-sum BP only, on the [[72,12,6]] code under "
                           "code-capacity noise",
                      why="a neural decoder for the BB code's syndromes did not fit the time budget",
                      effect="the two BB conditions test our Relay-BP, not the pyramid: they can keep the verdict "
                             "from 'reproduced' for reasons unrelated to the paper's decoder, and nothing here says "
                             "how the pyramid compares with Relay-BP"),
            Departure(paper="uses Relay-BP as published (its noise model for BB codes is not in the summary)",
                      ours="write Relay-BP here from its description (30 legs at most, messages restarting on each "
                           "leg, saturation at |64|) and decode code-capacity depolarising noise at p = "
                           "0.02/0.03/0.05, 4000 shots per seed",
                      why="no Relay-BP package; CPU budget",
                      effect="a shortfall of our implementation counts against the BB conditions; code-capacity "
                             "noise is easier than circuit-level noise, so the Relay-BP/BP-OSD ratio may differ from "
                             "the paper's"),
            Departure(paper="builds its decoder for hardware (the reason to binarise weights and lower activation "
                            "precision)",
                      ours="simulate the quantisers in float numpy and account no latency, throughput, memory, area "
                           "or energy",
                      why="no hardware model here",
                      effect="the verdict covers accuracy only; the accuracy-per-hardware-cost trade-off the pyramid "
                             "exists for is not measured, so even 'reproduced' would not show it"),
            Departure(paper="trains its decoders with an architecture and budget the summary does not give",
                      ours="train a numpy MLP 24-128-128-128-1 on 1e6 shots per seed: the float decoder 2 epochs, "
                           "each quantised one fine-tuned quantisation-aware for 1 epoch from it; activation bits "
                           "2/4/8 (ours)",
                      why="time budget; the recipe was chosen on a scratch prototype before the criterion was in "
                          "code",
                      effect="short quantisation-aware training likely leaves the binarised decoders under-trained "
                             "(pyramid 0.0290 vs float 0.0225 vs MWPM 0.0238), so the failed MWPM and INT8 "
                             "conditions may understate the method"),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        answer = solve(setting, seed, solver)
        return CellResult(solver=solver, setting=setting, seed=seed, answer=answer, wall_s=round(time.perf_counter() - t0, 4))

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        if not result.answer.get("applicable", True):
            return dict.fromkeys(self.metric_names)
        if result.setting in BB_SETTINGS:
            return score_bb(result)
        syndromes, index, obs = held_out_shots(result.seed)
        if result.answer["distinct_syndromes"] != len(syndromes):
            raise ValueError(f"answer covers {result.answer['distinct_syndromes']} syndromes, the seed's test set has {len(syndromes)}")
        predicted = unpack(result.answer["predictions"], len(syndromes))[index]
        errors = int((predicted != obs).sum())
        mwpm_errors = int((mwpm_predictions(syndromes)[index] != obs).sum())
        low, high = wilson(errors, len(obs))
        return {"ler": errors / len(obs), "ler_over_mwpm": errors / max(mwpm_errors, 1),
                "ler_low": low, "ler_high": high, "mwpm_ler": mwpm_errors / len(obs), "ler_over_bposd": None,
                "unsatisfied": None}


def score_bb(result: CellResult) -> dict[str, float | None]:
    """Logical failures of the recorded corrections on the regenerated shots, and BP-OSD's on the same."""
    p, shots = BB_SETTINGS[result.setting], int(result.answer["shots"])
    n = qec_bb.bb_code(result.answer["code"])[0].shape[1]
    cx, cz = (qec_bb.unpack_bits(result.answer[k], (shots, n)) for k in ("corrections_x", "corrections_z"))
    failed, unsatisfied = qec_bb.failures(result.answer["code"], p, shots, result.seed, cx, cz)
    bposd_failed, _ = qec_bb.failures(result.answer["code"], p, shots, result.seed,
                                      *qec_bb.bposd_corrections(result.answer["code"], p, shots, result.seed))
    errors = int(failed.sum())
    low, high = wilson(errors, shots)
    return {"ler": errors / shots, "ler_over_mwpm": None, "ler_low": low, "ler_high": high, "mwpm_ler": None,
            "ler_over_bposd": errors / max(int(bposd_failed.sum()), 1), "unsatisfied": float(unsatisfied.mean())}
