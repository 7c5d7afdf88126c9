"""The central guarantee of a summary (ldp_dask.amplification), checked against independent exact computations of the
privacy loss at small n, with negative controls that a wrong n or halved noise must fail.

These are exact computations, not simulations: no false-failure rate. The bounds are upper bounds on δ (shuffle:
the clones reduction; noise sums: dp_accounting's pessimistic PLD), so the true δ at the stated ε must not exceed the
stated δ; the noise-sum bound is also held to within a factor 3 of the truth (it is nearly exact)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldp_dask.amplification import central_statement, noise_sum_epsilon, shuffle_delta, shuffle_epsilon


def _hockey(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    return float(np.sum(np.clip(p - math.exp(eps) * q, 0.0, None)))


def _warner_counts(ones: int, zeros: int, p: float) -> np.ndarray:
    """Law of the number of 1-reports of Warner's randomized response (truth kept with probability p)."""
    a = np.array([1.0])
    for _ in range(ones):
        a = np.convolve(a, [1 - p, p])
    for _ in range(zeros):
        a = np.convolve(a, [p, 1 - p])
    return a


def _warner_delta(eps: float, eps0: float, n: int) -> float:
    """The exact δ at ε of the released count of n Warner reports, worst case over the other n - 1 rows' values
    and over both orders of the neighbouring pair (one row 0 against 1)."""
    p = math.exp(eps0) / (1 + math.exp(eps0))
    worst = 0.0
    for m in range(n):  # m of the other rows hold 1
        rest = _warner_counts(m, n - 1 - m, p)
        one, zero = np.convolve(rest, [1 - p, p]), np.convolve(rest, [p, 1 - p])
        worst = max(worst, _hockey(one, zero, eps), _hockey(zero, one, eps))
    return worst


@pytest.mark.slow
@pytest.mark.parametrize("eps0,n,delta", [(1.0, 400, 1e-3), (2.0, 300, 1e-4), (0.5, 500, 1e-6)])
def test_the_shuffle_bound_holds_for_a_real_summary_and_a_wrong_n_is_caught(eps0, n, delta):
    stated = shuffle_epsilon(eps0, n, delta)
    assert stated < eps0 / 2  # amplification happens in these settings
    assert _warner_delta(stated, eps0, n) <= delta
    wrong = shuffle_epsilon(eps0, 20 * n, delta)  # the statement computed for 20 times the rows
    assert _warner_delta(wrong, eps0, n) > delta


def test_the_shuffle_bound_is_below_the_closed_form_and_falls_with_n():
    for eps0, n, delta in ((1.0, 10**6, 1e-9), (2.0, 10**5, 1e-8), (0.5, 10**4, 1e-6)):
        a = 8 * math.sqrt(math.exp(eps0) * math.log(4 / delta) / n)
        c = 8 * math.exp(eps0) / n
        closed = math.log(1 + (1 - math.exp(-eps0)) / (1 + math.exp(-eps0 - math.log(1 + a + c))) * (a + c))
        assert eps0 < math.log(n / (16 * math.log(4 / delta)))  # where Feldman et al.'s closed form holds
        assert shuffle_epsilon(eps0, n, delta) <= closed
    values = [shuffle_epsilon(1.0, n, 1e-9) for n in (10**3, 10**4, 10**5, 10**6)]
    assert values == sorted(values, reverse=True) and values[-1] < values[0] / 10
    assert shuffle_delta(1.0, 1.0, 1000) == 0.0 and shuffle_epsilon(3.0, 1, 1e-9) == 3.0


def _discrete_laplace(t: float, width: int) -> np.ndarray:
    k = np.arange(-width, width + 1)
    w = np.exp(-np.abs(k) / t)
    return w / w.sum()


@pytest.mark.slow
@pytest.mark.parametrize("t,n", [(2.0, 4), (1.0, 6)])
def test_the_noise_sum_bound_matches_a_direct_convolution_and_halved_noise_is_caught(t, n):
    delta = 1e-6
    stated = noise_sum_epsilon(t, n, delta)

    def true_delta(scale: float, eps: float) -> float:
        one = _discrete_laplace(scale, 400)
        f = np.array([1.0])
        for _ in range(n):
            f = np.convolve(f, one)
        up, down = np.r_[f, 0.0], np.r_[0.0, f]  # the sum's law, and the same one lattice step higher
        # two coordinates, one moved up and one down: a product of two one-coordinate pairs
        p, q = np.outer(up, down[::-1]), np.outer(down, up[::-1])
        return _hockey(p.ravel(), q.ravel(), eps)

    truth = true_delta(t, stated)
    assert truth <= delta and truth >= delta / 3, truth
    assert true_delta(t / 2, stated) > delta  # the same statement for a channel with half the noise is wrong


@pytest.mark.slow
@pytest.mark.parametrize("t,n", [(2.0, 1000), (1.0, 50_000), (4.0, 300_000)])
def test_the_noise_sum_bound_agrees_with_dp_accounting(t, n):
    """Google's dp_accounting builds the same privacy-loss distribution its own way (pessimistic discretisation,
    composition by convolution): its ε is an upper bound within 2% of ours, never below it by more than rounding."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    from ldp_dask.amplification import _discrete_laplace_sum_pmf

    pmf, width = _discrete_laplace_sum_pmf(t, n)
    keep = pmf > 1e-280
    k = np.arange(-width, width + 1)[keep]
    logp = np.log(pmf[keep])
    one = pld.from_two_probability_mass_functions(dict(zip((k + 1).tolist(), logp.tolist())),
                                                  dict(zip(k.tolist(), logp.tolist())),
                                                  value_discretization_interval=1e-5)
    theirs = one.self_compose(2).get_epsilon_for_delta(1e-9)
    ours = noise_sum_epsilon(t, n, 1e-9)
    assert ours <= theirs * (1 + 1e-6) + 1e-5 and theirs <= ours * 1.02 + 1e-5, (ours, theirs)


def test_what_a_release_states():
    from ldp_dask.channels import HybridMean, LaplaceHistogram

    h = LaplaceHistogram(1.0, 16, (0.0, 1.0))
    s = central_statement(h, 100_000)
    assert s["unit"] == "row" and s["units"] == 100_000 and s["local_epsilon"] == 1.0 and s["delta"] == 1e-9
    # the noise-sum value is taken on a grid of n below (fewer units: a valid, slightly larger ε)
    assert noise_sum_epsilon(2.0, 100_000) <= s["epsilon"] <= 1.12 * noise_sum_epsilon(2.0, 100_000)
    assert s["epsilon"] < shuffle_epsilon(1.0, 100_000) / 2
    assert s["epsilon"] < 0.01 and "noise" in s["method"]
    assert central_statement(h, 100_000, mode="rows") is None  # rows mode publishes each report
    assert central_statement(h, 100_000, longitudinal=True) is None
    kept = central_statement(h, 100_000, among=2_000)  # the smallest kept partition bounds it
    assert kept["units"] == 2_000 and kept["epsilon"] > s["epsilon"] * 3
    person = central_statement(LaplaceHistogram(0.25, 16, (0.0, 1.0)), 400_000, unit="user", reports_per_unit=4)
    assert person["units"] == 100_000 and person["local_epsilon"] == 1.0 and "shuffl" in person["method"]
    # the shuffle value on its finer grid: at most 2^(1/16) fewer units, ε ∝ 1/√n about 2% larger at most
    hybrid = central_statement(HybridMean(1.0, (0.0, 1.0)), 100_000)["epsilon"]
    assert shuffle_epsilon(1.0, 100_000) <= hybrid <= 1.025 * shuffle_epsilon(1.0, 100_000)
