"""The Mueller-Brown surface with random Gaussian bumps, its stationary points, steepest-descent
(IRC) paths, the faithful transition-state checker and climbing-image NEB -- the numerics of task
`ts_faithful_eval_mb` (ts_faithful.py).

Mueller-Brown (Mueller & Brown 1979): V = sum_k A_k exp(a_k dx^2 + b_k dx dy + c_k dy^2), three
minima and two first-order saddles; a bump adds h exp(-|p - c|^2 / 2 w^2). Energies, gradients and
Hessians are analytic and vectorised over points.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias

import numpy as np
from pydantic import BaseModel

A = np.array([-200.0, -100.0, -170.0, 15.0])
AA = np.array([-1.0, -1.0, -6.5, 0.7])
BB = np.array([0.0, 0.0, 11.0, 0.6])
CC = np.array([-10.0, -10.0, -6.5, 0.7])
X0 = np.array([1.0, 0.0, -0.5, -1.0])
Y0 = np.array([0.0, 0.5, 1.5, 1.0])
# The published stationary points (Mueller & Brown 1979): minima A, B, C and the saddles between them.
MINIMA = {"A": (-0.558, 1.442), "B": (0.623, 0.028), "C": (-0.050, 0.467)}
SADDLES = {"AC": (-0.822, 0.624), "CB": (0.212, 0.293)}
GRAD_TOL = 1e-4
REFINE_TOL = 0.02  # a prediction is a TS only if the saddle it refines to lies this close to it
SAME_POINT = 0.02  # two minima closer than this are the same minimum


class Surface(BaseModel):
    """Mueller-Brown plus bumps: heights, centres (x, y) and widths."""

    heights: list[float] = []
    centres: list[tuple[float, float]] = []
    widths: list[float] = []


class Landscape(Protocol):
    """A surface of another dimension (ts_coupled.py) that brings its own analytic `egh`."""

    @property
    def dim(self) -> int: ...

    def egh(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


AnySurface: TypeAlias = Surface | Landscape


def egh(surface: AnySurface, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Energy (n,), gradient (n, d) and Hessian (n, d, d) at points (n, d): d = 2 for Mueller-Brown
    with bumps; a surface of another dimension (ts_coupled.py) brings its own `egh`."""
    if not isinstance(surface, Surface):
        return surface.egh(points)
    p = np.atleast_2d(points).astype(float)
    dx, dy = p[:, :1] - X0, p[:, 1:] - Y0
    e = A * np.exp(AA * dx * dx + BB * dx * dy + CC * dy * dy)
    fx, fy = 2 * AA * dx + BB * dy, BB * dx + 2 * CC * dy
    energy = e.sum(axis=1)
    grad = np.stack([(e * fx).sum(axis=1), (e * fy).sum(axis=1)], axis=1)
    hxx, hxy, hyy = (e * (fx * fx + 2 * AA)).sum(1), (e * (fx * fy + BB)).sum(1), (e * (fy * fy + 2 * CC)).sum(1)
    hess = np.stack([np.stack([hxx, hxy], 1), np.stack([hxy, hyy], 1)], 1)
    for h, c, w in zip(surface.heights, surface.centres, surface.widths):
        d = p - np.asarray(c)
        b = h * np.exp(-(d * d).sum(axis=1) / (2 * w * w))
        energy = energy + b
        grad = grad - b[:, None] * d / w**2
        hess = hess + b[:, None, None] * (np.einsum("ni,nj->nij", d, d) / w**4 - np.eye(2) / w**2)
    return energy, grad, hess


def negative_modes(surface: AnySurface, point: np.ndarray) -> int:
    return int((np.linalg.eigvalsh(egh(surface, point)[2][0]) < 0).sum())


def newton_stationary(
    surface: AnySurface, start: np.ndarray, trust: float = 0.02, steps: int = 200, max_travel: float = np.inf
) -> tuple[np.ndarray, bool]:
    """The stationary point Newton's method reaches from `start` (any index), steps capped at
    `trust`; not converged if it would travel farther than `max_travel` from the start."""
    start = np.asarray(start, dtype=float)
    p = start.copy()
    for _ in range(steps):
        if np.linalg.norm(p - start) > max_travel:
            return p, False
        _, g, h = egh(surface, p)
        if np.linalg.norm(g[0]) < GRAD_TOL:
            return p, True
        try:
            step = np.linalg.solve(h[0], -g[0])
        except np.linalg.LinAlgError:
            return p, False
        size = np.linalg.norm(step)
        p = p + (step * trust / size if size > trust else step)
    return p, bool(np.linalg.norm(egh(surface, p)[1][0]) < GRAD_TOL)


