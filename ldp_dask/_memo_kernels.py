"""Fused numba kernels of the memoized channels (:mod:`ldp_dask.channels.memo`): one pass over a bucket's persons.

Each person's permanent randomness is Philox4x64-10 (Salmon, Moraes, Dror and Shaw 2011) evaluated at counters
``(person, state, lane, use)`` under the release's 128-bit memo key, word for word the blocks of
:func:`ldp_dask.noise.philox_blocks` (the numpy reference the tests compare with). A block's four 64-bit words give
eight 32-bit uniforms; a report bit is 1 when its uniform falls below an integer threshold out of 2^32, so every
response probability is an exact rational and the ε a channel spends is computed from it.

Uses (the counter's last word): :data:`USE_BITS` the report's bits, :data:`USE_DIGEST` the keyed digest of the
(person, state) report the ledger counts, :data:`USE_PERSON` the keyed digest of the person, :data:`USE_ALPHA` the
person's α-point of the rounding (Ding, Kulkarni and Yekhanin 2017), :data:`USE_HASH` the person's keyed hash of
the cells into g values (:mod:`ldp_dask.channels.memo_hash`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["USE_BITS", "USE_DIGEST", "USE_PERSON", "USE_ALPHA", "USE_HASH", "memo_unary", "memo_kary", "memo_bit",
           "alpha_points", "hashed_night", "hashed_support", "memo_bit_sum"]

USE_BITS, USE_DIGEST, USE_PERSON, USE_ALPHA, USE_HASH = 1, 2, 3, 4, 5

_M0, _M1 = np.uint64(0xD2E7470EE14C6C93), np.uint64(0xCA5A826395121157)
_W0, _W1 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBB67AE8584CAA73B)
_LOW, _S32, _S11 = np.uint64(0xFFFFFFFF), np.uint64(32), np.uint64(11)
_TO_UNIT = 1.0 / 9007199254740992.0


@intrinsic
def _umulhi(typingctx: Any, a: Any, b: Any) -> Any:
    """The high 64 bits of the 128-bit product a·b (one machine multiply, where numba has no 128-bit integer)."""
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        return builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _mulhilo(a: np.uint64, b: np.uint64) -> tuple[np.uint64, np.uint64]:
    return _umulhi(a, b), a * b  # type: ignore[call-arg]


@njit(cache=True, nogil=True, inline="always")
def _philox(c0: np.uint64, c1: np.uint64, c2: np.uint64, c3: np.uint64, k0: np.uint64,
            k1: np.uint64) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    for r in range(10):
        if r:
            k0 = k0 + _W0
            k1 = k1 + _W1
        hi0, lo0 = _mulhilo(_M0, c0)
        hi1, lo1 = _mulhilo(_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


@njit(cache=True, nogil=True, inline="always")
def _digests(p: np.uint64, s: np.uint64, k0: np.uint64, k1: np.uint64) -> tuple[np.uint64, np.uint64]:
    d, _, _, _ = _philox(p, np.uint64(0), np.uint64(0), np.uint64(USE_PERSON), k0, k1)
    m, _, _, _ = _philox(p, s, np.uint64(0), np.uint64(USE_DIGEST), k0, k1)
    return d, m


@njit(cache=True, nogil=True)
def memo_unary(person: np.ndarray, state: np.ndarray, k0: np.uint64, k1: np.uint64, t_in: np.uint64,
               t_out: np.uint64, counts: np.ndarray, pairs: np.ndarray) -> None:
    """Memoized unary reports: person i (id ``person[i]``, state ``state[i]`` in 0..d−1, d = ``len(counts)``) reports
    bit j = 1 when the 32-bit uniform j of its (person, state) blocks is below ``t_in`` (j = its state) or ``t_out``
    (any other j); ``counts[j]`` gets the number of 1-bits at j, ``pairs[i]`` the person's and the report's
    digests. Nothing else leaves: the bits are summed as they are drawn."""
    d = counts.shape[0]
    for i in range(person.shape[0]):
        p, s = person[i], np.uint64(state[i])
        pairs[i, 0], pairs[i, 1] = _digests(p, s, k0, k1)
        for lane in range((d + 7) // 8):
            w0, w1, w2, w3 = _philox(p, s, np.uint64(lane), np.uint64(USE_BITS), k0, k1)
            base = lane * 8
            for t in range(8):
                j = base + t
                if j >= d:
                    break
                w = (w0, w1, w2, w3)[t // 2]
                u = (w & _LOW) if t % 2 == 0 else (w >> _S32)
                if u < (t_in if j == state[i] else t_out):
                    counts[j] += 1


@njit(cache=True, nogil=True)
def alpha_points(person: np.ndarray, k0: np.uint64, k1: np.uint64, out: np.ndarray) -> None:
    """Each person's α-point in [0, 1): the top 53 bits of its :data:`USE_ALPHA` block's first word."""
    for i in range(person.shape[0]):
        a, _, _, _ = _philox(person[i], np.uint64(0), np.uint64(0), np.uint64(USE_ALPHA), k0, k1)
        out[i] = float(a >> _S11) * _TO_UNIT


@njit(cache=True, nogil=True)
def memo_bit(person: np.ndarray, level: np.ndarray, k0: np.uint64, k1: np.uint64, thresholds: np.ndarray,
             ones: np.ndarray, pairs: np.ndarray) -> None:
    """Memoized one-bit reports: person i at rounded level z = ``level[i]`` reports 1 when the first 32-bit uniform
    of its (person, z) block is below ``thresholds[z]``; ``ones[0]`` gets the number of 1s, ``pairs[i]`` the
    digests."""
    for i in range(person.shape[0]):
        p, z = person[i], np.uint64(level[i])
        pairs[i, 0], pairs[i, 1] = _digests(p, z, k0, k1)
        w0, _, _, _ = _philox(p, z, np.uint64(0), np.uint64(USE_BITS), k0, k1)
        if (w0 & _LOW) < thresholds[level[i]]:
            ones[0] += 1


@njit(cache=True, nogil=True)
def memo_bit_sum(person: np.ndarray, level: np.ndarray, k0: np.uint64, k1: np.uint64, thresholds: np.ndarray,
                 ones: np.ndarray) -> None:
    """:func:`memo_bit`'s reports, summed, without the digests (a capped series keeps nothing per person)."""
    for i in range(person.shape[0]):
        w0, _, _, _ = _philox(person[i], np.uint64(level[i]), np.uint64(0), np.uint64(USE_BITS), k0, k1)
        if (w0 & _LOW) < thresholds[level[i]]:
            ones[0] += 1


