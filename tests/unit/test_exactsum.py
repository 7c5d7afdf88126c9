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


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=-(2**62), max_value=2**62), min_size=1, max_size=30),
       st.integers(min_value=0, max_value=90))
def test_lattice_sums_are_correctly_rounded(ints, shift):
    """Sums of lattice values (integers × 2^-shift) take the vectorized path when their sum is a float64, and
    the Python one when it is not (too many bits): both give the correctly rounded sum."""
    values = [float(i) * 2.0**-shift for i in ints]
    values = [v for v in values if abs(v) < exactsum.MAX_ABS / 64]
    if not values:
        return
    total = exactsum.to_float(exactsum.add(*(exactsum.from_float(np.array([v])) for v in values)))
    assert total[0] == math.fsum(values)


def test_values_that_are_not_floats_round_to_nearest_even():
    # exact sums with more than 53 significant bits: 2^53 + 1 (a tie: rounds to even), 1 + 2^-60, -(2^60 + 3)
    cases = {(2.0**53, 1.0): 2.0**53, (2.0**53, 3.0): 2.0**53 + 4, (1.0, 2.0**-60): 1.0,
             (-(2.0**60), -3.0): -(2.0**60), (0.1, 0.2): math.fsum([0.1, 0.2])}
    for parts, expected in cases.items():
        total = exactsum.to_float(exactsum.add(*(exactsum.from_float(np.array([v])) for v in parts)))
        assert total[0] == expected == math.fsum(parts), parts


def test_fused_limbs_equal_the_numpy_limbs():
    # the kernel repeats the numpy steps value by value: the same canonical integers, signs and scales mixed
    rng = np.random.default_rng(4)
    v = np.concatenate([rng.normal(0, 1, 3000) * 10.0 ** rng.integers(-40, 29, 3000), [0.0, -0.0, 2.0**-1074,
                        -(2.0**98), 2.0**50, -(2.0**50), 1 - 2.0**-53, -1.5 * 2.0**-100], rng.integers(-9, 9, 2000)])
    fused = exactsum.from_float(np.tile(v, 2))  # over _KERNEL_MIN values: the kernel
    assert len(v) * 2 >= exactsum._KERNEL_MIN
    assert np.array_equal(fused, np.tile(exactsum._from_float_numpy(v), (2, 1)))
    ints = v[-2000:]  # exact to 2^-100: integers come back as they went in
    assert np.array_equal(exactsum.to_float(fused[len(v) - 2000: len(v)]), ints)
