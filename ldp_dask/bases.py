"""Orthonormal compactly supported wavelet bases, tabulated once (docs/channels.md).

A :class:`WaveletBasis` holds φ and ψ of a PyWavelets orthogonal wavelet
(``haar``, ``dbN``, ``symN``, ``coifN``) on a dyadic table of resolution
2^−L and evaluates them by linear interpolation. The table values come from
``pywt.Wavelet(name).wavefun(level=L + 8)`` (the cascade algorithm, whose
error at the grid points halves with each level) sampled every 2^8 points. Haar is tabulated exactly and
evaluated as a step function (linear interpolation would smear its jumps).

Both privatization and the sensitivity computation use *this* tabulated
function, so the privacy proof concerns exactly the function that is released:
for a piecewise-linear table, ``u ↦ Σ_k |ψ̃(u − k)|`` is convex on each grid
cell, hence its maximum over the grid points is its exact supremum (docs/channels.md).

Coordinates. A public domain ``[lo, hi]`` is mapped to ``t = (x − lo)/(hi − lo)``
in [0, 1] and the basis lives on t: φ_{jk}(t) = 2^{j/2} φ(2^j t − k) (Butucea et al.
2020, eq. (1)). With supp φ = supp ψ = [0, S] (S = filter length − 1), the functions
at level j whose support meets [0, 1] are k ∈ N_j = {−S+1, …, 2^j − 1}, so
|N_j| = 2^j + S − 1. ``t = 1`` is evaluated as the largest double below 1, so
every value has exactly S (possibly zero) nonzero terms per level, all in N_j.

For a block of values, :meth:`WaveletBasis.accumulate_levels` adds Σ_i f_{jk}(t_i)
for every k and level, from the rows per table cell (O(rows + 2^{j+L}·S)) or by
S scatter-adds per row and level (O(rows × S × levels)), never O(rows × dim);
:meth:`WaveletBasis.accumulate` is the per-level numpy reference, and
:meth:`WaveletBasis.design` materialises the dense (rows, |N_j|) matrix for
rows mode and tests. In lattice mode the values are the table at the midpoint
of each row's cell, rounded (:meth:`WaveletBasis.lattice_values`).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from ._validation import LdpDaskError, check_int

__all__ = ["WaveletBasis", "get_basis", "ORTHOGONAL_FAMILIES", "DEFAULT_TABLE_LEVEL", "MAX_LEVEL"]

#: PyWavelets families with orthonormal, compactly supported wavelets.
ORTHOGONAL_FAMILIES = ("haar", "db", "sym", "coif")
#: Table resolution 2^−L per unit of the wavelet's own argument.
DEFAULT_TABLE_LEVEL = 10
#: The tables are sampled from PyWavelets' cascade run this many levels deeper than L.
CASCADE_EXTRA = 8
#: Finest level j accepted: u = 2^j t must keep L + 12 bits of fraction in a
#: double (j + L ≤ 40), and 2^j coefficients per level must stay tractable.
MAX_LEVEL = 24
_PRECISION_BITS = 40
#: :meth:`WaveletBasis.accumulate_levels` counts rows per table cell of the finest level when that level has
#: at most 2^HISTOGRAM_MAX_BITS cells (8 · 2^22 bytes per array) and no more cells than HISTOGRAM_CELLS_PER_LOOKUP
#: times the table lookups of the row-by-row path (rows × S × levels); otherwise it evaluates the table row by
#: row. Both cost about 5 ns per cell or lookup (measured: 2^20 cells 5.3 ms, db4 at 6 levels 200 ns per row).
HISTOGRAM_MAX_BITS = 22
HISTOGRAM_CELLS_PER_LOOKUP = 1.0
#: Relative safety margin on sup Σ|ψ̃|: the interpolation a + w(b − a) and the
#: factor 2^{j/2} are each rounded, by a few ulps (~1e−15) at most.
_SUP_MARGIN = 1.0 + 2.0**-40

Kind = Literal["phi", "psi"]


class WaveletBasis:
    """φ and ψ of one orthogonal PyWavelets wavelet, tabulated at resolution 2^−L.

    Parameters
    ----------
    name : str
        PyWavelets name of an orthogonal compactly supported wavelet:
        ``haar``, ``dbN``, ``symN`` or ``coifN``.
    table_level : int
        L, the table has 2^L points per unit (default 10); 4 ≤ L ≤ 14.

    Attributes
    ----------
    support : int
        S: φ and ψ vanish outside [0, S].
    sup_abs : dict
        ‖φ̃‖∞ and ‖ψ̃‖∞ of the tables.
    sup_sum : dict
        sup_u Σ_k |φ̃(u − k)| and sup_u Σ_k |ψ̃(u − k)|, exact for the tables
        (times a 1 + 2^−40 rounding margin).
    """

    def __init__(self, name: str, table_level: int = DEFAULT_TABLE_LEVEL) -> None:
        import pywt

        if not isinstance(name, str):
            raise LdpDaskError(f"The 'wavelet' parameter must be a string. Got {name!r} instead.")
        self.table_level = check_int(table_level, "table_level", 4, 14)
        try:
            w = pywt.Wavelet(name)
        except ValueError:
            kind = "a continuous wavelet" if name in pywt.wavelist(kind="continuous") else "not a PyWavelets wavelet"
            raise LdpDaskError(
                f"The 'wavelet' parameter must name an orthogonal compactly supported wavelet "
                f"(haar, dbN, symN, coifN). Got {name!r} instead, which is {kind}."
            ) from None
        if w.short_family_name not in ORTHOGONAL_FAMILIES or not w.orthogonal:
            raise LdpDaskError(
                f"The 'wavelet' parameter must name an orthogonal compactly supported wavelet "
                f"(haar, dbN, symN, coifN). Got {name!r} instead, which is {w.family_name}"
                f"{' (not orthogonal)' if not w.orthogonal else ''}."
            )
        self.name = name
        self.family = w.short_family_name
        self.support = S = int(w.dec_len) - 1
        L = self.table_level
        self.per_unit = P = 1 << L
        npts = S * P + 1
        if self.family == "haar":
            # exact step functions, constant on each table cell [i/P, (i+1)/P)
            u = np.arange(npts) / P
            phi = np.where(u < 1.0, 1.0, 0.0)
            psi = np.where(u < 0.5, 1.0, np.where(u < 1.0, -1.0, 0.0))
            self.interpolation = "step"
        else:
            # The cascade converges like 2^-level (measured for sym4: max error 6e-3 at level 10,
            # 2e-5 at 18), so run it CASCADE_EXTRA levels deeper and keep every 2^extra-th value.
            extra = min(CASCADE_EXTRA, 20 - L)
            phi, psi, x = w.wavefun(level=L + extra)
            step = 1 << extra
            if len(x) < (npts - 1) * step + 1 or x[(npts - 1) * step] != S or x[step] != 1.0 / P:
                raise AssertionError(f"unexpected PyWavelets table layout for {name}")  # pragma: no cover
            phi = np.asarray(phi[: (npts - 1) * step + 1 : step], dtype=np.float64)
            psi = np.asarray(psi[: (npts - 1) * step + 1 : step], dtype=np.float64)
            # the support is [0, S]: the table must vanish at both ends
            phi[0] = phi[-1] = psi[0] = psi[-1] = 0.0
            self.interpolation = "linear"
        self._tab: dict[str, np.ndarray] = {}
        self._dif: dict[str, np.ndarray] = {}
        self.sup_abs: dict[str, float] = {}
        self.sup_sum: dict[str, float] = {}
        for kind, tab in (("phi", phi), ("psi", psi)):
            tab = np.ascontiguousarray(tab)
            self._tab[kind] = tab
            dif = np.zeros_like(tab) if self.interpolation == "step" else np.append(np.diff(tab), 0.0)
            self._dif[kind] = dif
            self.sup_abs[kind] = float(np.abs(tab).max())
            # Σ_m |tab(u + m)| at the P + 1 grid points of u ∈ [0, 1]: exact sup
            # for linear pieces (convexity) and for steps (constant on cells).
            a = np.abs(tab)
            per_u = a[: S * P].reshape(S, P).sum(axis=0)
            per_u_end = a[P::P].sum()  # u = 1 (the same as u = 0 shifted by one)
            self.sup_sum[kind] = float(max(per_u.max(), per_u_end)) * _SUP_MARGIN
        # phi/psi stacked for the fused kernel; one spare zero so idx + 1 never overflows
        self._stacked_tab = np.stack([np.append(self._tab["phi"], 0.0), np.append(self._tab["psi"], 0.0)])
        self._stacked_dif = np.stack([np.append(self._dif["phi"], 0.0), np.append(self._dif["psi"], 0.0)])
        self._shift_cache: dict[tuple[str, str, float], np.ndarray] = {}
        #: two-scale filters: φ_{j−1,k} = Σ_m h_m φ_{j,2k+m}, ψ_{j−1,k} = Σ_m g_m φ_{j,2k+m} (PyWavelets rec_lo, rec_hi)
        self.h = np.asarray(w.rec_lo, dtype=np.float64)
        self.g = np.asarray(w.rec_hi, dtype=np.float64)

    def __repr__(self) -> str:
        return f"WaveletBasis({self.name!r}, table_level={self.table_level})"

    # --- index sets ---------------------------------------------------------------
    @property
    def c_A(self) -> int:
        """The paper's c_A = 2⌈A⌉ + 1 for supports centred in [−A, A], A = S/2 (Butucea et al. 2020, §3)."""
        return 2 * math.ceil(self.support / 2) + 1

    def n_coefs(self, j: int) -> int:
        """|N_j| = 2^j + S − 1."""
        return (1 << j) + self.support - 1

    def index_set(self, j: int) -> np.ndarray:
        """N_j: the k whose φ_{jk}, ψ_{jk} support meets [0, 1]."""
        return np.arange(-self.support + 1, 1 << j)

    @property
    def max_level(self) -> int:
        """Finest level this table resolves: j + L ≤ 40 bits of a double, and j ≤ 24."""
        return min(MAX_LEVEL, _PRECISION_BITS - self.table_level)

    def check_level(self, j: int, name: str = "level") -> int:
        """Validate a resolution level against the table's precision."""
        if isinstance(j, (int, np.integer)) and not isinstance(j, bool) and j > self.max_level:
            raise LdpDaskError(
                f"The {name!r} parameter must be <= {self.max_level}: finer levels are beyond the resolution "
                f"of the {self.name} table (2^-{self.table_level}) in double precision. Got {j!r} instead."
            )
        return check_int(j, name, 0, self.max_level)

    def analysis(self, coefs: np.ndarray, j: int) -> tuple[np.ndarray, np.ndarray]:
        """One step of the fast wavelet transform: the father coefficients at level j − 1 and the detail
        coefficients at level j − 1 of the function Σ_{k ∈ N_j} coefs[k + S − 1] φ_{jk}.

        Exact on the real line: c_{j−1,k} = Σ_m h_m c_{j,2k+m} and d_{j−1,k} = Σ_m g_m c_{j,2k+m}, and every
        φ_{jm} with m ∉ N_j vanishes on [0, 1], so the coefficients N_j lacks are those of functions that are
        zero there. The map is orthonormal on sequences, so white noise of variance v per coefficient at
        level j is white with variance v at level j − 1 (the rows of the last few boundary coefficients
        have norm ≤ 1: at most v).
        """
        S = self.support
        c = np.asarray(coefs, dtype=np.float64)
        if j < 1 or c.shape != (self.n_coefs(j),):
            raise LdpDaskError(f"analysis needs level j >= 1 and |N_j| = {self.n_coefs(j) if j >= 1 else '?'} "
                               f"coefficients; got j={j!r}, shape {c.shape}")
        # padded[p] = c_{j, p − 2S + 2}: index 2k + m of N_j is position 2k + m + S − 1 of c
        padded = np.zeros(len(c) + 2 * S + 2)
        padded[S - 1: S - 1 + len(c)] = c
        k = self.index_set(j - 1)
        base = 2 * k + S - 1 + (S - 1)  # position in padded of m = 0
        idx = base[:, None] + np.arange(S + 1)[None, :]
        window = padded[idx]
        return window @ self.h, window @ self.g

    # --- evaluation -----------------------------------------------------------------
    def _cells(self, t: np.ndarray, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For t in [0, 1]: the base index ``floor(2^j t)``, table cell and weight."""
        t = np.minimum(t, np.nextafter(1.0, 0.0))
        u = t * float(1 << j)  # exact
        fl = np.floor(u)
        q = (u - fl) * self.per_unit  # exact (power of two)
        i0 = q.astype(np.intp)
        w = q - i0
        return fl.astype(np.intp), i0, w

    def _values(self, kind: Kind, i0: np.ndarray, w: np.ndarray, m: int) -> np.ndarray:
        """Unscaled table value at argument m + fractional part (m = 0..S−1)."""
        i = i0 + m * self.per_unit
        tab, dif = self._tab[kind], self._dif[kind]
        if self.interpolation == "step":
            return tab[i]
        return tab[i] + w * dif[i]

    def accumulate(self, t: np.ndarray, j: int, kind: Kind, out: np.ndarray | None = None) -> np.ndarray:
        """``out[k + S − 1] += Σ_i f_{jk}(t_i)`` for k ∈ N_j, f = φ or ψ.

        O(len(t) × S): S weighted ``bincount`` passes. Returns ``out``.
        """
        S, nk = self.support, self.n_coefs(j)
        if out is None:
            out = np.zeros(nk)
        fl, i0, w = self._cells(np.asarray(t, dtype=np.float64), j)
        base = fl + (S - 1)
        acc = np.zeros(nk)
        for m in range(S):
            acc += np.bincount(base - m, weights=self._values(kind, i0, w, m), minlength=nk)
        out += acc * 2.0 ** (j / 2)
        return out

    def lattice_values(self, kind: Kind, quantum: float) -> np.ndarray:
        """Lattice coordinate of each table cell: ⌊f̃(cell midpoint)·quantum + ½⌋ (step tables: the cell's value)."""
        return np.floor((self._tab[kind] + 0.5 * self._dif[kind]) * quantum + 0.5)

    def accumulate_levels(self, t: np.ndarray, levels: list[tuple[str, int]], out: np.ndarray | None = None,
                          quantum: float = 0.0, lo: float = 0.0, width: float = 1.0) -> np.ndarray:
        """All blocks at once: the concatenation of :meth:`accumulate` over ``levels``.

        ``t`` may be given as raw values with ``lo`` and ``width``: each is then
        mapped to clip((t − lo)/width, 0, 1) first (as a channel's ``to_unit``,
        fused into the pass over the rows).

        With ``quantum`` = 0 the sums of the interpolated values, scaled by 2^{j/2};
        with ``quantum`` > 0 the sums of the lattice coordinates
        (:meth:`lattice_values`, unscaled, exact integers).

        Two paths, with the same values (lattice: the same integers; otherwise
        up to summation order):

        * **histogram**, for the levels with j + L ≤ ``HISTOGRAM_MAX_BITS``
          when their finest level has no more cells than the per-row path would
          make lookups for them: one pass counts the rows per table cell at
          that level, and sums their offsets u − ⌊u⌋ in the cell; coarser cells
          are dyadic sums (a coarse offset is (child index + fine offset)/2). A
          piecewise-linear table then gives every level's sums exactly:
          Σ_rows f̃ = Σ_cells (count·f̃(left end) + offset sum·slope), two small
          matrix products per level. O(rows + 2^{j+L}·S).
        * **per row** (numba kernel, :mod:`ldp_dask._kernels`), for the other
          levels: S table lookups per row and level, O(rows·S·levels).
        """
        sizes = [self.n_coefs(j) for _, j in levels]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        if out is None:
            out = np.zeros(int(offsets[-1]))
        t = np.ascontiguousarray(t, dtype=np.float64)
        acc = np.zeros(int(offsets[-1]))
        L = self.table_level
        near = [i for i, (_, j) in enumerate(levels) if j + L <= HISTOGRAM_MAX_BITS]
        if near:
            bits = max(levels[i][1] for i in near) + L
            if (1 << bits) > HISTOGRAM_CELLS_PER_LOOKUP * len(t) * self.support * len(near):
                near = []
            else:
                self._histogram_sums(t, [levels[i] for i in near], offsets[near], bits, quantum, lo, width, acc)
        far = [i for i in range(len(levels)) if i not in near]
        if far:
            from ._kernels import wavelet_accumulate

            if (lo, width) != (0.0, 1.0):
                t = np.clip((t - lo) / width, 0.0, 1.0)
            wavelet_accumulate(
                t, np.array([levels[i][1] for i in far], dtype=np.int64),
                np.array([0 if levels[i][0] == "phi" else 1 for i in far], dtype=np.int64),
                offsets[far], self._stacked_tab, self._stacked_dif, self.support, self.per_unit, acc, float(quantum),
            )
        for (_, j), a, c in zip(levels, offsets[:-1], offsets[1:]):
            out[a:c] += acc[a:c] if quantum > 0 else acc[a:c] * 2.0 ** (j / 2)
        return out

    def _histogram_sums(self, t: np.ndarray, levels: list[tuple[str, int]], starts: np.ndarray, bits: int,
                        quantum: float, lo: float, width: float, acc: np.ndarray) -> None:
        """Add to ``acc`` (at ``starts``) the unscaled sums of ``levels`` from the rows' table cells at 2^bits
        resolution (see :meth:`accumulate_levels`).

        Counts are below 2^53 and, in lattice mode, so is every partial sum of
        count × coordinate (|coordinate| < 2^14, rows < 2^39), so the float
        products and sums are exact integers in any order.
        """
        from ._kernels import fine_histogram

        counts = np.zeros(1 << bits)
        offs = np.zeros(0 if quantum > 0 else 1 << bits)
        fine_histogram(t, lo, width, bits, counts, offs)
        by_bits = {bits: (counts, offs)}
        for b in range(bits - 1, min(j for _, j in levels) + self.table_level - 1, -1):
            c, o = by_bits[b + 1]
            # a row in the right child has coarse offset (1 + fine offset)/2
            by_bits[b] = (c[0::2] + c[1::2], (o[0::2] + o[1::2] + c[1::2]) * 0.5 if len(o) else o)
        for (kind, j), a in zip(levels, starts):
            c, o = by_bits[j + self.table_level]
            self._add_cell_sums(c, o, j, kind, quantum, acc, int(a))

    def cell_sums(self, counts: np.ndarray, j: int, kind: Kind, quantum: float) -> np.ndarray:
        """Lattice coordinate sums (unscaled, exact integers) of level j from the rows per table cell of that level
        (2^{j+L} counts, cell ⌊2^{j+L} t⌋): what :meth:`accumulate_levels` gives in lattice mode for those rows."""
        out = np.zeros(self.n_coefs(j))
        self._add_cell_sums(np.asarray(counts, dtype=np.float64), np.zeros(0), j, kind, quantum, out, 0)
        return out

    def _add_cell_sums(self, c: np.ndarray, o: np.ndarray, j: int, kind: Any, quantum: float, acc: np.ndarray,
                       start: int) -> None:
        """Add to ``acc[start:]`` the unscaled sums of level j from the rows ``c`` (and offset sums ``o``, unless
        ``quantum`` > 0) per table cell of that level: two small matrix products, then S shifted adds."""
        S, P = self.support, self.per_unit
        n_cells = 1 << j
        if quantum > 0:
            r = c.reshape(n_cells, P) @ self._by_shift(kind, "lattice", quantum)
        else:
            r = np.add(c.reshape(n_cells, P) @ self._by_shift(kind, "tab"),
                       o.reshape(n_cells, P) @ self._by_shift(kind, "dif"))
        for m in range(S):  # f_{jk}(t) with k = ⌊2^j t⌋ − m sits at index k + S − 1
            acc[start + S - 1 - m: start + S - 1 - m + n_cells] += r[:, m]

    def _by_shift(self, kind: Any, what: str, quantum: float = 0.0) -> np.ndarray:
        """(P, S) matrix M[i, m] = table value at argument m + i/P (``tab``, ``dif`` or ``lattice`` coordinates)."""
        key = (kind, what, quantum)
        if key not in self._shift_cache:
            v = {"tab": self._tab, "dif": self._dif}[what][kind] if what != "lattice" else self.lattice_values(kind, quantum)
            S, P = self.support, self.per_unit
            self._shift_cache[key] = np.ascontiguousarray(v[: S * P].reshape(S, P).T)
        return self._shift_cache[key]

    def design(self, t: np.ndarray, j: int, kind: Kind, scaled: bool = True, quantum: float = 0.0) -> np.ndarray:
        """Dense matrix ``D[i, k + S − 1] = f_{jk}(t_i)``, shape (len(t), |N_j|) (without 2^{j/2} if not ``scaled``).

        With ``quantum`` > 0: the lattice coordinates (:meth:`lattice_values`) instead, unscaled.
        """
        S, nk = self.support, self.n_coefs(j)
        t = np.asarray(t, dtype=np.float64)
        d = np.zeros((len(t), nk))
        fl, i0, w = self._cells(t, j)
        rows = np.arange(len(t))
        s = 2.0 ** (j / 2) if scaled and quantum <= 0 else 1.0
        lattice = self.lattice_values(kind, quantum) if quantum > 0 else None
        for m in range(S):  # the columns fl − m + S − 1 are distinct across m
            v = lattice[i0 + m * self.per_unit] if lattice is not None else self._values(kind, i0, w, m) * s
            d[rows, fl + (S - 1 - m)] = v
        return d

    def evaluate(self, t: np.ndarray, j: int, kind: Kind, coefs: np.ndarray, power: int = 1) -> np.ndarray:
        """``Σ_{k ∈ N_j} coefs[k + S − 1] f_{jk}(t)^power`` (synthesis for power 1), O(len(t) × S)."""
        S = self.support
        coefs = np.asarray(coefs, dtype=np.float64)
        if coefs.shape != (self.n_coefs(j),):
            raise LdpDaskError(f"coefs must have length |N_j| = {self.n_coefs(j)}; got shape {coefs.shape}")
        t = np.asarray(t, dtype=np.float64)
        fl, i0, w = self._cells(t, j)
        out = np.zeros(len(t))
        for m in range(S):
            out += coefs[fl + (S - 1 - m)] * self._values(kind, i0, w, m) ** power
        return out * 2.0 ** (power * j / 2)

    def function(self, kind: Kind) -> tuple[np.ndarray, np.ndarray]:
        """The table itself: (u grid on [0, S], values)."""
        return np.arange(len(self._tab[kind])) / self.per_unit, self._tab[kind].copy()


@lru_cache(maxsize=64)
def get_basis(name: str, table_level: int = DEFAULT_TABLE_LEVEL) -> WaveletBasis:
    """Cached :class:`WaveletBasis` (tables are built once per process)."""
    return WaveletBasis(name, table_level)
