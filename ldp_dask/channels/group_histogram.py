"""Shares per private group: a Laplace histogram over the grid of groups × cells (docs/channels.md, "Groups").

A row holds a group index g ∈ {0, …, G−1} (its label among the declared keys, or "other") and a cell index
k ∈ {0, …, K−1} (its value's bin, or its category), and releases the one-hot vector of cell (g, k) among the G·K
cells plus noise on every cell:

    Z = e_(g,k) + b·W,   W iid Lap(1) (discrete Laplace on the lattice, the default),   b = 2/α,

the Laplace histogram (Duchi, Jordan and Wainwright 2018) over the product grid: two rows' vectors differ in at
most two cells by one each, Δ = 2, α-LDP; ``epsilon_spent()`` = Δ/b. Neither a row's group nor any group's size is
released: a group's rows C_g = Σ_k N_gk are a sum of noisy cells like any other. The estimator
(:func:`ldp_dask.estimators.group_shares`) gives each group's share of each cell, N_gk / C_g, with Fieller's
interval.

Summary mode draws each cell's noise as the sum of m rows' (docs/privacy.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import InputDataError, check_epsilon, check_int
from ..noise import discrete_laplace, discrete_laplace_sum, discrete_laplace_variance, laplace_sum
from .base import NOISE_OPTION, Channel, Option, check_noise, noise_scale_for

__all__ = ["GroupHistogram", "MAX_GRID"]

#: The most cells (groups × cells per group) a grid may have: each is a noisy coordinate of every row.
MAX_GRID = 1 << 20


class GroupHistogram(Channel):
    """A one-hot vector over groups × cells with Laplace noise on every cell.

    Parameters
    ----------
    epsilon : float
        α > 0 per row.
    groups : int
        G: the declared keys and "other".
    cells : int
        K: a value's bins, or its categories (and "other").
    noise : {"lattice", "continuous"}
        Discrete Laplace on integers (default), or Laplace on doubles.

    Notes
    -----
    Variance: with p_g the group's share of the rows and θ a cell's share within it, the ratio N_gk / C_g has
    approximate variance (n p_g θ(1 − θ) + n v((1 − θ)² + (K − 1)θ²)) / (n p_g)², v the noise variance of one
    row's cell (2b², slightly less on the lattice).
    """

    name = "group-histogram"
    options = (Option("groups", "the number of groups: the declared keys and 'other'", type=int),
               Option("cells", "the cells of a group: a value's bins or categories", type=int), NOISE_OPTION)

    @classmethod
    def build(cls, epsilon: float, domain: Any = None, n: int | None = None, **options: Any) -> Channel:
        return cls(epsilon=epsilon, **options)

    def __init__(self, epsilon: float, groups: int, cells: int, noise: str = "lattice") -> None:
        self.epsilon = check_epsilon(epsilon)
        self.noise = check_noise(noise)
        self.groups = check_int(groups, "groups", 2, MAX_GRID)
        self.cells = check_int(cells, "cells", 1, MAX_GRID)
        if self.groups * self.cells > MAX_GRID:
            raise InputDataError(f"{self.groups} groups × {self.cells} cells is more than {MAX_GRID:,} noisy cells")
        self.dim = self.groups * self.cells
        self.sensitivity = 2.0
        self.noise_scale = noise_scale_for(self.sensitivity, self.epsilon)

    def epsilon_spent(self) -> float:
        return self.sensitivity / self.noise_scale

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "groups": self.groups, "cells": self.cells, "noise": self.noise}

    @property
    def noise_variance(self) -> float:
        """Variance of one row's noise in one cell."""
        if self.noise == "lattice":
            return discrete_laplace_variance(self.noise_scale)
        return 2.0 * self.noise_scale**2

    def prepare(self, x: np.ndarray, clip: bool = False) -> tuple[np.ndarray, int]:
        """``x``: rows of (group index, cell index), as a plan maps them."""
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != 2:
            raise InputDataError("the 'group-histogram' channel releases (group, cell) pairs: it runs in a plan, as a "
                                 "distribution or frequencies with a private group_by")
        return x.astype(np.intp, copy=False), 0

    def _cell(self, x: np.ndarray) -> np.ndarray:
        return x[:, 0] * self.cells + x[:, 1]

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return {"sum": np.bincount(self._cell(x), minlength=self.dim).astype(np.float64)}

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        if self.noise == "lattice":
            return {"sum": exact["sum"] + discrete_laplace_sum(rng, m, self.noise_scale, self.dim)}
        return {"sum": exact["sum"] + laplace_sum(rng, m, self.noise_scale, self.dim)}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        z = np.zeros((len(x), self.dim))
        z[np.arange(len(x)), self._cell(x)] = 1.0
        if self.noise == "lattice":
            return z + discrete_laplace(rng, self.noise_scale, z.shape)
        return z + rng.laplace(0.0, self.noise_scale, size=z.shape)

    # --- the audit's statistic ------------------------------------------------------------------------------
    def log_likelihood(self, z: np.ndarray, x: Any) -> np.ndarray:
        """log of each view's density (Laplace) or mass (discrete Laplace) given the row ``x`` = (group, cell), up
        to a constant that does not depend on ``x`` (the privacy audit's statistic is a difference of two)."""
        mean = np.zeros(self.dim)
        mean[self._cell(np.array([x], dtype=np.intp))[0]] = 1.0
        return -np.abs(np.asarray(z, dtype=np.float64) - mean).sum(axis=1) / self.noise_scale

    def worst_pair(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """Two rows in different groups: their one-hot views are 2 apart in L1 (the sensitivity)."""
        return (0, 0), (1, 0)
