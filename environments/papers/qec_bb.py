"""The bivariate-bicycle half of `qec_precision_pyramid`: a BB code, code-capacity depolarising
noise, and three decoders -- BP-OSD (the pinned `ldpc` package), Relay-BP and plain min-sum BP
(both `qec_relay_bp.py`) -- scored by logical error rate.

A BB code (Bravyi et al. 2024) lives in the group algebra of Z_l x Z_m: with x = S_l (x) I_m and
y = I_l (x) S_m (S a cyclic shift), A and B are sums of three monomials, H_X = [A | B] and
H_Z = [B^T | A^T]; A and B commute, so H_X H_Z^T = AB + BA = 0 mod 2. [[72,12,6]]: l = m = 6,
A = x^3 + y + y^2, B = y^3 + x + x^2; the gross code [[144,12,12]]: l = 12, m = 6, same A and B.

Noise (ours: code capacity): each qubit independently suffers X, Y or Z with probability p/3 each.
X parts (X or Y) are decoded from H_Z's syndrome and Z parts from H_X's, each with the marginal
flip rate 2p/3. A shot fails when either sector's residual error (error + correction) has a
non-zero syndrome or is a non-trivial logical: r is a stabiliser iff it is orthogonal to every
vector of ker(H_X) (X sector; ker(H_Z) for Z), since rowspace(H_X) = ker(H_X)^perp.
"""

from __future__ import annotations

import base64
import zlib
from functools import lru_cache
from typing import Any

import numpy as np

from environments.papers.qec_relay_bp import RelayConfig, TannerGraph, min_sum_bp, relay_bp, tanner_graph

# name -> (l, m, A's monomials, B's monomials); a monomial is (power of x, power of y)
BB_CODES: dict[str, tuple[int, int, tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]] = {
    "bb72": (6, 6, ((3, 0), (0, 1), (0, 2)), ((0, 3), (1, 0), (2, 0))),
    "bb144": (12, 6, ((3, 0), (0, 1), (0, 2)), ((0, 3), (1, 0), (2, 0))),
}
BP_ITERATIONS = 100  # plain min-sum BP, and BP-OSD's BP before OSD
OSD_ORDER = 10  # BP+OSD-CS-10, the comparator the Relay-BP paper names
BPOSD_SCALING = 0.625
RELAY = RelayConfig(legs=30)  # ours: at most 30 legs (time); the other knobs are the paper's defaults


def shift(size: int) -> np.ndarray:
    return np.roll(np.eye(size, dtype=np.int64), 1, axis=1)


def polynomial(l: int, m: int, monomials: tuple[tuple[int, int], ...]) -> np.ndarray:
    x, y = np.kron(shift(l), np.eye(m, dtype=np.int64)), np.kron(np.eye(l, dtype=np.int64), shift(m))
    total = sum(np.linalg.matrix_power(x, a) @ np.linalg.matrix_power(y, b) for a, b in monomials)
    return (np.asarray(total) % 2).astype(np.uint8)


