"""Fused numba kernels for the hot loops (pure functions of numpy arrays).

Each kernel has a numpy reference implementation elsewhere (tests compare the
two); the kernel exists because ``benchmarks/wavelet_rates.py --speed``
measures it faster. Kernels are compiled once per process and cached on disk
(``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["wavelet_accumulate", "fine_histogram", "split_to_levels", "float_limbs", "joint_exp_transition",
           "smallest_ranks"]

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


#: Scatter kernels compute a chunk of indices, then add: a store whose address hangs on the load before it
#: stalls the next loads (measured: 8.4 ns a row in one loop, 2.4 ns chunked, at 2^16 bins).
_CHUNK = 1024


@njit(cache=True, nogil=True, fastmath=False)
def fine_histogram(x: np.ndarray, lo: float, width: float, bits: int, counts: np.ndarray,
                   offsets: np.ndarray) -> None:
    """``counts[g] += 1`` and ``offsets[g] += u − g`` for u = 2^bits·t_i, g = ⌊u⌋.

    t_i = (x_i − lo)/width clipped to [0, 1] (as the channels' ``to_unit``), then held below 1, so
    g < 2^bits. ``offsets`` may have length 0: counts only. The numpy reference is
    ``np.bincount(g)`` and ``np.bincount(g, weights=u − g)``.
    """
    scale = float(1 << bits)
    with_offsets = offsets.shape[0] > 0
    n = x.shape[0]
    idx = np.empty(_CHUNK, np.int64)
    frac = np.empty(_CHUNK)
    for s in range(0, n, _CHUNK):
        e = min(n, s + _CHUNK)
        for i in range(s, e):
            t = (x[i] - lo) / width
            if t < 0.0:
                t = 0.0
            if t > _ONE_MINUS:
                t = _ONE_MINUS
            u = t * scale
            g = int(u)
            idx[i - s] = g
            frac[i - s] = u - g
        if with_offsets:
            for i in range(e - s):
                counts[idx[i]] += 1.0
                offsets[idx[i]] += frac[i]
        else:
            for i in range(e - s):
                counts[idx[i]] += 1.0


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
    k = shifts.shape[0]
    base = np.empty(k, np.int64)
    buf = np.empty(_CHUNK, np.int64)
    nb = 0
    pos = 0
    per_row = row_level.shape[0] > 0
    for b in range(counts.shape[0]):
        if counts[b] == 0:
            continue
        for g in range(k):
            base[g] = offsets[g] + (b >> shifts[g])
        if not per_row:
            for g in range(k):
                out[base[g]] += alloc[b, g]
            continue
        for _ in range(counts[b]):
            buf[nb] = base[row_level[pos]]
            pos += 1
            nb += 1
            if nb == _CHUNK:
                for i in range(nb):
                    out[buf[i]] += 1
                nb = 0
    for i in range(nb):
        out[buf[i]] += 1


@njit(cache=True, nogil=True, fastmath=False)
def float_limbs(v: np.ndarray, out: np.ndarray) -> None:
    """Canonical fixed-point limbs of each float (shape (n, 4), limb 3 first in value): the operations of
    :func:`ldp_dask.exactsum.from_float` (truncations by powers of two, exact), then its carries, per value.

    The numpy reference is ``exactsum._from_float_numpy``; every step is exact, so both give the same integers.
    """
    for i in range(v.shape[0]):
        r = v[i]
        for j in range(4):
            scale = 2.0 ** (50 - 50 * j)
            q = np.trunc(r / scale)
            out[i, 3 - j] = np.int64(q)
            r = r - q * scale
        for j in range(3):
            carry = out[i, j] >> 50
            out[i, j] -= carry << 50
            out[i, j + 1] += carry


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


@njit(cache=True, nogil=True)
def smallest_ranks(person: np.ndarray, rank: np.ndarray, k: int) -> np.ndarray:
    """Indices of the rows kept: for each distinct ``person``, the ``k`` rows of smallest ``rank``; persons in order
    of first appearance, each one's rows by increasing rank (a function of the arrays, order included).

    One pass with an open-addressing hash table of persons (linear probing,
    Fibonacci hashing of the 64-bit id) and, per person, the indices of its k
    smallest ranks kept sorted by insertion. O(n·k) time and memory, for the
    small k of contribution bounding (an inline record per slot measured
    slower: zeroing a table of records costs more than the indirection). The
    numpy reference is :func:`ldp_dask.units.keep_contributions` (two sorts);
    both keep the same set when ranks are distinct within a person.
    """
    n = person.shape[0]
    size = 16
    while size < 2 * n:
        size <<= 1
    mask = np.uint64(size - 1)
    table_key = np.empty(size, np.uint64)
    table_slot = np.full(size, -1, np.int64)
    best = np.empty((max(n, 1), k), np.int64)
    count = np.zeros(max(n, 1), np.int64)
    distinct = 0
    total = 0
    for i in range(n):
        p = person[i]
        j = ((p * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(17)) & mask
        while True:
            s = table_slot[j]
            if s == -1:
                table_slot[j] = distinct
                table_key[j] = p
                s = distinct
                distinct += 1
                break
            if table_key[j] == p:
                break
            j = (j + np.uint64(1)) & mask
        c = count[s]
        r = rank[i]
        if c < k:
            m = c
            count[s] = c + 1
            total += 1
        elif rank[best[s, k - 1]] <= r:
            continue
        else:
            m = k - 1
        while m > 0 and rank[best[s, m - 1]] > r:
            best[s, m] = best[s, m - 1]
            m -= 1
        best[s, m] = i
    out = np.empty(total, np.int64)
    o = 0
    for s in range(distinct):
        for m in range(count[s]):
            out[o] = best[s, m]
            o += 1
    return out