def descend(surface: AnySurface, start: np.ndarray, step: float = 0.005, steps: int = 1500) -> np.ndarray:
    """Follow the steepest-descent path (arc-length steps from 0.005, grown 1.2x up to 0.03 while
    the energy falls, halved when it rises), then polish the minimum with Newton."""
    p = np.asarray(start, dtype=float).copy()
    e, g, _ = egh(surface, p)
    for _ in range(steps):
        norm = np.linalg.norm(g[0])
        if norm < 1.0:  # near the minimum: Newton finishes it
            break
        trial = p - step * g[0] / norm
        e_new, g_new, _ = egh(surface, trial)
        if e_new[0] > e[0]:
            step /= 2
            if step < 1e-6:
                break
            continue
        p, e, g = trial, e_new, g_new
        step = min(step * 1.2, 0.03)
    polished, ok = newton_stationary(surface, p, trust=0.005)
    return polished if ok and negative_modes(surface, polished) == 0 else p


def irc_ends(surface: AnySurface, saddle: np.ndarray, push: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """The two minima the steepest-descent paths from a first-order saddle reach, pushed off it
    along the negative-curvature eigenvector."""
    vals, vecs = np.linalg.eigh(egh(surface, saddle)[2][0])
    v = vecs[:, 0]
    return descend(surface, saddle + push * v), descend(surface, saddle - push * v)


def connects(ends: tuple[np.ndarray, np.ndarray], reactant: np.ndarray, product: np.ndarray) -> bool:
    a, b = ends

    def close(x: np.ndarray, y: np.ndarray) -> bool:
        return bool(np.linalg.norm(x - y) < SAME_POINT)

    return (close(a, reactant) and close(b, product)) or (close(a, product) and close(b, reactant))


def faithful_check(
    surface: AnySurface, point: np.ndarray, reactant: np.ndarray, product: np.ndarray
) -> tuple[bool, str]:
    """Is `point` a transition state of reactant -> product? It must refine (Newton, within
    REFINE_TOL of itself) to a stationary point with exactly one negative Hessian eigenvalue whose
    steepest-descent paths end at the intended minima. Returns (valid, reason)."""
    point = np.asarray(point, dtype=float)
    dim = 2 if isinstance(surface, Surface) else surface.dim
    if point.shape != (dim,) or not np.all(np.isfinite(point)):
        return False, f"not a finite {dim}-d point"
    refined, ok = newton_stationary(surface, point, max_travel=REFINE_TOL)
    if not ok or np.linalg.norm(refined - point) > REFINE_TOL:
        return False, f"no stationary point within {REFINE_TOL} of it"
    modes = negative_modes(surface, refined)
    if modes != 1:
        return False, f"{modes} negative Hessian eigenvalues"
    if not connects(irc_ends(surface, refined), reactant, product):
        return False, "steepest-descent paths reach other minima"
    return True, "first-order saddle connecting the intended minima"


def upwind_tangents(path: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Unit tangents of the inner images, towards the higher neighbour (energy-weighted mix at
    extrema), which keeps kinks out of the band."""
    fwd, back = path[2:] - path[1:-1], path[1:-1] - path[:-2]
    up, mid, down = e[2:], e[1:-1], e[:-2]
    dmax = np.maximum(np.abs(up - mid), np.abs(down - mid))[:, None]
    dmin = np.minimum(np.abs(up - mid), np.abs(down - mid))[:, None]
    mixed = np.where((up > down)[:, None], fwd * dmax + back * dmin, fwd * dmin + back * dmax)
    t = np.where(((up > mid) & (mid > down))[:, None], fwd, np.where(((up < mid) & (mid < down))[:, None], back, mixed))
    return np.asarray(t / np.linalg.norm(t, axis=1, keepdims=True))


def climbing_image_neb(
    surface: AnySurface,
    reactant: np.ndarray,
    product: np.ndarray,
    images: int = 11,
    spring: float = 100.0,
    rate: float = 4e-4,
    max_step: float = 0.01,
    climb_after: int = 100,
    iterations: int = 4000,
    force_tol: float = 0.05,
) -> tuple[np.ndarray, int]:
    """CI-NEB (Henkelman, Uberuaga & Jonsson 2000): images on the straight line, upwinded tangents,
    spring forces along the tangent, true force perpendicular; after `climb_after` steps the
    highest image climbs (inverted force along the tangent, no spring). Steepest-descent moves,
    capped per image. Returns the climbing image and the iterations used."""
    path = np.linspace(reactant, product, images)
    climber = None
    for it in range(iterations):
        e, g, _ = egh(surface, path)
        inner = np.arange(1, images - 1)
        tangents = upwind_tangents(path, e)
        gi = g[inner]
        along = (gi * tangents).sum(axis=1, keepdims=True)
        force = -(gi - along * tangents)
        gaps = np.linalg.norm(np.diff(path, axis=0), axis=1)
        force += spring * (gaps[1:] - gaps[:-1])[:, None] * tangents
        if it >= climb_after:
            climber = int(np.argmax(e[inner]))
            force[climber] = -gi[climber] + 2 * along[climber] * tangents[climber]
            if np.abs(force).max() < force_tol:
                return path[inner][climber], it
        move = rate * force
        size = np.linalg.norm(move, axis=1, keepdims=True)
        path[inner] += np.where(size > max_step, move * max_step / np.maximum(size, 1e-300), move)
    e = egh(surface, path)[0]
    return path[1 + int(np.argmax(e[1:-1]))], iterations
