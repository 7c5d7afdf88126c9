"""Fused numba kernels for the hot loops (pure functions of numpy arrays).

Each kernel has a numpy reference implementation elsewhere (tests compare the
two); a kernel exists because a benchmark measures it faster
(``benchmarks/wavelet_rates.py --speed`` for the wavelet's, ``benchmarks/scaling.py``
for the counting kernels). Kernels are compiled once per process and cached on
disk (``cache=True``); the counting kernels are called only once a process has
counted enough values to recover their load (:func:`ldp_dask.channels.base.use_fused`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["wavelet_accumulate", "fine_histogram", "grid_counts", "lattice_sum", "lookup_codes", "split_to_levels",
           "float_limbs", "joint_exp_transition",
           "tag_and_bound", "bound_cells", "integer_ids", "floyd_counts"]

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
#: grid_counts keeps four count tables up to this many cells.
_LANES_MAX_CELLS = 1 << 16


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
    if not with_offsets and (1 << bits) <= _LANES_MAX_CELLS:  # counts only: four rows at a time, four tables
        c = np.zeros((4, 1 << bits))
        n4 = n - n % 4
        for i in range(0, n4, 4):
            for j in range(4):
                t = min(max((x[i + j] - lo) / width, 0.0), _ONE_MINUS)
                c[j, int(t * scale)] += 1.0
        for i in range(n4, n):
            t = min(max((x[i] - lo) / width, 0.0), _ONE_MINUS)
            c[0, int(t * scale)] += 1.0
        for k in range(1 << bits):
            counts[k] += c[0, k] + c[1, k] + c[2, k] + c[3, k]
        return
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


@njit(cache=True, nogil=True, fastmath=False)
def grid_counts(x: np.ndarray, lo: float, scale: float, cells: int, counts: np.ndarray) -> None:
    """``counts[g] += 1`` for g = min(⌊(x_i − lo)·scale⌋, cells − 1), values already inside the domain.

    The same two float operations, in the same order, as :func:`ldp_dask.channels.base.grid_index` with
    ``scale = cells / (hi − lo)``, so the cells are identical; one pass and no temporary arrays where the numpy
    reference (``np.bincount(grid_index(x, …))``) makes four. Four rows at a time into four tables, so that a run
    of rows in one cell does not wait on its own increments (measured on 8.4·10^6 rows, 256 cells: 5.9 ms, against
    36 ms for the reference).
    """
    n = x.shape[0]
    top = cells - 1
    if cells > _LANES_MAX_CELLS:  # four tables would not stay in cache: one
        for i in range(n):
            counts[min(int((x[i] - lo) * scale), top)] += 1
        return
    c = np.zeros((4, cells), np.int64)
    n4 = n - n % 4
    for i in range(0, n4, 4):
        g0 = int((x[i] - lo) * scale)  # t >= 0, so truncation is floor
        g1 = int((x[i + 1] - lo) * scale)
        g2 = int((x[i + 2] - lo) * scale)
        g3 = int((x[i + 3] - lo) * scale)
        c[0, min(g0, top)] += 1
        c[1, min(g1, top)] += 1
        c[2, min(g2, top)] += 1
        c[3, min(g3, top)] += 1
    for i in range(n4, n):
        c[0, min(int((x[i] - lo) * scale), top)] += 1
    for k in range(cells):
        counts[k] += c[0, k] + c[1, k] + c[2, k] + c[3, k]


@njit(cache=True, nogil=True, fastmath=False)
def lattice_sum(x: np.ndarray, lo: float, granularity: float, steps: int) -> np.int64:
    """Σ_i clip(rint((x_i − lo)/granularity), 0, steps): the mean channel's lattice coordinates, summed.

    The numpy reference is ``np.clip(np.rint((x − lo) / granularity), 0, steps).sum()``: the same division and
    round-half-to-even per value; the sum of integers is exact in both (below 2^53 there).
    """
    total = np.int64(0)
    for i in range(x.shape[0]):
        k = np.rint((x[i] - lo) / granularity)
        if k < 0.0:
            k = 0.0
        if k > steps:
            k = float(steps)
        total += np.int64(k)
    return total


@njit(cache=True, nogil=True)
def lookup_codes(x: np.ndarray, lo: int, lut: np.ndarray, missing: int, out: np.ndarray) -> int:
    """``out[i]`` = ``lut[x_i − lo]``, the place of integer ``x_i`` among the categories (−1 in ``lut`` where it
    is none of them); a value outside the table or not a category gets ``missing``. Returns how many did.

    The numpy reference is ``pc.index_in`` on the values (:func:`ldp_dask.channels.categorical.category_codes`),
    nulls filled with ``missing``; one pass, where it converts, hashes and fills (8.4·10^6 int16 rows: 50 ms).
    """
    span = lut.shape[0]
    misses = 0
    for i in range(x.shape[0]):
        k = np.int64(x[i]) - lo
        c = lut[k] if 0 <= k < span else -1
        if c < 0:
            misses += 1
            c = missing
        out[i] = c
    return misses


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


@njit(cache=True, nogil=True, inline="always")
def _cell(person: np.uint64, bucket_key: np.uint64, cells: np.uint64) -> np.int64:
    """The cell of a person: the top 32 bits of its keyed hash scaled to ``cells`` (multiply and shift, as
    :func:`ldp_dask.units.cells_of`). With ``cells = buckets·S`` its bucket is ``cell // S``."""
    return np.int64(((_mix(person, bucket_key) >> np.uint64(32)) * cells) >> np.uint64(32))


