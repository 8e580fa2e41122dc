"""Task `qec_precision_pyramid`: a W1 (binarised-weight) neural decoder whose activation precision
rises toward the output -- the paper's "precision pyramid", hidden activations 2 -> 2 -> 4 -> 8 bits
on layers that narrow as their precision rises, so that almost all of its work is in LUT-friendly
<= 2-bit stages -- against minimum-weight perfect matching on surface codes and Relay-BP (and
BP-OSD) on a bivariate-bicycle code, with the same network at uniform 1/2/8-bit activations and in
float as baselines.

Settings (ours): stim's rotated surface-code Z memory at d = 3 (3 rounds) and d = 5 (5 rounds),
circuit-level depolarising p = 0.006; the [[72,12,6]] BB code's Z memory as a stim circuit under
code-capacity depolarising p = 0.03 (`qec_bb.memory_circuit`: 72 detectors, 12 observables).
Every decoder reads a shot's detector bits and predicts every observable's flip; a shot fails when
any prediction is wrong. MWPM is pymatching on the circuit's detector error model; Relay-BP and
BP-OSD decode the BB circuit's detector error model (`qec_bb.decode_circuit`). The
neural decoders (`qec_neural.py`) are trained per seed on fresh stim shots, float first, then each
quantised one quantisation-aware from it, each early-stopped on a validation split under an epoch
cap fixed in the criterion. The solver records its predictions on the distinct test syndromes (and
a classical decoder its measured single-shot CPU latency); the scorer regenerates the seed's test
shots and counts logical errors, and computes the bit-operations, the low-bit share and the
modelled latency from the architecture (`qec_hardware.py`).
"""

from __future__ import annotations

import base64
import math
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers import qec_bb, qec_hardware, qec_neural
from environments.papers.base import CellResult, Claim, Condition, Departure, PaperOptions, PaperTask, describe_claim


@dataclass(frozen=True)
class Setting:
    code: str  # "surface" or a BB code name
    distance: int  # surface code distance (rounds = distance); the BB code's d for the record
    noise: float
    hidden: tuple[int, ...]  # the neural decoders' hidden widths
    train: int  # training shots at scale 1
    test: int  # test shots at scale 1


SETTINGS: dict[str, Setting] = {
    "d3_p006": Setting("surface", 3, 0.006, (128, 128, 8, 4), 100_000, 200_000),
    "d5_p006": Setting("surface", 5, 0.006, (128, 128, 8, 4), 100_000, 200_000),
    "bb72_p03": Setting("bb72", 6, 0.03, (256, 256, 8, 8), 100_000, 4_000),
}
N_VALID = 20_000
BUDGET = qec_neural.Budget()
# Activation bits of the hidden layers per neural solver (None: float; binarised weights otherwise).
ACTIVATION_BITS: dict[str, tuple[int | None, ...]] = {
    "pyramid": (2, 2, 4, 8),
    "float": (None,) * 4,
    "int1": (1,) * 4,
    "int2": (2,) * 4,
    "int8": (8,) * 4,
}
NEURAL = tuple(ACTIVATION_BITS)
BB_SOLVERS = ("relay_bp", "bposd")
LATENCY_SYNDROMES = 50  # single-shot CPU timings per classical cell (the median is recorded)
Solver = Literal["pyramid", "mwpm", "relay_bp", "bposd", "float", "int1", "int2", "int8"]


class Options(PaperOptions):
    solver: Solver = Field(
        "pyramid",
        description="pyramid (the paper's method); mwpm (surface codes), relay_bp, "
        "bposd (BB code); float, int1, int2, int8 (the same "
        "network in float or at uniform activation bits)",
    )
    seeds: int = Field(5, ge=1, le=500, description="seeds per setting (each trains five neural decoders per setting)")
    scale: int = Field(
        1, ge=1, le=1000, description="multiplies training and test shots (1: the registered check's size)"
    )


def applicable(setting: str, solver: str) -> bool:
    code = SETTINGS[setting].code
    if solver == "mwpm":
        return code == "surface"
    if solver in BB_SOLVERS:
        return code != "surface"
    return True