@lru_cache(maxsize=4)
def bb_code(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(H_X, H_Z) of a named BB code."""
    if name not in BB_CODES:
        raise ValueError(f"unknown BB code {name!r}; use one of {sorted(BB_CODES)}")
    l, m, a_terms, b_terms = BB_CODES[name]
    a, b = polynomial(l, m, a_terms), polynomial(l, m, b_terms)
    return np.hstack([a, b]), np.hstack([b.T, a.T])


def gf2_row_reduce(matrix: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Reduced row echelon form over GF(2) and the pivot columns."""
    r = (np.asarray(matrix) % 2).astype(np.uint8).copy()
    pivots: list[int] = []
    row = 0
    for col in range(r.shape[1]):
        hits = np.flatnonzero(r[row:, col]) + row
        if hits.size == 0:
            continue
        r[[row, hits[0]]] = r[[hits[0], row]]
        others = np.flatnonzero(r[:, col])
        others = others[others != row]
        r[others] ^= r[row]
        pivots.append(col)
        row += 1
        if row == r.shape[0]:
            break
    return r, pivots


def gf2_rank(matrix: np.ndarray) -> int:
    return len(gf2_row_reduce(matrix)[1])


def gf2_kernel(matrix: np.ndarray) -> np.ndarray:
    """A basis of {v : M v = 0 mod 2}, one vector a row."""
    r, pivots = gf2_row_reduce(matrix)
    n = r.shape[1]
    free = [c for c in range(n) if c not in set(pivots)]
    basis = np.zeros((len(free), n), dtype=np.uint8)
    for i, f in enumerate(free):
        basis[i, f] = 1
        for row, p in enumerate(pivots):
            basis[i, p] = r[row, f]
    return basis


def code_parameters(name: str) -> tuple[int, int]:
    """(n, k): k = n - rank H_X - rank H_Z over GF(2)."""
    hx, hz = bb_code(name)
    return hx.shape[1], hx.shape[1] - gf2_rank(hx) - gf2_rank(hz)


def depolarising(n: int, p: float, shots: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(X parts, Z parts) of i.i.d. code-capacity depolarising errors: X, Y, Z each with p/3."""
    if not 0.0 <= p <= 0.75:
        raise ValueError(f"depolarising rate {p!r}: use a probability in [0, 0.75]")
    u = np.random.default_rng([seed, 72]).random((shots, n))
    return u < 2 * p / 3, (u >= p / 3) & (u < p)


def sector_syndromes(name: str, p: float, shots: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """What a decoder sees: (H_Z e_x, H_X e_z) mod 2 per shot."""
    hx, hz = bb_code(name)
    ex, ez = depolarising(hx.shape[1], p, shots, seed)
    return (ex.astype(np.int64) @ hz.T) % 2 == 1, (ez.astype(np.int64) @ hx.T) % 2 == 1


def bposd(pcm: np.ndarray, syndromes: np.ndarray, error_rate: float) -> np.ndarray:
    from ldpc.bposd_decoder import BpOsdDecoder

    decoder = BpOsdDecoder(
        pcm,
        error_rate=error_rate,
        max_iter=BP_ITERATIONS,
        bp_method="minimum_sum",
        ms_scaling_factor=BPOSD_SCALING,
        osd_method="osd_cs",
        osd_order=OSD_ORDER,
    )
    return np.array([decoder.decode(s.astype(np.uint8)) for s in syndromes], dtype=bool).reshape(len(syndromes), -1)


def decode(solver: str, pcm: np.ndarray, syndromes: np.ndarray, error_rate: float, seed: int) -> np.ndarray:
    """A sector's corrections (shots, n) from its syndromes alone. Each distinct syndrome is decoded
    once: every decoder here is a deterministic function of the syndrome (Relay-BP's memory strengths
    are drawn per leg from `seed`, not per shot)."""
    if solver not in ("bposd", "relay_bp", "minsum_bp"):
        raise ValueError(f"unknown BB decoder {solver!r}; use bposd, relay_bp or minsum_bp")
    distinct, index = np.unique(syndromes, axis=0, return_inverse=True)
    if solver == "bposd":
        found = bposd(pcm, distinct, error_rate)
    elif solver == "relay_bp":
        found = relay_bp(tanner_graph(pcm), distinct, error_rate, seed, RELAY)[0]
    else:
        found = min_sum_bp(tanner_graph(pcm), distinct, error_rate, BP_ITERATIONS)[0]
    return found[index.ravel()]


def corrections(solver: str, name: str, p: float, shots: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(X-sector, Z-sector) corrections of the cell's shots."""
    if solver == "bposd":
        return bposd_corrections(name, p, shots, seed)
    return sector_corrections(solver, name, p, shots, seed)


def sector_corrections(solver: str, name: str, p: float, shots: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    hx, hz = bb_code(name)
    sx, sz = sector_syndromes(name, p, shots, seed)
    rate = 2 * p / 3
    return decode(solver, hz, sx, rate, seed), decode(solver, hx, sz, rate, seed + 1)


@lru_cache(maxsize=16)
def bposd_corrections(name: str, p: float, shots: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """BP-OSD's corrections of a cell, cached: every solver's score is also read against them."""
    return sector_corrections("bposd", name, p, shots, seed)


def failures(
    name: str, p: float, shots: int, seed: int, cx: np.ndarray, cz: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per shot: (logical failure, the correction misses the syndrome), regenerating the errors."""
    hx, hz = bb_code(name)
    ex, ez = depolarising(hx.shape[1], p, shots, seed)
    rx, rz = (ex ^ cx).astype(np.int64), (ez ^ cz).astype(np.int64)
    unsatisfied = ((rx @ hz.T) % 2).any(axis=1) | ((rz @ hx.T) % 2).any(axis=1)
    logical = ((rx @ logical_tests(name)[0].T) % 2).any(axis=1) | ((rz @ logical_tests(name)[1].T) % 2).any(axis=1)
    return unsatisfied | logical, unsatisfied


@lru_cache(maxsize=4)
def logical_tests(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(ker H_X, ker H_Z): an X residual is a non-trivial logical iff some row of ker H_X meets it oddly."""
    hx, hz = bb_code(name)
    return gf2_kernel(hx).astype(np.int64), gf2_kernel(hz).astype(np.int64)


def pack_bits(bits: np.ndarray) -> str:
    """Mostly-zero bit arrays, packed and compressed (corrections are sparse)."""
    return base64.b64encode(zlib.compress(np.packbits(bits.astype(bool)).tobytes(), 9)).decode()


def unpack_bits(text: str, shape: tuple[int, int]) -> np.ndarray:
    flat = np.unpackbits(np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=np.uint8))
    return flat[: shape[0] * shape[1]].reshape(shape).astype(bool)


# --- The BB code as a stim circuit (issue 42): syndromes and the detector error model come from stim ---


@lru_cache(maxsize=4)
def logical_z_basis(name: str) -> np.ndarray:
    """k independent Z logicals, one a row: vectors of ker H_X outside rowspace H_Z (so they commute
    with every X check and are not Z stabilisers). The check matrices are rank-deficient (for bb72,
    36 rows of rank 30 each), which is why this reduces rather than inverts."""
    hx, hz = bb_code(name)
    chosen: list[np.ndarray] = []
    rank = gf2_rank(hz)
    for v in gf2_kernel(hx):
        trial = np.vstack([hz, *chosen, v])
        if gf2_rank(trial) > rank:
            chosen.append(v)
            rank += 1
    k = code_parameters(name)[1]
    if len(chosen) != k:
        raise ValueError(f"BB code {name!r}: found {len(chosen)} Z logicals, expected k = {k}")
    return np.array(chosen, dtype=np.uint8)


def pauli_product(kind: str, support: np.ndarray) -> list[Any]:
    import stim

    targets: list[Any] = []
    for q in np.flatnonzero(support):
        if targets:
            targets.append(stim.target_combiner())
        targets.append(stim.target_x(int(q)) if kind == "X" else stim.target_z(int(q)))
    return targets


@lru_cache(maxsize=8)
def memory_circuit(name: str, p: float) -> Any:
    """The BB code's Z-basis memory under code-capacity depolarising noise, as a stim circuit: data
    reset to |0>, the X checks measured once (their first outcomes are random), DEPOLARIZE1(p) on
    every data qubit, then every check measured noiselessly (MPP) and the k Z logicals read.
    Detectors, in order: the Z checks (rows of H_Z, they see X and Y errors), then the X checks
    compared with their first outcomes (rows of H_X, they see Z and Y errors) -- the layout of
    `sector_syndromes`. Observables: the Z logicals (`logical_z_basis`), which X and Y errors flip."""
    import stim

    if not 0.0 <= p <= 0.75:
        raise ValueError(f"depolarising rate {p!r}: use a probability in [0, 0.75]")
    hx, hz = bb_code(name)
    n = hx.shape[1]
    c = stim.Circuit()
    c.append("R", range(n))
    for row in hx:
        c.append("MPP", pauli_product("X", row))
    c.append("DEPOLARIZE1", range(n), p)
    for row in hz:
        c.append("MPP", pauli_product("Z", row))
    for row in hx:
        c.append("MPP", pauli_product("X", row))
    logicals = logical_z_basis(name)
    for row in logicals:
        c.append("MPP", pauli_product("Z", row))
    mz, mx, k = len(hz), len(hx), len(logicals)
    total = mx + mz + mx + k  # measurements so far; rec[-1] is the last
    for i in range(mz):  # Z checks: deterministic +1 on |0>
        c.append("DETECTOR", [stim.target_rec(mx + i - total)])
    for i in range(mx):  # X checks: the final outcome against the first
        c.append("DETECTOR", [stim.target_rec(mx + mz + i - total), stim.target_rec(i - total)])
    for j in range(k):
        c.append("OBSERVABLE_INCLUDE", [stim.target_rec(mx + mz + mx + j - total)], j)
    return c


def dem_matrices(dem: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A detector error model as (check matrix detectors x mechanisms, observables x mechanisms,
    each mechanism's probability): what a BP-family decoder reads."""
    columns: list[tuple[list[int], list[int], float]] = []
    for inst in dem.flattened():
        if inst.type != "error":
            continue
        dets, obs = [], []
        for t in inst.targets_copy():
            if t.is_relative_detector_id():
                dets.append(t.val)
            elif t.is_logical_observable_id():
                obs.append(t.val)
        columns.append((dets, obs, float(inst.args_copy()[0])))
    h = np.zeros((dem.num_detectors, len(columns)), dtype=np.uint8)
    lo = np.zeros((dem.num_observables, len(columns)), dtype=np.uint8)
    for j, (dets, obs, _) in enumerate(columns):
        h[dets, j] ^= 1
        lo[obs, j] ^= 1
    return h, lo, np.array([c[2] for c in columns])


@lru_cache(maxsize=8)
def circuit_model(name: str, p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return dem_matrices(memory_circuit(name, p).detector_error_model())


def circuit_shots(name: str, p: float, seed: int, split: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(detector bits, observable flips) of the seed's train, validation or test shots (disjoint stim seeds)."""
    stim_seed = 1000 * seed + {"train": 1, "test": 2, "valid": 3}[split] + 100
    det, obs = memory_circuit(name, p).compile_detector_sampler(seed=stim_seed).sample(n, separate_observables=True)
    return det, obs


def decode_circuit(solver: str, name: str, p: float, syndromes: np.ndarray, seed: int) -> np.ndarray:
    """A BP-family decoder on the circuit's detector error model: the observable flips (shots, k) it
    predicts for each syndrome (it decodes mechanisms, then reads their observables)."""
    if solver not in ("bposd", "relay_bp", "minsum_bp"):
        raise ValueError(f"unknown BB decoder {solver!r}; use bposd, relay_bp or minsum_bp")
    h, lo, probs = circuit_model(name, p)
    if solver == "bposd":
        decoder = circuit_bposd(name, p)
        found = np.array([decoder.decode(s.astype(np.uint8)) for s in syndromes], dtype=np.int64)
    elif solver == "relay_bp":
        found = relay_bp(circuit_graph(name, p), syndromes, probs, seed, RELAY)[0].astype(np.int64)
    else:
        found = min_sum_bp(circuit_graph(name, p), syndromes, probs, BP_ITERATIONS)[0].astype(np.int64)
    return np.asarray((found.reshape(len(syndromes), -1) @ lo.T.astype(np.int64)) % 2 == 1)


@lru_cache(maxsize=8)
def circuit_graph(name: str, p: float) -> TannerGraph:
    return tanner_graph(circuit_model(name, p)[0])


@lru_cache(maxsize=8)
def circuit_bposd(name: str, p: float) -> Any:
    """BP-OSD-CS on the circuit's detector error model, built once (a single-shot timing then
    measures decoding, not construction)."""
    from ldpc.bposd_decoder import BpOsdDecoder

    h, _, probs = circuit_model(name, p)
    return BpOsdDecoder(
        h,
        channel_probs=list(probs),
        max_iter=BP_ITERATIONS,
        bp_method="minimum_sum",
        ms_scaling_factor=BPOSD_SCALING,
        osd_method="osd_cs",
        osd_order=OSD_ORDER,
    )
