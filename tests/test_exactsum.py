import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ldp_dask import exactsum


def test_matches_correctly_rounded_sum_in_any_order():
    rng = np.random.default_rng(0)
    parts = [rng.laplace(size=7) * 10 ** rng.uniform(-25, 15, size=7) for _ in range(64)]
    limbs = [exactsum.from_float(p) for p in parts]
    expected = np.array([math.fsum(p[i] for p in parts) for i in range(7)])
    forward = exactsum.to_float(exactsum.add(*limbs))
    backward = exactsum.to_float(exactsum.add(*limbs[::-1]))
    tree = exactsum.to_float(exactsum.add(*(exactsum.add(*limbs[i:i + 3]) for i in range(0, 64, 3))))
    assert np.array_equal(forward, expected)
    assert np.array_equal(backward.view(np.int64), forward.view(np.int64))
    assert np.array_equal(tree.view(np.int64), forward.view(np.int64))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-1e25, max_value=1e25, allow_nan=False, allow_infinity=False),
                min_size=1, max_size=40))
def test_property_exact_for_representable_values(values):
    # exact whenever every value is a multiple of 2^-100 (true above ~2^-47 in magnitude)
    values = [v for v in values if abs(v) > 2.0**-40 or v == 0.0]
    if not values:
        return
    total = exactsum.to_float(exactsum.add(*(exactsum.from_float(np.array([v])) for v in values)))
    assert total[0] == math.fsum(values)


def test_rejects_non_finite():
    import pytest

    with pytest.raises(OverflowError):
        exactsum.from_float(np.array([np.nan]))
    with pytest.raises(OverflowError):
        exactsum.from_float(np.array([2.0**100]))