def surface_circuit(distance: int, noise: float) -> Any:
    import stim

    return stim.Circuit.generated(
        "surface_code:rotated_memory_z",
        distance=distance,
        rounds=distance,
        after_clifford_depolarization=noise,
        before_round_data_depolarization=noise,
        before_measure_flip_probability=noise,
        after_reset_flip_probability=noise,
    )


def circuit(setting: str) -> Any:
    s = SETTINGS[setting]
    return surface_circuit(s.distance, s.noise) if s.code == "surface" else qec_bb.memory_circuit(s.code, s.noise)


def shots(setting: str, seed: int, split: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(detector bits, observable flips (n, k)) of the seed's train, valid or test shots (disjoint stim seeds)."""
    stim_seed = 1000 * seed + {"train": 1, "test": 2, "valid": 3}[split] + 10 * list(SETTINGS).index(setting)
    det, obs = circuit(setting).compile_detector_sampler(seed=stim_seed).sample(n, separate_observables=True)
    return det, obs


def distinct_syndromes(det: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct syndromes (as 0/1 float32 rows) and each shot's index into them."""
    packed, index = np.unique(np.packbits(det, axis=1), axis=0, return_inverse=True)
    return np.unpackbits(packed, axis=1)[:, : det.shape[1]].astype(np.float32), index.ravel()


@lru_cache(maxsize=16)
def held_out_shots(setting: str, seed: int, scale: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    det, obs = shots(setting, seed, "test", SETTINGS[setting].test * scale)
    syndromes, index = distinct_syndromes(det)
    return syndromes, index, obs


def training_data(
    setting: str, seed: int, scale: int
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    det, obs = shots(setting, seed, "train", SETTINGS[setting].train * scale)
    vdet, vobs = shots(setting, seed, "valid", N_VALID)
    return (det.astype(np.float32), obs.astype(np.float32)), (vdet.astype(np.float32), vobs.astype(np.float32))


def sizes(setting: str) -> tuple[int, int]:
    """(detectors, observables) of the setting's circuit."""
    c = circuit(setting)
    return c.num_detectors, c.num_observables


@lru_cache(maxsize=16)  # every (setting, seed) of a check: each arm reuses them
def float_decoder(setting: str, seed: int, scale: int) -> qec_neural.Trained:
    """The seed's float decoder (also every quantised decoder's starting point), trained once."""
    from threadpoolctl import threadpool_limits

    data, valid = training_data(setting, seed, scale)
    d, k = sizes(setting)
    start = qec_neural.initial((d, *SETTINGS[setting].hidden, k), np.random.default_rng([seed, 7]))
    with threadpool_limits(1):  # small matrices on shared cores: one BLAS thread is fastest
        return qec_neural.train(
            data, valid, ACTIVATION_BITS["float"], False, BUDGET.float_epochs, BUDGET.float_lr, seed, start
        )


def neural_decoder(setting: str, seed: int, solver: str, scale: int) -> qec_neural.Trained:
    from threadpoolctl import threadpool_limits

    first = float_decoder(setting, seed, scale)
    if solver == "float":
        return first
    data, valid = training_data(setting, seed, scale)
    with threadpool_limits(1):
        return qec_neural.train(
            data, valid, ACTIVATION_BITS[solver], True, BUDGET.qat_epochs, BUDGET.qat_lr, seed + 1, first.params
        )


@lru_cache(maxsize=2)
def matching(setting: str) -> Any:
    """pymatching's decoder for the circuit's detector error model (built once)."""
    import pymatching

    return pymatching.Matching.from_detector_error_model(circuit(setting).detector_error_model(decompose_errors=True))


def classical_predictions(setting: str, seed: int, solver: str, syndromes: np.ndarray) -> np.ndarray:
    s = SETTINGS[setting]
    if solver == "mwpm":
        return np.asarray(matching(setting).decode_batch(syndromes.astype(np.uint8)).astype(bool))
    return qec_bb.decode_circuit(solver, s.code, s.noise, syndromes.astype(bool), seed)


def cpu_latency_us(setting: str, seed: int, solver: str, syndromes: np.ndarray) -> float:
    """The median wall time of decoding one non-trivial syndrome at a time, on this CPU (measured)."""
    nontrivial = syndromes[syndromes.any(axis=1)][:LATENCY_SYNDROMES]
    times = []
    for row in nontrivial:
        t0 = time.perf_counter()
        classical_predictions(setting, seed, solver, row[None, :])
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e6)


def pack(bits: np.ndarray) -> str:
    return base64.b64encode(np.packbits(bits.astype(bool).ravel()).tobytes()).decode()


def unpack(text: str, shape: tuple[int, ...]) -> np.ndarray:
    flat = np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8))
    return flat[: int(np.prod(shape))].reshape(shape).astype(bool)


def wilson(errors: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion."""
    p = errors / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def solve(setting: str, seed: int, solver: str, scale: int = 1) -> dict[str, Any]:
    """The decoder's flip predictions for every distinct test syndrome (it never sees test flips)."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; use one of {tuple(SETTINGS)}")
    if solver not in NEURAL and solver not in BB_SOLVERS and solver != "mwpm":
        raise ValueError(f"unknown solver {solver!r}; use one of {NEURAL + BB_SOLVERS + ('mwpm',)}")
    if not applicable(setting, solver):
        return {"applicable": False}
    syndromes, _, _ = held_out_shots(setting, seed, scale)
    answer: dict[str, Any] = {"applicable": True, "distinct_syndromes": int(len(syndromes)), "scale": scale}
    if solver in NEURAL:
        trained = neural_decoder(setting, seed, solver, scale)
        predictions = qec_neural.predict(trained.params, syndromes, ACTIVATION_BITS[solver], solver != "float")
        answer |= {"epochs": trained.epochs, "converged": trained.converged, "valid_loss": trained.valid_loss}
    else:
        predictions = classical_predictions(setting, seed, solver, syndromes)
        answer["cpu_latency_us"] = cpu_latency_us(setting, seed, solver, syndromes)
    answer["predictions"] = pack(predictions)
    return answer


def hardware(setting: str, solver: str) -> dict[str, float | None]:
    """Bit-operations, the <= 2-bit share and the modelled latency of a neural solver's network."""
    if solver not in NEURAL:
        return {"bit_ops": None, "low_bit_share": None, "latency_model_ns": None}
    d, k = sizes(setting)
    layers = qec_hardware.stages(d, SETTINGS[setting].hidden, k, ACTIVATION_BITS[solver])
    return {
        "bit_ops": float(sum(s.bit_ops for s in layers)),
        "low_bit_share": qec_hardware.low_bit_share(layers),
        "latency_model_ns": qec_hardware.latency_ns(layers),
    }


def score(result: CellResult) -> dict[str, float | None]:
    """The logical error rate of the recorded predictions on the regenerated test shots, and the
    network's hardware accounting."""
    names = QECPyramidTask.metric_names
    if not result.answer.get("applicable", True):
        return dict.fromkeys(names)
    scale = int(result.answer.get("scale", 1))
    syndromes, index, obs = held_out_shots(result.setting, result.seed, scale)
    if result.answer["distinct_syndromes"] != len(syndromes):
        raise ValueError(
            f"answer covers {result.answer['distinct_syndromes']} syndromes, the seed's test set has {len(syndromes)}"
        )
    predicted = unpack(result.answer["predictions"], (len(syndromes), obs.shape[1]))[index]
    errors = int((predicted != obs).any(axis=1).sum())
    low, high = wilson(errors, len(obs))
    converged = result.answer.get("converged")
    return {
        "ler": errors / len(obs),
        "ler_low": low,
        "ler_high": high,
        **hardware(result.setting, result.solver),
        "cpu_latency_us": result.answer.get("cpu_latency_us"),
        "epochs": result.answer.get("epochs"),
        "converged": None if converged is None else float(converged),
    }


def _surface_and_bb(metric: str, arm: str, op: Literal[">", "<"], threshold: float) -> list[Condition]:
    return [
        Condition(metric=metric, setting=s, arm=arm, op=op, threshold=threshold, stat="min" if op == ">" else "max")
        for s in SETTINGS
    ]


class QECPyramidTask(PaperTask[Options]):
    task = "qec_precision_pyramid"
    name = "papers.qec_precision_pyramid"
    version = "0.2.0"
    headline_metric = "ler@d3_p006"
    Options = Options
    solvers = ("pyramid", "mwpm", "relay_bp", "bposd", "float", "int1", "int2", "int8")
    settings = tuple(SETTINGS)
    metric_names = (
        "ler",
        "ler_low",
        "ler_high",
        "low_bit_share",
        "latency_model_ns",
        "bit_ops",
        "cpu_latency_us",
        "epochs",
        "converged",
    )
    lower_is_better = frozenset(
        {"ler", "ler_low", "ler_high", "latency_model_ns", "bit_ops", "cpu_latency_us", "epochs"}
    )
    claim: ClassVar[Claim] = Claim(
        id=name,
        arms=solvers,
        settings=settings,
        sentence="Precision Pyramid: a W1 (binarised-weight) neural decoder with a rising activation-precision "
        "hierarchy, for surface and bivariate-bicycle codes, below MWPM and Relay-BP in logical error, "
        "where uniform low-bit activations collapse, with over 99% of its work in LUT-friendly low-bit "
        "stages and a sub-microsecond latency budget (issue 42's reading of the abstract; PAPERS.md: "
        "activation precision rising toward the output, compared with MWPM and Relay-BP)",
        setting="stim rotated surface-code Z memory d=3 (3 rounds) and d=5 (5 rounds), circuit-level depolarising "
        "p=0.006; the BB [[72,12,6]] code's Z memory as a stim circuit, code-capacity depolarising p=0.03, "
        "noiseless syndrome measurement (72 detectors, 12 observables). Neural decoders: numpy MLPs, "
        "binarised weights, hidden widths 128-128-8-4 (surface) / 256-256-8-8 (BB), activation bits "
        "2-2-4-8 (pyramid) vs 1, 2, 8 uniform and float; trained per seed on 1e5 stim shots, early-stopped on 2e4 validation shots under epoch caps 4 (float) and 3 (QAT); tested on "
        "2e5 (surface) / 4e3 (BB) shots. MWPM by pymatching; Relay-BP (numpy, ours) and BP-OSD-CS-10 "
        "(ldpc) on the BB circuit's detector error model. Bit-ops, the <= 2-bit share and a "
        "latency model (4 ns cycles, LUT6 trees for <= 2-bit stages, adder trees otherwise) from the "
        "architecture; classical decoders' single-shot CPU latency measured",
        conditions=[
            Condition(metric="ler", setting="d3_p006", arm="pyramid", versus="mwpm", op="<", threshold=0.0),
            Condition(metric="ler", setting="d5_p006", arm="pyramid", versus="mwpm", op="<", threshold=0.0),
            Condition(metric="ler", setting="bb72_p03", arm="pyramid", versus="relay_bp", op="<", threshold=0.0),
            *[
                Condition(metric="ler", setting=s, arm=u, versus="pyramid", op=">", threshold=0.0)
                for u in ("int1", "int2")
                for s in SETTINGS
            ],
            *_surface_and_bb("low_bit_share", "pyramid", ">", 0.99),
            *_surface_and_bb("latency_model_ns", "pyramid", "<", 1000.0),
        ],
        protocol={
            "train_shots": "1e5 per setting",
            "valid_shots": N_VALID,
            "test_shots": "surface 2e5, bb72 4e3",
            "float_epoch_cap": BUDGET.float_epochs,
            "qat_epoch_cap": BUDGET.qat_epochs,
            "float_lr": BUDGET.float_lr,
            "qat_lr": BUDGET.qat_lr,
            "lr_decay": qec_neural.LR_DECAY,
            "stop_tolerance": qec_neural.TOLERANCE,
            "hidden": "surface 128-128-8-4, bb72 256-256-8-8",
            "pyramid_bits": "2-2-4-8",
            "latency_model": "4 ns cycle; <=2-bit stage ceil(log6(fan_in*bits))+1; else ceil(log2 fan_in)+2",
        },
        note="the low_bit_share and latency_model_ns conditions are arithmetic on the architecture, which was "
        "fixed with the criterion: they cannot fail except through a bug and are recorded as the hardware "
        "claim's accounting, not as evidence; the logical-error conditions decide. BP-OSD, int8 and float are "
        "context. On the BB setting MWPM records 'not applicable' (all metrics None), "
        "as do the BB decoders on the surface codes",
        departures=[
            Departure(
                paper="states its comparison in the abstract without the numbers, margins or settings",
                ours="read 'below MWPM and Relay-BP' as a paired difference of test LER < 0 (5 seeds, "
                "Student-t), and 'uniform low-bit collapses' as INT1 and INT2 each worse than the "
                "pyramid (difference > 0), in every setting",
                why="only the abstract is known; a check needs a comparison and a direction",
                effect="'collapse' read as merely worse is a weak bar; 'below' with no margin is the abstract's word",
            ),
            Departure(
                paper="decodes BB codes (and compares with Relay-BP), presumably under circuit-level noise",
                ours="the [[72,12,6]] code's Z memory as a stim circuit with code-capacity depolarising "
                "noise and one noiseless round of syndrome measurement (MPP), p = 0.03",
                why="a circuit-level BB syndrome-extraction schedule did not fit this session",
                effect="code capacity is easier for every decoder; the pyramid-vs-Relay-BP gap may differ "
                "under circuit noise, in either direction",
            ),
            Departure(
                paper="decodes surface codes at distances and noise rates the abstract does not give",
                ours="d = 3 and d = 5 rotated memory, rounds = d, circuit-level p = 0.006",
                why="CPU budget",
                effect="larger distances, where neural decoders are harder to train, are untested",
            ),
            Departure(
                paper="trains its decoders to convergence with a budget it does not state",
                ours="1e5 training shots per seed, float <= 4 epochs, each quantised decoder <= 3 "
                "epochs of quantisation-aware training from it, early-stopped on a validation split "
                "(the epochs used and whether the stop rule fired are recorded per cell)",
                why="a check of at most 15 minutes on a shared 2-core machine; --scale N multiplies the shots",
                effect="under-trained decoders (most at d = 5 and on the BB code's 12 observables) make the "
                "'below MWPM / Relay-BP' conditions fail for the budget, not necessarily the method",
            ),
            Departure(
                paper="uses its own architecture (not in the abstract)",
                ours="an MLP whose widths fall as precision rises (128-128-8-4 / 256-256-8-8, bits 2-2-4-8), "
                "chosen before any run so that > 99% of bit-operations read <= 2-bit activations",
                why="the abstract's hierarchy and >99% share, as a network we can train on CPU",
                effect="a narrow high-precision tail may cost accuracy a different split would not",
            ),
            Departure(
                paper="reports a sub-microsecond latency budget (presumably from hardware design)",
                ours="a latency model of the network (4 ns cycles, LUT6 trees, adder trees; stated, not "
                "synthesised) beside MWPM's and our numpy Relay-BP's single-shot CPU latency measured "
                "here under load",
                why="no FPGA flow here",
                effect="the latency conditions hold by arithmetic; the CPU latencies are Python-level and "
                "not the paper's implementations, so the comparison is context only",
            ),
            Departure(
                paper="uses Relay-BP as published",
                ours="our numpy Relay-BP (30 legs at most, S = 5, messages restarting each leg, saturation "
                "at |64|) on the circuit's detector error model with per-mechanism priors",
                why="no Relay-BP package",
                effect="a weaker Relay-BP would make the BB condition easier; BP-OSD beside it shows how strong it is",
            ),
            Departure(
                paper="builds quantised hardware",
                ours="simulate the quantisers in float numpy",
                why="no hardware here",
                effect="none on accuracy (the grids are exact)",
            ),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        scale = int(getattr(self.options, "scale", 1)) if self.options is not None else 1
        answer = solve(setting, seed, solver, scale)
        return CellResult(
            solver=solver, setting=setting, seed=seed, answer=answer, wall_s=round(time.perf_counter() - t0, 4)
        )

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        return score(result)
