"""A plan's row split: the shares as whole lots of 2^16 draws, and the keyed draw that assigns rows to them."""

from __future__ import annotations

import numpy as np
import pytest

from ldp_dask.plans.tasks import ASSIGN_BITS, assign_rows, row_lots


@pytest.mark.parametrize("shares", [[0.5, 0.5], [0.383, 0.006, 0.008, 0.603], [1e-9, 1.0, 2.0], [1.0] * 300])
def test_lots_add_up_and_round_each_share_by_less_than_one_lot(shares):
    lots = row_lots(shares)
    total = 1 << ASSIGN_BITS
    assert lots.sum() == total and (lots >= 1).all()
    exact = np.asarray(shares) / np.sum(shares) * total
    assert np.all(np.abs(lots - exact) < 1 + (lots == 1))  # a tiny share is raised to its one lot


def test_rows_are_drawn_with_their_lots_probabilities_whatever_the_piece():
    # 2M rows of one piece: each statistic's count is Binomial(m, lots/2^16); within 4.5 sd for all four (false
    # failure < 3e-5). Another piece under the same key draws differently; the same piece again, identically.
    lots = tuple(int(x) for x in row_lots([0.1, 0.2, 0.3, 0.4]))
    m = 2_000_000
    to = assign_rows(b"k" * 32, b"3", m, lots)
    p = np.array(lots) / (1 << ASSIGN_BITS)
    counts = np.bincount(to, minlength=4)
    assert np.all(np.abs(counts - m * p) <= 4.5 * np.sqrt(m * p * (1 - p))), counts
    assert np.array_equal(to, assign_rows(b"k" * 32, b"3", m, lots))
    assert not np.array_equal(to[:1000], assign_rows(b"k" * 32, b"4", m, lots)[:1000])
    assert not np.array_equal(to[:1000], assign_rows(b"j" * 32, b"3", m, lots)[:1000])