@njit(cache=True, nogil=True)
def memo_kary(person: np.ndarray, state: np.ndarray, k0: np.uint64, k1: np.uint64, t_keep: np.uint64,
              counts: np.ndarray, pairs: np.ndarray) -> None:
    """Memoized k-ary reports: person i keeps its state when the first 32-bit uniform of its (person, state) blocks
    is below ``t_keep``, else reports one of the d − 1 other categories exactly uniformly (the next uniforms, each
    rejected at or above the largest multiple of d − 1 below 2^32, then ``u mod (d − 1)``, skipping the state);
    ``counts[c]`` gets the reports of c, ``pairs[i]`` the digests."""
    others = np.uint64(counts.shape[0] - 1)
    limit = (np.uint64(1) << _S32) // others * others
    for i in range(person.shape[0]):
        p, s = person[i], np.uint64(state[i])
        pairs[i, 0], pairs[i, 1] = _digests(p, s, k0, k1)
        w0, w1, w2, w3 = _philox(p, s, np.uint64(0), np.uint64(USE_BITS), k0, k1)
        if (w0 & _LOW) < t_keep:
            counts[state[i]] += 1
            continue
        lane, t, report = 0, 1, -1
        while report < 0:
            if t == 8:
                lane += 1
                t = 0
                w0, w1, w2, w3 = _philox(p, s, np.uint64(lane), np.uint64(USE_BITS), k0, k1)
            w = (w0, w1, w2, w3)[t // 2]
            u = (w & _LOW) if t % 2 == 0 else (w >> _S32)
            t += 1
            if u < limit:
                j = np.int64(u % others)
                report = j + (j >= state[i])
        counts[report] += 1


@njit(cache=True, nogil=True, inline="always")
def _word(w0: np.uint64, w1: np.uint64, w2: np.uint64, w3: np.uint64, t: int) -> np.uint64:
    w = (w0, w1, w2, w3)[t // 2]
    return (w & _LOW) if t % 2 == 0 else (w >> _S32)


@njit(cache=True, nogil=True, inline="always")
def _cells_per_block(g: np.uint64) -> int:
    """Cells one hash block serves: 256 for g = 2 (a bit each), else 8 (a 32-bit word each)."""
    return 256 if g == np.uint64(2) else 8


@njit(cache=True, nogil=True, inline="always")
def _hash_in(w0: np.uint64, w1: np.uint64, w2: np.uint64, w3: np.uint64, t: int, g: np.uint64) -> np.uint64:
    """The hash of the block's cell t: bit t of the block's 256 (g = 2), else ⌊w·g/2^32⌋ of its word t."""
    if g == np.uint64(2):
        w = w0 if t < 64 else (w1 if t < 128 else (w2 if t < 192 else w3))
        return (w >> np.uint64(t & 63)) & np.uint64(1)
    w = w0 if t < 2 else (w1 if t < 4 else (w2 if t < 6 else w3))
    return (((w & _LOW) if t % 2 == 0 else (w >> _S32)) * g) >> _S32


@njit(cache=True, nogil=True, inline="always")
def _tally(hist: np.ndarray, b0: np.uint64, b1: np.uint64, b2: np.uint64, b3: np.uint64, block: int, d: int,
           flip: np.uint64) -> None:
    """g = 2: count the bytes of a block's support bits (its hash bits, complemented when the report is 0) in
    ``hist[byte position, byte value]``: a byte's cells at once, without a branch per cell."""
    nbytes = min(32, (d - block * 256 + 7) // 8)
    for j in range(nbytes):
        w = b0 if j < 8 else (b1 if j < 16 else (b2 if j < 24 else b3))
        v = ((w >> np.uint64(8 * (j % 8))) ^ flip) & np.uint64(0xFF)
        hist[block * 32 + j, v] += 1


@njit(cache=True, nogil=True)
def _fold(hist: np.ndarray, counts: np.ndarray) -> None:
    """``counts[c]`` += the persons whose byte holding cell c had c's bit set (:func:`_tally`)."""
    d = counts.shape[0]
    for c in range(d):
        bit = c % 8
        for v in range(256):
            if (v >> bit) & 1:
                counts[c] += hist[c // 8, v]


@njit(cache=True, nogil=True)
def hashed_night(person: np.ndarray, cell: np.ndarray, k0: np.uint64, k1: np.uint64, g: np.uint64,
                 t_keep: np.uint64, out: np.ndarray, counts: np.ndarray) -> None:
    """Memoized reports of hashed cells, and the supports they give. Person i's hash of cell c is
    :func:`_hash_in` of its (person, ⌊c/m⌋, 0, :data:`USE_HASH`) block, m = :func:`_cells_per_block`; the report
    of its own cell's hash h is drawn from the (person, h) blocks exactly as :func:`memo_kary` draws a category
    among g: h kept when the first 32-bit word is below ``t_keep``, else one of the g − 1 others exactly uniformly.
    ``out[i]`` gets the report; ``counts[c]`` += the persons whose hash of c equals their report (d =
    ``len(counts)``). For g = 2 and d ≤ 256: two Philox blocks a person, and a byte of cells counted at once."""
    others = g - np.uint64(1)
    limit = (np.uint64(1) << _S32) // others * others
    d = counts.shape[0]
    per = _cells_per_block(g)
    two = g == np.uint64(2)
    hist = np.zeros(((d + 7) // 8 if two else 0, 256), np.int64)
    for i in range(person.shape[0]):
        p, c = person[i], np.int64(cell[i])
        own = c // per
        h0, h1, h2, h3 = _philox(p, np.uint64(own), np.uint64(0), np.uint64(USE_HASH), k0, k1)
        h = _hash_in(h0, h1, h2, h3, int(c % per), g)
        w0, w1, w2, w3 = _philox(p, h, np.uint64(0), np.uint64(USE_BITS), k0, k1)
        report = np.int64(-1)
        if (w0 & _LOW) < t_keep:
            report = np.int64(h)
        lane, t = 0, 1
        while report < 0:
            if t == 8:
                lane += 1
                t = 0
                w0, w1, w2, w3 = _philox(p, h, np.uint64(lane), np.uint64(USE_BITS), k0, k1)
            u = _word(w0, w1, w2, w3, t)
            t += 1
            if u < limit:
                j = np.int64(u % others)
                report = j + (j >= np.int64(h))
        out[i] = report
        y = np.uint64(report)
        for block in range((d + per - 1) // per):
            if block == own:
                b0, b1, b2, b3 = h0, h1, h2, h3
            else:
                b0, b1, b2, b3 = _philox(p, np.uint64(block), np.uint64(0), np.uint64(USE_HASH), k0, k1)
            if two:
                _tally(hist, b0, b1, b2, b3, block, d, np.uint64(0) if y == np.uint64(1) else ~np.uint64(0))
                continue
            for t2 in range(min(per, d - block * per)):
                if _hash_in(b0, b1, b2, b3, t2, g) == y:
                    counts[block * per + t2] += 1
    if two:
        _fold(hist, counts)


@njit(cache=True, nogil=True)
def hashed_support(person: np.ndarray, report: np.ndarray, k0: np.uint64, k1: np.uint64, g: np.uint64,
                   counts: np.ndarray) -> None:
    """``counts[c]`` += the persons whose hash of cell c (as :func:`hashed_night` hashes it) equals their
    ``report``: the support of every cell, summed as the hashes are drawn (d = ``len(counts)``)."""
    d = counts.shape[0]
    per = _cells_per_block(g)
    two = g == np.uint64(2)
    hist = np.zeros(((d + 7) // 8 if two else 0, 256), np.int64)
    for i in range(person.shape[0]):
        p, y = person[i], np.uint64(report[i])
        for block in range((d + per - 1) // per):
            b0, b1, b2, b3 = _philox(p, np.uint64(block), np.uint64(0), np.uint64(USE_HASH), k0, k1)
            if two:
                _tally(hist, b0, b1, b2, b3, block, d, np.uint64(0) if y == np.uint64(1) else ~np.uint64(0))
                continue
            for t in range(min(per, d - block * per)):
                if _hash_in(b0, b1, b2, b3, t, g) == y:
                    counts[block * per + t] += 1
    if two:
        _fold(hist, counts)
