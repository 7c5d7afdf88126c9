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
           "smallest_ranks", "tag_and_bound"]

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


_GOLD = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_RANK_SALT = np.uint64(0x5851F42D4C957F2D)


@njit(cache=True, nogil=True, inline="always")
def _mix(x: np.uint64, key: np.uint64) -> np.uint64:
    """The keyed mixing bijection of :func:`ldp_dask.units._mix` on one value (SplitMix64's finalizer, twice)."""
    z = x ^ key
    for _ in range(2):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    return z


@njit(cache=True, nogil=True)
def _spread(person: np.ndarray, rank: np.ndarray, first_row: int, rank_key: np.uint64,
            keyed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Rows spread by the top bits of a hash of their person into sub-buckets of about 2,048 rows (a counting
    sort copying person, rank and row index). With ``keyed`` the rank is computed here, as
    :func:`ldp_dask.units.ranks` does, from the row's position ``first_row + i``."""
    n = person.shape[0]
    bits = 0
    while (n >> bits) > 2048:
        bits += 1
    subs = 1 << bits
    shift = np.uint64(64 - bits) if bits > 0 else np.uint64(63)
    counts = np.zeros(subs + 1, np.int64)
    for i in range(n):
        b = np.int64((person[i] * _GOLD) >> shift) if bits > 0 else 0
        counts[b + 1] += 1
    counts = np.cumsum(counts)
    fill = counts[:subs].copy()
    sp = np.empty(n, np.uint64)
    sr = np.empty(n, np.uint64)
    si = np.empty(n, np.int64)
    for i in range(n):
        p = person[i]
        b = np.int64((p * _GOLD) >> shift) if bits > 0 else 0
        j = fill[b]
        fill[b] = j + 1
        sp[j] = p
        if keyed:
            sr[j] = _mix(_mix(np.uint64(first_row + i), rank_key) ^ p, rank_key ^ _RANK_SALT)
        else:
            sr[j] = rank[i]
        si[j] = i
    return sp, sr, si, counts, subs


@njit(cache=True, nogil=True)
def _bound(sp: np.ndarray, sr: np.ndarray, counts: np.ndarray, subs: int, k: int) -> np.ndarray:
    """Positions (into the spread arrays) of each person's k rows of smallest rank: sub-bucket by sub-bucket,
    with a table small enough for the processor's cache; persons by first appearance, rows by rank."""
    n = sp.shape[0]
    largest = 1
    for b in range(subs):
        largest = max(largest, counts[b + 1] - counts[b])
    size = 16
    while size < 2 * largest:
        size <<= 1
    table_key = np.empty(size, np.uint64)
    table_slot = np.empty(size, np.int64)
    best_rank = np.empty((largest, k), np.uint64)
    best_pos = np.empty((largest, k), np.int64)
    count = np.empty(largest, np.int64)
    out = np.empty(n, np.int64)
    o = 0
    mix = np.uint64(0xD6E8FEB86659FD93)
    for b in range(subs):
        lo, hi = counts[b], counts[b + 1]
        m = hi - lo
        if m == 0:
            continue
        tsize, tbits = 16, 4
        while tsize < 2 * m:
            tsize <<= 1
            tbits += 1
        tshift = np.uint64(64 - tbits)
        mask = tsize - 1
        table_slot[:tsize] = -1
        distinct = 0
        for j in range(lo, hi):
            p = sp[j]
            h = np.int64((p * mix) >> tshift) & mask
            while True:
                s = table_slot[h]
                if s == -1:
                    table_slot[h] = distinct
                    table_key[h] = p
                    s = distinct
                    count[s] = 0
                    distinct += 1
                    break
                if table_key[h] == p:
                    break
                h = (h + 1) & mask
            c = count[s]
            r = sr[j]
            if c < k:
                q = c
                count[s] = c + 1
            elif best_rank[s, k - 1] <= r:
                continue
            else:
                q = k - 1
            while q > 0 and best_rank[s, q - 1] > r:
                best_rank[s, q] = best_rank[s, q - 1]
                best_pos[s, q] = best_pos[s, q - 1]
                q -= 1
            best_rank[s, q] = r
            best_pos[s, q] = j
        for s in range(distinct):
            for q in range(count[s]):
                out[o] = best_pos[s, q]
                o += 1
    return out[:o]


@njit(cache=True, nogil=True)
def smallest_ranks(person: np.ndarray, rank: np.ndarray, k: int) -> np.ndarray:
    """Indices of the rows kept: for each distinct ``person``, the ``k`` rows of smallest ``rank``.

    The rows are first spread by the top bits of a hash of the person into
    sub-buckets of about 2,048 rows (a counting sort: two sequential passes),
    so that each sub-bucket's open-addressing table of persons (linear
    probing) and its per-person k smallest ranks, kept sorted by insertion,
    stay in the processor's cache: one table over a million rows spends its
    time waiting for memory (measured: 20 ms per 10^6 rows against 33-50). The
    result lists the sub-buckets in order, in each its persons by first
    appearance, each person's rows by increasing rank: a function of the
    arrays, their order included. O(n·k) time, O(n) memory. The numpy
    reference is :func:`ldp_dask.units.keep_contributions` (two sorts); both
    keep the same set when ranks are distinct within a person.
    """
    sp, sr, si, counts, subs = _spread(person, rank, 0, np.uint64(0), False)
    return si[_bound(sp, sr, counts, subs, k)]


@njit(cache=True, nogil=True)
def tag_and_bound(person: np.ndarray, first_row: int, bucket_key: np.uint64, rank_key: np.uint64, buckets: int,
                  groups: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A partition's rows tagged and bounded in one pass: (row index, person, rank, bucket) of each person's k
    rows of smallest rank, ordered by group of buckets (bucket j in group j·groups // buckets), and the groups'
    bounds. Ranks and buckets are :func:`ldp_dask.units.ranks` and :func:`ldp_dask.units.buckets`, computed
    here rather than in numpy passes."""
    sp, sr, si, counts, subs = _spread(person, person, first_row, rank_key, True)
    kept = _bound(sp, sr, counts, subs, k)
    m = kept.shape[0]
    bucket = np.empty(m, np.int64)
    gcount = np.zeros(groups + 1, np.int64)
    for j in range(m):
        bj = np.int64(_mix(sp[kept[j]], bucket_key) % np.uint64(buckets))
        bucket[j] = bj
        gcount[(bj * groups) // buckets + 1] += 1
    gcount = np.cumsum(gcount)
    fill = gcount[:groups].copy()
    index = np.empty(m, np.int64)
    out_person = np.empty(m, np.uint64)
    out_rank = np.empty(m, np.uint64)
    out_bucket = np.empty(m, np.int64)
    for j in range(m):
        g = (bucket[j] * groups) // buckets
        t = fill[g]
        fill[g] = t + 1
        pos = kept[j]
        index[t] = si[pos]
        out_person[t] = sp[pos]
        out_rank[t] = sr[pos]
        out_bucket[t] = bucket[j]
    return index, out_person, out_rank, out_bucket, gcount
