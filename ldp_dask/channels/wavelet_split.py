"""Wavelet father levels with the rows split among them (docs/channels.md, "Wavelet channel with split rows").

Each row draws one level ``g`` from a small set of father levels L_1 < … < L_k with public probabilities
w_1, …, w_k, independently of its value, and releases ``(g, its level-L_g father vector + noise)``: the view of a
:class:`~ldp_dask.channels.wavelet.WaveletLaplace` release of the father level L_g alone, with the whole ε on it
(σ_g = Δ_g/ε, Δ_g = 2 · 2^{L_g/2} · sup_u Σ_k |φ̃(u − k)|).

Privacy. The level is drawn independently of the data, so the row's channel is a mixture, with data-independent
weights, of ε-LDP channels whose outputs also reveal which one ran: for two values x, x′ and any output (g, z),
P(g, z | x) / P(g, z | x′) = w_g p_g(z | x) / (w_g p_g(z | x′)) ≤ e^ε. ``epsilon_spent()`` = max_g of the
levels' own spend, each computed from its own sensitivity.

Why. One father level J fixes the resolution before the data are seen: too coarse for a spike, too fine for a
very smooth density. Every level of the split release also informs the coarser ones (the father coefficients at
L contain those at every j < L, :meth:`~ldp_dask.bases.WaveletBasis.analysis`), so the estimator
(:func:`ldp_dask.estimators.wavelet_density`) pools the levels, coefficient block by coefficient block, and
chooses the resolution from the data. With levels J − 1, J, J + 1 around :func:`linear_level` and shares
1 : 2 : 3, no level's estimate carries more than about twice the noise variance of a release at that level alone
(docs/channels.md gives the arithmetic).

Noise is the lattice one only (docs/privacy.md): a lattice coordinate is constant on each table cell of its
level, so the rows per cell at the finest level (2^{L_k + T} cells, T the table level) are exact sufficient
statistics from which summary mode draws the random split of each occupied cell's rows (one multinomial each) and
every level's sums, exactly in law. Interpolated values (``noise="continuous"``) would need each row's position
in its cell after the split, which a sum cannot carry, so they are refused.

Released statistics: ``sum`` (the levels' blocks of coefficient sums, concatenated, coarsest first) and
``group_n`` (rows per level: Multinomial(n, w), a function of the public randomness only).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import LdpDaskError, check_epsilon, check_int
from ..bases import DEFAULT_TABLE_LEVEL
from ..noise import discrete_laplace_sum
from .base import NOISE_OPTION, NumericChannel, Option, require_n
from .wavelet import CALIBRATIONS, LATTICE_QUANTUM, MAX_DIM, WaveletLaplace, _check_nu, linear_level

__all__ = ["WaveletSplit", "split_levels", "default_release", "DEFAULT_SHARES", "MAX_SPLIT_CELLS"]

#: Shares of the default levels J − 1, J, J + 1: the finest level needs the most rows (docs/channels.md).
DEFAULT_SHARES = (1.0, 2.0, 3.0)
#: Summary mode keeps the rows per table cell of the finest level: at most 2^24 cells (128 MiB per block).
MAX_SPLIT_CELLS = 1 << 24


def split_levels(n: int, epsilon: float, wavelet: str = "db4") -> list[int]:
    """The default levels: J − 1, J, J + 1 around J = :func:`linear_level` (distinct, ≥ 0).

    ``n`` is public and ε fixed before privatizing, so the choice costs no privacy.
    """
    J = linear_level(n, epsilon, wavelet)
    return sorted({max(0, J - 1), J, J + 1})


def default_release(epsilon: float, domain: Any, n: int | None, options: dict[str, Any]) -> WaveletSplit | None:
    """The ``wavelet`` channel's default release, built by name with ``options`` (its declared options): the split
    release when neither j0, j1, the paper's calibration nor continuous noise is asked for, else None (the one-level
    or multilevel :class:`WaveletLaplace`). Options the split has no use for are still validated."""
    if any(options.get(k) is not None for k in ("j0", "j1")) or options.get("noise", "lattice") != "lattice":
        return None
    calibration = options.get("calibration", "tight")
    if calibration not in CALIBRATIONS:
        raise LdpDaskError(f"The 'calibration' parameter must be one of {', '.join(CALIBRATIONS)}. "
                           f"Got {calibration!r} instead.")
    if calibration != "tight":
        return None
    if options.get("nu") is not None:
        _check_nu(options["nu"])  # refused if invalid, although the split has no detail level to weigh
    kw = {k: options[k] for k in ("wavelet", "table_level") if options.get(k) is not None}
    if domain is None:
        raise LdpDaskError("The 'wavelet' channel needs a public 'domain' (lo, hi).")
    return WaveletSplit._build(epsilon, tuple(domain), n, **kw)


class WaveletSplit(NumericChannel):
    """Father levels L_1 < … < L_k, one per row drawn with public probabilities (module docstring).

    Parameters
    ----------
    epsilon : float
        ε > 0 per row; every level spends all of it on the rows it gets.
    domain : (float, float)
        Public domain ``(lo, hi)``.
    levels : list of int
        The father levels (distinct); default :func:`split_levels`.
    shares : list of float, optional
        Positive weights of the levels, normalised to probabilities (default 1 : 2 : 3 for three levels,
        equal otherwise).
    wavelet : str
        ``haar``, ``dbN``, ``symN`` or ``coifN`` (default ``db4``).
    table_level : int
        Resolution 2^−T of the tabulated φ.
    noise : {"lattice"}
        Lattice outputs with discrete Laplace noise (the only kind summary mode can split exactly).
    """

    name = "wavelet-split"
    options = (
        Option("wavelet", "haar, dbN, symN or coifN", default="db4"),
        Option("levels", "the father levels, one drawn per row (default: J-1, J, J+1 around the histogram's "
                         "resolution)", type=int, many=True),
        Option("shares", "relative share of rows per level (default 1 2 3 for three levels)", type=float,
               many=True),
        Option("table_level", "resolution 2^-L of the tabulated basis", type=int, default=DEFAULT_TABLE_LEVEL,
               cli=False),
        NOISE_OPTION,
    )

    @classmethod
    def _build(cls, epsilon: float, domain: tuple[float, float], n: int | None, levels: list[int] | None = None,
               wavelet: str = "db4", **options: Any) -> WaveletSplit:
        if levels is None:
            levels = split_levels(require_n(n, f"the automatic levels of the {cls.name!r} channel"), epsilon,
                                  wavelet)
        return cls(epsilon, domain, levels, wavelet=wavelet, **options)

    def __init__(self, epsilon: float, domain: tuple[float, float], levels: list[int], shares: list[float] | None = None,
                 wavelet: str = "db4", table_level: int = DEFAULT_TABLE_LEVEL, noise: str = "lattice") -> None:
        self.epsilon = check_epsilon(epsilon)
        if noise != "lattice":
            raise LdpDaskError(f"The 'noise' parameter of the {self.name!r} channel must be 'lattice': summary mode "
                               f"splits each table cell's rows among the levels, which needs values constant on the "
                               f"cell. Got {noise!r} instead.")
        self.noise = noise
        self._set_domain(domain)
        if isinstance(levels, (str, bytes)) or not hasattr(levels, "__iter__"):
            raise LdpDaskError(f"The 'levels' parameter must be a list of integers. Got {levels!r} instead.")
        lv = [check_int(j, "levels", 0, 24) for j in levels]
        if not lv or len(set(lv)) != len(lv):
            raise LdpDaskError(f"The 'levels' parameter must be a non-empty list of distinct levels. Got {levels!r} "
                               f"instead.")
        self.levels = sorted(lv)
        k = len(self.levels)
        if shares is None:
            shares = list(DEFAULT_SHARES) if k == len(DEFAULT_SHARES) else [1.0] * k
        if isinstance(shares, (str, bytes)) or not hasattr(shares, "__iter__"):
            raise LdpDaskError(f"The 'shares' parameter must be a list of positive numbers. Got {shares!r} instead.")
        sh = [float(s) if isinstance(s, (int, float)) and not isinstance(s, bool) else math.nan for s in shares]
        if len(sh) != k or not all(math.isfinite(s) and s > 0 for s in sh):
            raise LdpDaskError(f"The 'shares' parameter must be {k} positive finite numbers, one per level. "
                               f"Got {shares!r} instead.")
        self.shares = sh
        self.probabilities = np.array(sh) / math.fsum(sh)
        #: one father-level release per level, with the whole ε (noise, sensitivity and lattice from it)
        self.parts = [WaveletLaplace(self.epsilon, self.domain, j, j - 1, wavelet=wavelet, table_level=table_level,
                                     noise="lattice") for j in self.levels]
        self.basis = self.parts[0].basis
        self.wavelet, self.table_level = wavelet, self.basis.table_level
        self.bits = self.levels[-1] + self.table_level
        if (1 << self.bits) > MAX_SPLIT_CELLS:
            raise LdpDaskError(f"The 'levels' parameter must keep the finest level + table level <= "
                               f"{MAX_SPLIT_CELLS.bit_length() - 1} (summary mode counts rows per table cell); got "
                               f"finest level {self.levels[-1]} with table level {self.table_level}.")
        self.sizes = [p.dim for p in self.parts]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(int)
        self.dim = k + int(self.offsets[-1])  # rows mode: level one-hot, then the blocks
        if self.dim > MAX_DIM:
            raise LdpDaskError(f"levels {self.levels} give {self.dim:,} coefficients; the limit is {MAX_DIM:,}.")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (_from_params, (self.params(),))

    def epsilon_spent(self) -> float:
        """max over the levels of each level's own spend (a mixture with data-independent weights)."""
        per_level = np.array([p.epsilon_spent() for p in self.parts])
        return float(per_level.max())

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "domain": list(self.domain), "levels": list(self.levels),
                "shares": list(self.shares), "wavelet": self.wavelet, "table_level": self.table_level,
                "noise": self.noise}

    def block(self, g: int) -> slice:
        """Slice of level ``levels[g]``'s block in the ``sum`` statistic."""
        return slice(int(self.offsets[g]), int(self.offsets[g + 1]))

    @property
    def noise_variances(self) -> np.ndarray:
        """Variance of one row's noise on one coefficient, per level (value units)."""
        return np.array([float(p.noise_variances[0]) for p in self.parts])

    def to_unit(self, x: np.ndarray) -> np.ndarray:
        return self.parts[0].to_unit(x)

    @property
    def integer_sums(self) -> bool:
        return True  # rows per table cell

    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        from .._kernels import fine_histogram

        lo, hi = self.domain
        counts = np.zeros(1 << self.bits)
        fine_histogram(np.ascontiguousarray(x, dtype=np.float64), lo, hi - lo, self.bits, counts, np.zeros(0))
        return {"cells": counts.astype(np.int64)}

    def add_noise(self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        cells = np.asarray(exact["cells"], dtype=np.int64)
        occupied = np.flatnonzero(cells)  # an empty cell splits nothing (and draws nothing: the same stream)
        alloc = rng.multinomial(cells[occupied], self.probabilities)  # each cell's rows split among the levels
        group_n = alloc.sum(axis=0)
        sums = []
        for g, part in enumerate(self.parts):
            j = self.levels[g]
            per_cell = np.bincount(occupied >> (self.levels[-1] - j), weights=alloc[:, g],
                                   minlength=1 << (j + self.table_level))  # counts < 2^53: exact
            coords = self.basis.cell_sums(per_cell, j, "phi", LATTICE_QUANTUM)
            t, gran = float(part.lattice_scales[0]), float(part.granularities[0])
            sums.append(gran * (coords + discrete_laplace_sum(rng, int(group_n[g]), t, len(coords))))
        return {"sum": np.concatenate(sums), "group_n": group_n.astype(np.float64)}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        k, n = len(self.levels), len(x)
        z = np.zeros((n, self.dim))
        g = rng.choice(k, size=n, p=self.probabilities)
        rows = np.arange(n)
        z[rows, g] = 1.0
        for gi, part in enumerate(self.parts):
            sel = rows[g == gi]
            if len(sel):
                b = self.block(gi)
                z[sel, k + b.start: k + b.stop] = part.privatize(np.asarray(x)[sel], rng)
        return z

    def row_sums(self, z: np.ndarray) -> dict[str, np.ndarray]:
        k = len(self.levels)
        z = np.asarray(z, dtype=np.float64)
        return {"sum": z[:, k:].sum(axis=0), "group_n": z[:, :k].sum(axis=0)}


def _from_params(params: dict[str, Any]) -> WaveletSplit:
    return WaveletSplit(**params)