@njit(cache=True, nogil=True, inline="always")
def _table_bits(m: int) -> int:
    bits = 4
    while (1 << bits) < 2 * m:
        bits += 1
    return bits


@njit(cache=True, nogil=True, inline="always")
def _home(p: np.uint64, tbits: int) -> np.int64:
    """The slot where person p's probe starts in a table of 2^tbits slots."""
    return np.int64((p * np.uint64(0xD6E8FEB86659FD93)) >> np.uint64(64 - tbits))


@njit(cache=True, nogil=True, inline="always")
def _offer(p: np.uint64, r: np.uint64, pos: int, tbits: int, table_person: np.ndarray, table_count: np.ndarray,
           table_rank: np.ndarray, table_pos: np.ndarray, k: int) -> int:
    """Offer row ``pos`` (person p, rank r) to a cell's table: open addressing by person (linear probing; a count
    of 0 marks an empty slot), each slot holding its person's k smallest ranks, sorted, and their rows. Returns
    the slot of a person new to the table, else -1."""
    mask = (1 << tbits) - 1
    h = _home(p, tbits)
    while table_count[h] != 0 and table_person[h] != p:
        h = (h + 1) & mask
    c = table_count[h]
    if c == 0:
        table_person[h] = p
        table_count[h] = 1
        table_rank[h, 0] = r
        table_pos[h, 0] = pos
        return int(h)
    if k == 1:  # the common case, without a branch on the rank (as random as a coin): select by a bit mask
        # (``r if better else cur`` compiles to a branch, mispredicted about as often as a person's row is its
        # best so far: 10 ms in 4M rows)
        cur = table_rank[h, 0]
        m = np.uint64(0) - np.uint64(r < cur)  # all ones where the new rank is smaller
        table_rank[h, 0] = cur ^ ((cur ^ r) & m)
        cp = np.uint64(table_pos[h, 0])
        table_pos[h, 0] = np.int64(cp ^ ((cp ^ np.uint64(pos)) & m))
    else:
        if c < k:
            q = c
            table_count[h] = c + 1
        elif table_rank[h, k - 1] <= r:
            return -1
        else:
            q = k - 1
        while q > 0 and table_rank[h, q - 1] > r:
            table_rank[h, q] = table_rank[h, q - 1]
            table_pos[h, q] = table_pos[h, q - 1]
            q -= 1
        table_rank[h, q] = r
        table_pos[h, q] = pos
    return -1


#: The fixed key of integer person ids (:func:`ldp_dask.units.person_ids`): a public constant, not a secret.
_PERSON_KEY = np.uint64(0x2545F4914F6CDD1D)


@njit(cache=True, nogil=True)
def integer_ids(values: np.ndarray, out: np.ndarray) -> None:
    """``out[i]``: a 64-bit id of the integer ``values[i]`` (int64), the mixing bijection of :func:`_mix` under a
    fixed public key, so distinct integers get distinct ids. One pass; the numpy reference is
    ``units._mix(values, _PERSON_KEY)``."""
    for i in range(values.shape[0]):
        out[i] = _mix(np.uint64(values[i]), _PERSON_KEY)


