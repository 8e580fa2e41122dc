"""A 3-D surface for task `ts_faithful_eval_mb`: the bumped Mueller-Brown surface (ts_surface.py)
plus a third coordinate z held by a stiff harmonic spring to a curved sheet z = f(x, y):

    V(x, y, z) = V_MB+bumps(x, y) + k/2 (z - f(x, y))^2,   f(x, y) = a sin(w x) + b y.

Why this surface: its stationary points are known exactly -- dV/dz = 0 puts them on the sheet,
and there the spring's gradient vanishes, so they are the 2-D surface's stationary points lifted to
z = f(x, y) -- and the Schur complement of the Hessian on z is the 2-D Hessian, so each keeps its
number of negative eigenvalues. A predictor must still get the coupled coordinate right: a
straight-line guess between two lifted minima leaves the curved sheet.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from environments.papers.ts_surface import Surface, egh

SPRING, SHEET_A, SHEET_W, SHEET_B = 300.0, 0.3, 3.0, 0.2


class CoupledSurface(BaseModel):
    """A 2-D bumped Mueller-Brown surface with the coupled harmonic coordinate z."""

    base: Surface = Surface()
    spring: float = SPRING
    sheet: tuple[float, float, float] = (SHEET_A, SHEET_W, SHEET_B)  # a, w, b of f = a sin(w x) + b y

    @property
    def dim(self) -> int:
        return 3

    def height(self, xy: np.ndarray) -> np.ndarray:
        a, w, b = self.sheet
        xy = np.atleast_2d(xy)
        return np.asarray(a * np.sin(w * xy[:, 0]) + b * xy[:, 1])

    def lift(self, xy: np.ndarray | tuple[float, ...]) -> np.ndarray:
        """A 2-D point put on the sheet: a stationary point of the base surface becomes one here."""
        xy = np.asarray(xy, dtype=float)
        return np.array([xy[0], xy[1], float(self.height(xy)[0])])

    def egh(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Energy (n,), gradient (n, 3) and Hessian (n, 3, 3) at points (n, 3), analytic."""
        p = np.atleast_2d(points).astype(float)
        a, w, b = self.sheet
        k = self.spring
        e2, g2, h2 = egh(self.base, p[:, :2])
        stretch = p[:, 2] - self.height(p[:, :2])  # z - f
        fx, fy, fxx = a * w * np.cos(w * p[:, 0]), np.full(len(p), b), -a * w * w * np.sin(w * p[:, 0])
        energy = e2 + 0.5 * k * stretch**2
        grad = np.stack([g2[:, 0] - k * stretch * fx, g2[:, 1] - k * stretch * fy, k * stretch], axis=1)
        hess = np.zeros((len(p), 3, 3))
        hess[:, :2, :2] = h2 + k * np.einsum("ni,nj->nij", np.stack([fx, fy], 1), np.stack([fx, fy], 1))
        hess[:, 0, 0] -= k * stretch * fxx
        hess[:, 0, 2] = hess[:, 2, 0] = -k * fx
        hess[:, 1, 2] = hess[:, 2, 1] = -k * fy
        hess[:, 2, 2] = k
        return energy, grad, hess
