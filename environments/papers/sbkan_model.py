"""A sparse Bayesian KAN and its posterior sampler (numpy): B-spline edges, spike-and-slab edges,
a hyperprior on the number of knot intervals, and an exact reference posterior for the
linear-in-basis case.

The network (d inputs, Q hidden units, one output, fixed depth 2):

    h_q(x) = sum_p z_qp phi_qp(x_p),     phi_qp(t) = B_{m_p}(t) . c_qp   (inner edges)
    f(x)   = b + sum_q w_q Phi_q(u_q),   u_q = sigmoid(h_q),  Phi_q(u) = B_{m_out}(u) . a_q

B_m is the cubic B-spline basis on m uniform intervals of [0, 1] (m + 3 functions, the uniform knot
sequence extended beyond the interval). Priors: an edge is in with probability `inclusion` (z_qp
for an inner edge, w_q for a hidden unit's outer edge); an included edge's coefficients are
N(0, tau^2 I) (the slab); an excluded edge has no coefficients (the spike at zero). The model size
is the number of knot intervals m of the inner edges: the adaptive model has one m for every
coordinate with the hyperprior pi(m) ~ exp(-size_penalty m log(m + 1)) on `grid`; the oracle
model fixes m_p per coordinate. Noise: Gaussian, known sd.

The sampler (one sweep, every move leaves the posterior invariant):
1. (w, a, b) | rest: exact. The outer layer is linear given the hidden values, so every one of
   the 2^Q outer inclusion patterns has a closed-form marginal likelihood; draw the pattern, then
   the coefficients from their Gaussian conditional.
2. the included inner coefficients | rest: Metropolis-Hastings with a Gauss-Newton proposal
   (the Gaussian posterior of the model linearised at the current point; the reverse density is
   the one linearised at the proposal).
3. each inner edge in turn, birth/death: a birth draws the edge's coefficients from the
   Gauss-Newton proposal linearised at zero, a death removes them; the reverse move's density
   enters the ratio (reversible jump, Jacobian 1).
4. (adaptive only) m -> a neighbour on the grid: every included edge's function is projected
   onto the new basis and a Gauss-Newton proposal drawn from there (reversible jump).
With `linear=True` the network is one additive layer, f(x) = b + sum_p z_p phi_p(x_p): every
proposal is then the exact conditional, and `exact_linear_posterior` enumerates the posterior
exactly; the tests compare the two.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy.linalg import solve_triangular

LOG_2PI = math.log(2 * math.pi)


def bspline_basis(t: np.ndarray, m: int, derivative: bool = False) -> np.ndarray:
    """The m + 3 cubic B-splines on m uniform intervals of [0, 1] (knots j/m, j = -3..m+3) at t
    (clipped to [0, 1]); with `derivative`, their first derivatives. Shape (len(t), m + 3)."""
    t = np.clip(np.asarray(t, dtype=float), 0.0, 1.0) * m
    i = np.minimum(np.floor(t).astype(int), m - 1)
    s = t - i
    if derivative:
        local = m * np.stack([-((1 - s) ** 2) / 2, (3 * s**2 - 4 * s) / 2, (-3 * s**2 + 2 * s + 1) / 2, s**2 / 2], 1)
    else:
        local = np.stack([(1 - s) ** 3, 3 * s**3 - 6 * s**2 + 4, -3 * s**3 + 3 * s**2 + 3 * s + 1, s**3], 1) / 6
    out = np.zeros((len(t), m + 3))
    rows = np.arange(len(t))[:, None]
    out[rows, i[:, None] + np.arange(4)] = local
    return out


@dataclass(frozen=True)
class Prior:
    """The model and its prior. `grid`: the knot-interval counts the hyperprior ranges over
    (adaptive); `fixed_m`: per-coordinate interval counts (oracle); exactly one is used."""

    d: int = 2
    hidden: int = 3
    m_out: int = 8
    grid: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    fixed_m: tuple[int, ...] | None = None
    inclusion: float = 0.5
    tau_in: float = 1.0
    tau_out: float = 2.0
    tau_bias: float = 10.0
    size_penalty: float = 0.05
    noise: float = 0.3
    linear: bool = False
    inner_step: float = math.inf  # e = min(1, inner_step dim^(-2/3)) in the inner move (inf: e = 1)
    size_newton: int = 0  # deterministic Gauss-Newton steps before a knot-count proposal

    def __post_init__(self) -> None:
        if self.fixed_m is not None and (len(self.fixed_m) != self.d or min(self.fixed_m) < 1):
            raise ValueError(f"fixed_m {self.fixed_m}: needs one interval count >= 1 per input ({self.d})")
        if not self.grid or min(self.grid) < 1 or list(self.grid) != sorted(set(self.grid)):
            raise ValueError(f"grid {self.grid}: must be ascending distinct interval counts >= 1")
        if not self.inner_step > 0:
            raise ValueError(f"inner_step {self.inner_step}: must be positive")
        if not 0 < self.inclusion < 1:
            raise ValueError(f"inclusion {self.inclusion}: must lie strictly between 0 and 1")

    @property
    def units(self) -> int:
        return 1 if self.linear else self.hidden

    def log_size_prior(self, m: int) -> float:
        """log pi(m), normalised over the grid."""
        logits = np.array([-self.size_penalty * k * math.log(k + 1) for k in self.grid])
        return float(logits[self.grid.index(m)] - np.logaddexp.reduce(logits))


@dataclass
class State:
    m: list[int]  # knot intervals per input coordinate
    z: np.ndarray  # (units, d) inner edge inclusion
    c: dict[tuple[int, int], np.ndarray]  # included inner edges' coefficients
    w: np.ndarray  # (units,) outer edge inclusion (all ones in the linear model)
    a: np.ndarray  # (units, m_out + 3) outer coefficients (zero where w is 0)
    b: float = 0.0
    stats: dict[str, int] = field(default_factory=dict)


class OuterFit(NamedTuple):
    """One outer inclusion pattern's Gaussian posterior: the design columns it uses, the mean and
    the Cholesky factor of the precision over those columns."""

    cols: list[int]
    mean: np.ndarray
    chol: np.ndarray


class SBKAN:
    """The posterior of one data set: `sweep(state, rng)` is one step of the Markov chain."""

    def __init__(self, prior: Prior, x: np.ndarray, y: np.ndarray):
        if x.ndim != 2 or x.shape[1] != prior.d or len(x) != len(y):
            raise ValueError(f"x must be (n, {prior.d}) and y (n,); got {x.shape} and {y.shape}")
        self.prior, self.x, self.y = prior, x, np.asarray(y, dtype=float)
        self._basis: dict[tuple[int, int], np.ndarray] = {}

    # -- the network ---------------------------------------------------------------------------
    def inner_basis(self, p: int, m: int) -> np.ndarray:
        if (p, m) not in self._basis:
            self._basis[(p, m)] = bspline_basis(self.x[:, p], m)
        return self._basis[(p, m)]

    def hidden(self, s: State) -> np.ndarray:
        h = np.zeros((len(self.y), self.prior.units))
        for (q, p), coef in s.c.items():
            h[:, q] += self.inner_basis(p, s.m[p]) @ coef
        return h

    def predict(self, s: State, h: np.ndarray) -> np.ndarray:
        if self.prior.linear:
            return s.b + h[:, 0]
        u = 1 / (1 + np.exp(-h))
        out = np.full(len(h), s.b)
        for q in np.flatnonzero(s.w):
            out += bspline_basis(u[:, q], self.prior.m_out) @ s.a[q]
        return out

    def loglik(self, s: State, h: np.ndarray | None = None) -> float:
        r = self.y - self.predict(s, self.hidden(s) if h is None else h)
        sd = self.prior.noise
        return float(-0.5 * (r @ r) / sd**2 - len(r) * (math.log(sd) + 0.5 * LOG_2PI))

    def log_slab(self, coefs: list[np.ndarray]) -> float:
        v = np.concatenate(coefs) if coefs else np.zeros(0)
        tau = self.prior.tau_in
        return float(-0.5 * (v @ v) / tau**2 - len(v) * (math.log(tau) + 0.5 * LOG_2PI))

    def log_inclusion(self, s: State) -> float:
        k, total = int(s.z.sum()), s.z.size
        return k * math.log(self.prior.inclusion) + (total - k) * math.log(1 - self.prior.inclusion)

    # -- the Gauss-Newton proposal --------------------------------------------------------------
    def jacobian(self, s: State, h: np.ndarray, edges: list[tuple[int, int]]) -> np.ndarray:
        """d f / d (the coefficients of `edges`, concatenated in that order) at s."""
        cols = []
        if not self.prior.linear:
            u = 1 / (1 + np.exp(-h))
            slope = np.stack(
                [
                    s.w[q]
                    * (bspline_basis(u[:, q], self.prior.m_out, derivative=True) @ s.a[q])
                    * u[:, q]
                    * (1 - u[:, q])
                    for q in range(self.prior.units)
                ],
                1,
            )
        for q, p in edges:
            base = self.inner_basis(p, s.m[p])
            cols.append(base if self.prior.linear else slope[:, q : q + 1] * base)
        return np.concatenate(cols, 1) if cols else np.zeros((len(self.y), 0))

    def gauss_newton(self, s: State, edges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """Mean and Cholesky factor L (precision = L L^T) of the Gaussian posterior of the `edges`'
        coefficients with the model linearised at s (exact when the model is linear)."""
        h = self.hidden(s)
        jac = self.jacobian(s, h, edges)
        c0 = np.concatenate([s.c[e] for e in edges])
        resid = self.y - self.predict(s, h)
        sd2, tau2 = self.prior.noise**2, self.prior.tau_in**2
        chol = np.linalg.cholesky(jac.T @ jac / sd2 + np.eye(len(c0)) / tau2)
        return c0 + _chol_solve(chol, jac.T @ resid / sd2 - c0 / tau2), chol

    @staticmethod
    def draw(mean: np.ndarray, chol: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(
            mean + solve_triangular(chol.T, rng.standard_normal(len(mean)), lower=False, check_finite=False)
        )

    @staticmethod
    def log_density(v: np.ndarray, mean: np.ndarray, chol: np.ndarray) -> float:
        white = chol.T @ (v - mean)  # standard normal under N(mean, (L L^T)^-1)
        return float(-0.5 * white @ white + np.log(np.diag(chol)).sum() - 0.5 * len(v) * LOG_2PI)

    # -- the moves ------------------------------------------------------------------------------
    def _outer_patterns(self, s: State) -> tuple[list[tuple[int, ...]], list[float], list[OuterFit]]:
        """Every outer inclusion pattern with log p(y, pattern | inner layer) (outer coefficients
        and bias integrated out, up to a constant) and its Gaussian posterior."""
        pr, sd2 = self.prior, self.prior.noise**2
        h = self.hidden(s)
        ones = np.ones((len(self.y), 1))
        blocks: list[np.ndarray]
        patterns: list[tuple[int, ...]]
        if pr.linear:
            blocks, patterns = [], [()]
            target = self.y - h[:, 0]
        else:
            u = 1 / (1 + np.exp(-h))
            blocks = [bspline_basis(u[:, q], pr.m_out) for q in range(pr.units)]
            patterns = [tuple(on) for on in itertools.product((0, 1), repeat=pr.units)]
            target = self.y
        design = np.concatenate([ones, *blocks], 1)
        gram, proj, yy = design.T @ design / sd2, design.T @ target / sd2, target @ target / sd2
        k = pr.m_out + 3
        logs: list[float] = []
        fits: list[OuterFit] = []
        for on in patterns:
            cols = [0] + [1 + q * k + j for q in range(len(on)) if on[q] for j in range(k)]
            var = np.array([pr.tau_bias**2] + [pr.tau_out**2] * (len(cols) - 1))
            chol = np.linalg.cholesky(gram[np.ix_(cols, cols)] + np.diag(1 / var))
            mean = _chol_solve(chol, proj[cols])
            logs.append(
                float(
                    -0.5 * (yy - proj[cols] @ mean)
                    - 0.5 * np.log(var).sum()
                    - np.log(np.diag(chol)).sum()
                    + sum(math.log(pr.inclusion if b else 1 - pr.inclusion) for b in on)
                )
            )
            fits.append(OuterFit(cols, mean, chol))
        return patterns, logs, fits

    def log_collapsed(self, s: State) -> float:
        """log p(y, inner layer, m) with the outer layer integrated out (up to a constant): the
        score that compares starting structures."""
        size = 0.0 if self.prior.fixed_m is not None else self.prior.log_size_prior(s.m[0])
        _, logs, _ = self._outer_patterns(s)
        return float(np.logaddexp.reduce(logs)) + self.log_slab(list(s.c.values())) + self.log_inclusion(s) + size

    def update_outer(self, s: State, rng: np.random.Generator) -> None:
        """(w, a, b) | rest: exact, by enumerating the outer inclusion patterns."""
        patterns, logs, fits = self._outer_patterns(s)
        probs = np.exp(np.array(logs) - np.logaddexp.reduce(logs))
        pick = int(rng.choice(len(patterns), p=probs / probs.sum()))
        cols, mean, chol = fits[pick]
        coef = mean + solve_triangular(chol.T, rng.standard_normal(len(cols)), lower=False, check_finite=False)
        s.b = float(coef[0])
        if not self.prior.linear:
            k = self.prior.m_out + 3
            s.w = np.array(patterns[pick], dtype=bool)
            s.a = np.zeros((self.prior.units, k))
            for i, q in enumerate(np.flatnonzero(s.w)):
                s.a[q] = coef[1 + i * k : 1 + (i + 1) * k]

    def log_target(self, s: State) -> float:
        """log p(y | s) + log p(inner coefficients | m) + log p(z) + log pi(m) (the parts the inner
        moves change; the outer layer's prior is constant under them)."""
        size = 0.0 if self.prior.fixed_m is not None else self.prior.log_size_prior(s.m[0])
        return self.loglik(s) + self.log_slab(list(s.c.values())) + self.log_inclusion(s) + size

    def update_inner(self, s: State, rng: np.random.Generator) -> None:
        """Preconditioned Crank-Nicolson around the local Gauss-Newton Gaussian N(mu, P^-1):
        c' ~ N(c + g (mu - c), e P^-1) with g = 1 - sqrt(1 - e), e = `inner_step`; this leaves that
        Gaussian exactly invariant, so in the linear model (e = 1: c' ~ N(mu, P^-1)) every
        proposal is accepted, and a smaller e keeps acceptance up where the model is not linear
        (e ~ dim^(-2/3), the scaling of Langevin proposals)."""
        edges = sorted(s.c)
        if not edges:
            return
        old = np.concatenate([s.c[e] for e in edges])
        step = min(1.0, self.prior.inner_step * len(old) ** (-2 / 3))
        mean, chol = self.gauss_newton(s, edges)
        new = self.draw(self._pcn_mean(old, mean, step), chol / math.sqrt(step), rng)
        t = self._with_coefs(s, edges, new)
        back_mean, back_chol = self.gauss_newton(t, edges)
        log_ratio = (
            self.log_target(t)
            - self.log_target(s)
            + self.log_density(old, self._pcn_mean(new, back_mean, step), back_chol / math.sqrt(step))
            - self.log_density(new, self._pcn_mean(old, mean, step), chol / math.sqrt(step))
        )
        self._accept(s, t, log_ratio, rng, "inner")

    @staticmethod
    def _pcn_mean(c: np.ndarray, mean: np.ndarray, step: float) -> np.ndarray:
        return np.asarray(c + (1 - math.sqrt(1 - step)) * (mean - c))

    def update_edges(self, s: State, rng: np.random.Generator) -> None:
        """Birth/death of each inner edge in turn (reversible jump)."""
        for e in itertools.product(range(self.prior.units), range(self.prior.d)):
            base = self._copy(s)
            base.c.pop(e, None)
            base.z[e] = False
            zero = self._copy(base)
            zero.c[e] = np.zeros(s.m[e[1]] + 3)
            zero.z[e] = True
            mean, chol = self.gauss_newton(zero, [e])
            if e in s.c:  # death: s has e, the reverse birth would draw s.c[e]
                log_ratio = self.log_target(base) - self.log_target(s) + self.log_density(s.c[e], mean, chol)
                self._accept(s, base, log_ratio, rng, "death")
            else:
                born = self._copy(base)
                born.c[e], born.z[e] = self.draw(mean, chol, rng), True
                log_ratio = self.log_target(born) - self.log_target(s) - self.log_density(born.c[e], mean, chol)
                self._accept(s, born, log_ratio, rng, "birth")

    def update_size(self, s: State, rng: np.random.Generator) -> None:
        """m -> a neighbour on the grid (adaptive model only; reversible jump)."""
        grid = self.prior.grid
        j = grid.index(s.m[0]) + (1 if rng.random() < 0.5 else -1)
        if not 0 <= j < len(grid):
            return
        t, forward = self._resized(s, grid[j], rng)
        edges = sorted(s.c)
        if edges:
            back_mean, back_chol = self._newton_proposal(self._project(t, s.m[0]), edges)
            old = np.concatenate([s.c[e] for e in edges])
            new = np.concatenate([t.c[e] for e in edges])
            correction = self.log_density(old, back_mean, back_chol) - self.log_density(new, *forward)
        else:
            correction = 0.0
        self._accept(s, t, self.log_target(t) - self.log_target(s) + correction, rng, "size")

    def sweep(self, s: State, rng: np.random.Generator) -> None:
        self.update_outer(s, rng)
        self.update_inner(s, rng)
        self.update_edges(s, rng)
        if self.prior.fixed_m is None:
            self.update_size(s, rng)

    # -- helpers --------------------------------------------------------------------------------
    def _resized(self, s: State, m: int, rng: np.random.Generator) -> tuple[State, tuple[np.ndarray, np.ndarray]]:
        start = self._project(s, m)
        edges = sorted(start.c)
        if not edges:
            return start, (np.zeros(0), np.zeros((0, 0)))
        mean, chol = self._newton_proposal(start, edges)
        return self._with_coefs(start, edges, self.draw(mean, chol, rng)), (mean, chol)

    def _newton_proposal(self, start: State, edges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """The Gauss-Newton Gaussian after `size_newton` deterministic Gauss-Newton steps from
        start (a deterministic function of start, so the reverse move's density is computable)."""
        for _ in range(self.prior.size_newton):
            mean, _ = self.gauss_newton(start, edges)
            start = self._with_coefs(start, edges, mean)
        return self.gauss_newton(start, edges)

    def _project(self, s: State, m: int) -> State:
        """s with every inner edge's function least-squares projected onto m intervals."""
        t = self._copy(s)
        t.m = [m] * self.prior.d
        for (q, p), coef in s.c.items():
            t.c[(q, p)] = projection(s.m[p], m) @ coef
        return t

    def _with_coefs(self, s: State, edges: list[tuple[int, int]], flat: np.ndarray) -> State:
        t = self._copy(s)
        at = 0
        for e in edges:
            size = len(s.c[e])
            t.c[e] = flat[at : at + size]
            at += size
        return t

    @staticmethod
    def _copy(s: State) -> State:
        return State(m=list(s.m), z=s.z.copy(), c=dict(s.c), w=s.w.copy(), a=s.a.copy(), b=s.b, stats=s.stats)

    @staticmethod
    def _accept(s: State, t: State, log_ratio: float, rng: np.random.Generator, move: str) -> None:
        s.stats[move + "_tried"] = s.stats.get(move + "_tried", 0) + 1
        if math.log(rng.random() + 1e-300) < log_ratio:
            s.stats[move + "_accepted"] = s.stats.get(move + "_accepted", 0) + 1
            s.m, s.z, s.c, s.w, s.a, s.b = t.m, t.z, t.c, t.w, t.a, t.b

    # -- start and run --------------------------------------------------------------------------
    def initial_state(self, rng: np.random.Generator, m: int = 8, units: int | None = None) -> State:
        """Random inner coefficients on the first `units` hidden units (default all); the
        others' edges start excluded."""
        pr = self.prior
        ms = list(pr.fixed_m) if pr.fixed_m is not None else [m] * pr.d
        on = pr.units if units is None else units
        c = {(q, p): 0.3 * rng.standard_normal(ms[p] + 3) for q in range(on) for p in range(pr.d)}
        z = np.zeros((pr.units, pr.d), dtype=bool)
        z[:on] = True
        return State(m=ms, z=z, c=c, w=np.arange(pr.units) < on, a=np.zeros((pr.units, pr.m_out + 3)))

    def warm_start(self, s: State, rng: np.random.Generator, steps: int = 25) -> None:
        """Damped Gauss-Newton towards the posterior mode with every edge in (a starting point
        only: the chain's burn-in follows). Outer coefficients at their conditional mean."""
        for _ in range(steps):
            self.update_outer(s, rng)
            if not self.prior.linear:
                s.w = np.array([any(q == e[0] for e in s.c) for q in range(self.prior.units)])
                s.a = self._outer_mean(s) * s.w[:, None]
            edges = sorted(s.c)
            mean, _ = self.gauss_newton(s, edges)
            old = np.concatenate([s.c[e] for e in edges])
            for step in (1.0, 0.5, 0.25, 0.1):
                t = self._with_coefs(s, edges, old + step * (mean - old))
                if self.log_target(t) > self.log_target(s):
                    s.c = t.c
                    break

    def _outer_mean(self, s: State) -> np.ndarray:
        pr, sd2 = self.prior, self.prior.noise**2
        u = 1 / (1 + np.exp(-self.hidden(s)))
        design = np.concatenate([bspline_basis(u[:, q], pr.m_out) for q in range(pr.units)], 1)
        resid = self.y - s.b
        precision = design.T @ design / sd2 + np.eye(design.shape[1]) / pr.tau_out**2
        return np.linalg.solve(precision, design.T @ resid / sd2).reshape(pr.units, -1)

    def predict_at(self, s: State, x: np.ndarray) -> np.ndarray:
        h = np.zeros((len(x), self.prior.units))
        for (q, p), coef in s.c.items():
            h[:, q] += bspline_basis(x[:, p], s.m[p]) @ coef
        return self.predict(s, h)


@lru_cache(maxsize=256)
def projection(m_from: int, m_to: int) -> np.ndarray:
    """The matrix taking a spline's coefficients on m_from intervals to the least-squares fit of
    its values (257 points of [0, 1]) on m_to intervals."""
    grid = np.linspace(0, 1, 257)
    return np.asarray(np.linalg.pinv(bspline_basis(grid, m_to)) @ bspline_basis(grid, m_from))


def active_edges(s: State) -> int:
    """Inner edges that reach the output (the edge is in and so is its hidden unit's outer edge)."""
    return int(sum(1 for q, _ in s.c if s.w[q]))


def _chol_solve(chol: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.asarray(
        solve_triangular(
            chol.T, solve_triangular(chol, v, lower=True, check_finite=False), lower=False, check_finite=False
        )
    )


def exact_linear_posterior(prior: Prior, x: np.ndarray, y: np.ndarray, x_eval: np.ndarray) -> dict[str, np.ndarray]:
    """The linear model's posterior by enumeration over (m, z): P(m), P(z_p = 1) and the posterior
    mean of f at x_eval. Everything is Gaussian given (m, z): closed-form marginal likelihoods."""
    if not prior.linear or prior.fixed_m is not None:
        raise ValueError(
            "exact_linear_posterior: the prior must be the adaptive linear model (linear=True, no fixed_m)"
        )
    sd2 = prior.noise**2
    sizes = list(prior.grid)
    logs, means, m_of, z_of = [], [], [], []
    for m in sizes:
        for z in itertools.product((0, 1), repeat=prior.d):
            blocks = [np.ones((len(y), 1))] + [bspline_basis(x[:, p], m) for p in range(prior.d) if z[p]]
            evals = [np.ones((len(x_eval), 1))] + [bspline_basis(x_eval[:, p], m) for p in range(prior.d) if z[p]]
            design, design_eval = np.concatenate(blocks, 1), np.concatenate(evals, 1)
            var = np.array([prior.tau_bias**2] + [prior.tau_in**2] * (design.shape[1] - 1))
            precision = design.T @ design / sd2 + np.diag(1 / var)
            chol = np.linalg.cholesky(precision)
            proj = design.T @ y / sd2
            mean = _chol_solve(chol, proj)
            k = sum(z)
            log_ml = (
                -0.5 * (y @ y / sd2 - proj @ mean)
                - 0.5 * np.log(var).sum()
                - np.log(np.diag(chol)).sum()
                + k * math.log(prior.inclusion)
                + (prior.d - k) * math.log(1 - prior.inclusion)
                + prior.log_size_prior(m)
            )
            logs.append(log_ml)
            means.append(design_eval @ mean)
            m_of.append(m)
            z_of.append(z)
    weights = np.exp(np.array(logs) - np.logaddexp.reduce(logs))
    return {
        "p_m": np.array([weights[np.array(m_of) == m].sum() for m in sizes]),
        "p_z": (weights[:, None] * np.array(z_of)).sum(0),
        "mean_f": weights @ np.array(means),
    }