@njit(cache=True, nogil=True)
def tag_and_bound(person: np.ndarray, first_row: int, bucket_key: np.uint64, rank_key: np.uint64, cells: int,
                  k: int, scratch_rows: np.ndarray, scratch_cells: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A partition's rows tagged and bounded in one pass: (row index, person, rank) of each person's k rows of
    smallest rank, in cell order, and each cell's start in them (length ``cells + 1``).

    The rank of row i is :func:`ldp_dask.units.ranks` of its position ``first_row + i``; its cell is
    :func:`_cell`. The rows are first spread by cell (a counting sort into ``scratch_rows``, shape (≥ n, 2):
    person, row), so that each cell's table of persons and their k smallest ranks stays in the processor's
    cache: one table over a million rows spends its time waiting for memory. The cells are hashed first, in a
    loop of their own (``scratch_cells``, int32, ≥ n): without a store or a branch in it the compiler runs it on
    vector registers, 2 ms a 4M rows against 10 ms for the same hash beside the count. O(n·k) time. Within a
    cell the rows come in the table's order; :func:`bound_cells` puts them in a canonical one."""
    n = person.shape[0]
    if scratch_rows.shape[0] < n or scratch_cells.shape[0] < n:
        raise ValueError("tag_and_bound: the scratch holds fewer rows than there are rows")
    ucells = np.uint64(cells)
    cell = scratch_cells[:n]
    for i in range(n):
        cell[i] = _cell(person[i], bucket_key, ucells)
    counts = np.zeros(cells + 1, np.int64)
    for i in range(n):
        counts[cell[i] + 1] += 1
    largest = 1
    for c in range(cells):
        largest = max(largest, counts[c + 1])
    counts = np.cumsum(counts)
    fill = counts[:cells].copy()
    for i in range(n):
        ci = cell[i]
        j = fill[ci]
        fill[ci] = j + 1
        scratch_rows[j, 0] = person[i]
        scratch_rows[j, 1] = i
    size = 1 << _table_bits(largest)
    table_person = np.empty(size, np.uint64)
    table_count = np.empty(size, np.int64)
    table_rank = np.empty((size, k), np.uint64)
    table_pos = np.empty((size, k), np.int64)
    table_count[:] = 0
    used = np.empty(largest, np.int64)  # the slots filled, by first appearance: read out and emptied in O(persons)
    index = np.empty(n, np.int64)
    out_person = np.empty(n, np.uint64)
    out_rank = np.empty(n, np.uint64)
    starts = np.zeros(cells + 1, np.int64)
    o = 0
    for c in range(cells):
        lo, hi = counts[c], counts[c + 1]
        if hi > lo:
            tbits = _table_bits(hi - lo)
            distinct = 0
            for j in range(lo, hi):
                p = scratch_rows[j, 0]
                r = _mix(_mix(np.uint64(first_row) + scratch_rows[j, 1], rank_key) ^ p, rank_key ^ _RANK_SALT)
                h = _offer(p, r, j, tbits, table_person, table_count, table_rank, table_pos, k)
                if h >= 0:
                    used[distinct] = h
                    distinct += 1
            for u in range(distinct):
                h = used[u]
                for q in range(table_count[h]):
                    j = table_pos[h, q]
                    index[o] = scratch_rows[j, 1]
                    out_person[o] = table_person[h]
                    out_rank[o] = table_rank[h, q]
                    o += 1
                table_count[h] = 0
        starts[c + 1] = o
    return index[:o], out_person[:o], out_rank[:o], starts


@njit(cache=True, nogil=True)
def bound_cells(person: np.ndarray, rank: np.ndarray, parts: np.ndarray, bucket_key: np.uint64, cells: int,
                first_cell: int, stop_cell: int, k: int, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of each person's k rows of smallest rank among rows that arrive as ``len(parts) - 1`` parts
    (part q is rows ``parts[q]`` to ``parts[q + 1]``), each in cell order (as :func:`tag_and_bound` emits them,
    cells ``first_cell`` to ``stop_cell``), and each cell's start in the positions (length
    ``stop_cell - first_cell + 1``). The positions are written into ``out`` (int64, at least one per row) and
    returned as its first part.

    Cell by cell, the rows of that cell in every part meet in one small table: no spread, since the parts are
    already in cell order. Within a cell the kept rows are ordered by :func:`_canonical`, so the result is a
    function of the set of rows alone: neither how they were cut into parts nor the order they came in changes
    it. If a part is not in cell order, or holds a cell outside the range, ``(empty, empty)`` is returned and
    the caller sorts."""
    if out.shape[0] < person.shape[0]:
        raise ValueError("bound_cells: out holds fewer positions than there are rows")
    t = parts.shape[0] - 1
    width = stop_cell - first_cell
    ucells = np.uint64(cells)
    offs = np.zeros((t, width + 1), np.int64)
    for q in range(t):
        prev = np.int64(0)
        for i in range(parts[q], parts[q + 1]):
            ci = _cell(person[i], bucket_key, ucells) - first_cell
            if ci < prev or ci >= width:
                return np.empty(0, np.int64), np.empty(0, np.int64)
            prev = ci
            offs[q, ci + 1] += 1
    largest = 1
    for c in range(width):
        m = 0
        for q in range(t):
            m += offs[q, c + 1]
        largest = max(largest, m)
    for q in range(t):
        offs[q, 0] = parts[q]
        for c in range(width):
            offs[q, c + 1] += offs[q, c]
    size = 1 << _table_bits(largest)
    table_person = np.empty(size, np.uint64)
    table_count = np.empty(size, np.int64)
    table_rank = np.empty((size, k), np.uint64)
    table_pos = np.empty((size, k), np.int64)
    starts = np.zeros(width + 1, np.int64)
    o = 0
    for c in range(width):
        m = 0
        for q in range(t):
            m += offs[q, c + 1] - offs[q, c]
        if m > 0:
            tbits = _table_bits(m)
            table_count[:1 << tbits] = 0
            for q in range(t):
                for j in range(offs[q, c], offs[q, c + 1]):
                    _offer(person[j], rank[j], j, tbits, table_person, table_count, table_rank, table_pos, k)
            o0 = o
            for h in range(1 << tbits):
                for q in range(table_count[h]):
                    out[o] = table_pos[h, q]
                    o += 1
            _canonical(out[o0:o], rank, person, tbits)
        starts[c + 1] = o
    return out[:o], starts


@njit(cache=True, nogil=True)
def _canonical(pos: np.ndarray, rank: np.ndarray, person: np.ndarray, tbits: int) -> None:
    """Sort the positions ``pos`` in place by (home slot, person, rank) of their rows: a strict order (a person's
    ranks are distinct) that depends on the set of rows only, not on the order they came in. Read out of the
    table they are nearly in this order already (linear probing moves a person a few slots past its home), so
    an insertion sort costs little more than a pass."""
    for i in range(1, pos.shape[0]):
        p = pos[i]
        u = person[p]
        hu, r = _home(u, tbits), rank[p]
        j = i - 1
        while j >= 0:
            v = person[pos[j]]
            hv = _home(v, tbits)
            if hv < hu or (hv == hu and (v < u or (v == u and rank[pos[j]] < r))):
                break
            pos[j + 1] = pos[j]
            j -= 1
        pos[j + 1] = p


@njit(cache=True, nogil=True)
def floyd_counts(picks: np.ndarray, universe: int, own: np.ndarray, counts: np.ndarray) -> None:
    """Floyd's uniform subsets from their raw draws, counted: row r's draw ``picks[i, r]`` is uniform on
    {0, …, universe − size + i} (size = picks.shape[0]) and is taken unless an earlier member holds it, when
    universe − size + i is taken instead; each member m stands for the category m + (m ≥ own[r]) (the row's own
    category skipped), counted in ``counts``. The same arithmetic as
    :func:`ldp_dask.channels.subset.resolve_picks` followed by a bincount."""
    size = picks.shape[0]
    members = np.empty(size, dtype=np.int64)
    for r in range(picks.shape[1]):
        for i in range(size):
            t = picks[i, r]
            for m in range(i):
                if members[m] == t:
                    t = universe - size + i
                    break
            members[i] = t
            counts[t + (1 if t >= own[r] else 0)] += 1
