"""Fused numba kernels for the hot loops (pure functions of numpy arrays).

Each kernel has a numpy reference implementation elsewhere (tests compare the
two); the kernel exists because ``benchmarks/wavelet_rates.py --speed``
measures it faster. Kernels are compiled once per process and cached on disk
(``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["wavelet_accumulate", "fine_histogram", "split_to_levels", "joint_exp_transition"]

_ONE_MINUS = float(np.nextafter(1.0, 0.0))


@njit(cache=True, nogil=True, fastmath=False)
def wavelet_accumulate(
    t: np.ndarray,
    level_j: np.ndarray,
    level_kind: np.ndarray,
    level_offset: np.ndarray,
    tabs: np.ndarray,
    difs: np.ndarray,
    support: int,
    per_unit: int,
    out: np.ndarray,
    quantum: float = 0.0,
) -> None:
    """``out[offset_ℓ + k + S − 1] += Σ_i f_ℓ(2^{j_ℓ} t_i − k)`` for every level ℓ (unscaled).

    One pass over the rows; per row and level, S table lookups with linear
    interpolation (``difs`` is zero for step tables). ``tabs[kind]`` is the
    table of φ (kind 0) or ψ (kind 1). The caller multiplies each level's
    block by 2^{j/2}. Same arithmetic as :meth:`WaveletBasis.accumulate`,
    different summation order. With ``quantum`` > 0 the value is the table at the
    midpoint of the row's cell, rounded to the lattice, floor(v(½)·quantum + 0.5),
    and the sums are exact integers.
    """
    nlev = level_j.shape[0]
    for i in range(t.shape[0]):
        ti = t[i]
        if ti > _ONE_MINUS:
            ti = _ONE_MINUS
        for lev in range(nlev):
            u = ti * float(1 << level_j[lev])
            fl = np.floor(u)
            q = (u - fl) * per_unit
            i0 = int(q)
            w = q - i0
            if quantum > 0.0:
                w = 0.5
            base = level_offset[lev] + int(fl) + support - 1
            kind = level_kind[lev]
            for m in range(support):
                idx = i0 + m * per_unit
                v = tabs[kind, idx] + w * difs[kind, idx]
                if quantum > 0.0:
                    v = np.floor(v * quantum + 0.5)
                out[base - m] += v


@njit(cache=True, nogil=True, fastmath=False)
def fine_histogram(t: np.ndarray, bits: int, counts: np.ndarray, offsets: np.ndarray) -> None:
    """``counts[g] += 1`` and ``offsets[g] += u − g`` for u = 2^bits·t_i, g = ⌊u⌋ (t_i < 1 clamped below 1).

    One pass, two ``bincount``s fused (``offsets`` may have length 0: counts only).
    The numpy reference is ``np.bincount(g)`` and ``np.bincount(g, weights=u − g)``.
    """
    scale = float(1 << bits)
    with_offsets = offsets.shape[0] > 0
    for i in range(t.shape[0]):
        ti = t[i]
        if ti > _ONE_MINUS:
            ti = _ONE_MINUS
        u = ti * scale
        g = int(u)
        counts[g] += 1.0
        if with_offsets:
            offsets[g] += u - g


@njit(cache=True, nogil=True)
def split_to_levels(counts: np.ndarray, row_level: np.ndarray, alloc: np.ndarray, shifts: np.ndarray,
                    offsets: np.ndarray, out: np.ndarray) -> None:
    """Per-level bin counts of the rows of each finest bin, split among the levels.

    The rows of bin b (``counts[b]`` of them, taken in order) go to levels
    ``row_level[pos]``; or, when ``row_level`` is empty, ``alloc[b, g]`` rows of
    bin b go to level g. A row of bin b at level g lands in
    ``out[offsets[g] + (b >> shifts[g])]`` (its dyadic parent at that level).
    The numpy reference is a ``bincount`` over (level, bin) then dyadic sums.
    """
    pos = 0
    per_row = row_level.shape[0] > 0
    for b in range(counts.shape[0]):
        if per_row:
            for _ in range(counts[b]):
                g = row_level[pos]
                pos += 1
                out[offsets[g] + (b >> shifts[g])] += 1
        else:
            for g in range(alloc.shape[1]):
                out[offsets[g] + (b >> shifts[g])] += alloc[b, g]


@njit(cache=True, nogil=True)
def joint_exp_transition(A: np.ndarray, CC: np.ndarray, target: float, beta: float, out: np.ndarray) -> None:
    """``out[i'] = log Σ_{i < i'} exp(A[i] − β |CC[i'] − CC[i] − target|)`` in the log domain.

    Two passes per column (max, then the sum of exponentials relative to it),
    so no term underflows before the comparison; terms more than 746 below
    the column's maximum contribute exactly 0.0 in double precision and skip
    their exponential. O(K²/2). The numpy reference is a dense logsumexp.
    """
    K = A.shape[0]
    out[0] = -np.inf
    for j in range(1, K):
        m = -np.inf
        for i in range(j):
            t = A[i] - beta * abs(CC[j] - CC[i] - target)
            if t > m:
                m = t
        if m == -np.inf:
            out[j] = -np.inf
            continue
        s = 0.0
        for i in range(j):
            t = A[i] - beta * abs(CC[j] - CC[i] - target) - m
            if t > -746.0:
                s += np.exp(t)
        out[j] = m + np.log(s)
