"""Channel privacy and the exact-in-distribution summary statistics.

False-failure rates are stated per test; seeds are fixed, so each test is
deterministic, and each rate bounds the chance that a correct implementation
would have been flagged with a random seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldp_dask import LaplaceHistogram, LaplaceMean, LdpDaskError
from ldp_dask.channels import build_channel, default_bins

Z = 4.5  # two-sided normal quantile: P(|N(0,1)| > 4.5) = 6.8e-6 per check


# --- ε accounting ----------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(
    eps=st.floats(min_value=1e-6, max_value=1e3, allow_nan=False),
    bins=st.integers(min_value=1, max_value=5000),
    lo=st.floats(min_value=-1e12, max_value=1e12, allow_nan=False),
    width=st.floats(min_value=1e-9, max_value=1e12, allow_nan=False),
)
def test_epsilon_spent_never_exceeds_requested(eps, bins, lo, width):
    hi = lo + width
    if not hi > lo:
        return
    for ch in (LaplaceHistogram(eps, bins, (lo, hi)), LaplaceMean(eps, (lo, hi))):
        assert ch.epsilon_spent() <= eps
        # and the calibration is tight: no more than one ulp of slack in the scale
        assert ch.epsilon_spent() >= eps * (1 - 1e-12)


def test_mean_sensitivity_covers_float_width():
    lo, hi = -0.1, 0.2  # hi - lo rounds in float
    ch = LaplaceMean(1.0, (lo, hi))
    assert ch.sensitivity >= (hi - lo) and ch.sensitivity >= 0.30000000000000004


# --- empirical density ratio on the worst-case event --------------------------------
def _log_ratio(p1_hits: int, p2_hits: int, n: int) -> tuple[float, float]:
    p1, p2 = p1_hits / n, p2_hits / n
    se = math.sqrt((1 - p1) / (n * p1) + (1 - p2) / (n * p2))  # delta method
    return math.log(p1 / p2), se


def _hist_event_log_ratio(ch: LaplaceHistogram, rng: np.random.Generator, n: int) -> tuple[float, float]:
    # x in bin 0, x' in bin 1; A = {z0 >= 1, z1 <= 0} attains the sup of the density ratio:
    # P(A|x) = 1/4, P(A|x') = e^{-2/b}/4, ratio e^{Δ/b} = e^{ε}.
    x = np.full(n, ch.edges[0] + 1e-9)
    xp = np.full(n, 0.5 * (ch.edges[1] + ch.edges[2]))
    z, zp = ch.privatize(x, rng), ch.privatize(xp, rng)
    hits = lambda a: int(np.count_nonzero((a[:, 0] >= 1) & (a[:, 1] <= 0)))  # noqa: E731
    return _log_ratio(hits(z), hits(zp), n)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_histogram_density_ratio_attains_but_never_exceeds_e_eps(eps):
    ch = LaplaceHistogram(eps, 4, (0.0, 1.0))
    lr, se = _hist_event_log_ratio(ch, np.random.default_rng(1), 200_000)
    assert lr <= eps + Z * se, "privacy violated on the worst-case event"
    assert lr >= eps - Z * se, "the channel spends less than it reports (over-noised)"


def test_histogram_audit_catches_halved_noise():
    ch = LaplaceHistogram(1.0, 4, (0.0, 1.0))
    ch.noise_scale /= 2  # deliberately miscalibrated: really spends 2ε
    lr, se = _hist_event_log_ratio(ch, np.random.default_rng(2), 200_000)
    assert lr > 1.0 + Z * se


def _mean_event_log_ratio(ch: LaplaceMean, rng: np.random.Generator, n: int) -> tuple[float, float]:
    # x = hi, x' = lo; A = {z >= hi}: P(A|hi) = 1/2, P(A|lo) = e^{-Δ/b}/2.
    lo, hi = ch.domain
    z, zp = ch.privatize(np.full(n, hi), rng)[:, 0], ch.privatize(np.full(n, lo), rng)[:, 0]
    return _log_ratio(int(np.count_nonzero(z >= hi)), int(np.count_nonzero(zp >= hi)), n)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_mean_density_ratio_attains_but_never_exceeds_e_eps(eps):
    ch = LaplaceMean(eps, (-3.0, 5.0))
    lr, se = _mean_event_log_ratio(ch, np.random.default_rng(3), 200_000)
    assert eps - Z * se <= lr <= eps + Z * se


def test_mean_audit_catches_halved_noise():
    ch = LaplaceMean(1.0, (-3.0, 5.0))
    ch.noise_scale /= 2
    lr, se = _mean_event_log_ratio(ch, np.random.default_rng(4), 200_000)
    assert lr > 1.0 + Z * se


# --- summary mode adds its noise once (its law: tests/statistical/test_laws.py) ----------------------------
def test_noise_is_added_once():
    # the released sum minus the exact sum has exactly the Laplace-sum variance 2 m b^2
    ch = LaplaceHistogram(1.0, 2, (0.0, 1.0))
    x = np.full(10, 0.25)
    rng = np.random.default_rng(6)
    noise = np.array([ch.stats(x, rng)["sum"] - ch.exact_stats(x)["sum"] for _ in range(20_000)])
    expected = len(x) * ch.noise_variance
    # sample variance of 20k draws: relative se = sqrt((kurtosis - 1)/N) ≈ sqrt(3.6/20000) = 1.3%
    rel = noise.var(axis=0) / expected
    assert np.all(np.abs(rel - 1) < 5 * 0.0134)


# --- construction errors ----------------------------------------------------------------
@pytest.mark.parametrize("eps", [0, -1, float("nan"), float("inf"), "1", None, True])
def test_bad_epsilon(eps):
    with pytest.raises(LdpDaskError, match="'epsilon' parameter"):
        LaplaceHistogram(eps, 4, (0, 1))
    with pytest.raises(LdpDaskError, match="'epsilon' parameter"):
        LaplaceMean(eps, (0, 1))


@pytest.mark.parametrize("bins", [0, -3, 2.5, 1 << 30])
def test_bad_bins(bins):
    with pytest.raises(LdpDaskError, match="'bins' parameter"):
        LaplaceHistogram(1.0, bins, (0, 1))


@pytest.mark.parametrize("domain", [(1, 1), (2, 1), (0, float("nan")), (float("-inf"), 0), (0,), "ab"])
def test_bad_domain(domain):
    with pytest.raises(LdpDaskError, match="domain"):
        LaplaceHistogram(1.0, 4, domain)


def test_prepare_rejects_bad_values_without_quoting_them():
    ch = LaplaceHistogram(1.0, 4, (0, 1))
    with pytest.raises(LdpDaskError, match="NaN"):
        ch.prepare(np.array([0.5, np.nan]))
    with pytest.raises(LdpDaskError, match="infinite"):
        ch.prepare(np.array([0.5, np.inf]))
    with pytest.raises(LdpDaskError, match="outside the declared domain") as info:
        ch.prepare(np.array([0.5, 123.456]))
    assert "123.456" not in str(info.value)
    x, n_clipped = ch.prepare(np.array([-5.0, 0.5, 123.456, 1.0]), clip=True)
    assert n_clipped == 2 and x.min() == 0 and x.max() == 1


def test_default_bins_follows_rate():
    # K = ceil((n eps^2)^(1/4)) for Lipschitz densities (docs/channels.md)
    assert default_bins(10**8, 1.0) == 100
    assert default_bins(10**4, 0.1) == math.ceil(100 ** 0.25)
    assert build_channel("histogram", 1.0, (0, 1), "auto", n=10**8).bins == 100


def test_every_laplace_channel_takes_the_noise_option():
    """--noise reaches every Laplace channel through build_channel (the wavelet channel once refused it)."""
    for name, kwargs in [("histogram", {"bins": 8}), ("mean", {}), ("wavelet", {"n": 10**6}), ("haar", {"n": 10**6}),
                         ("haar-adaptive", {"n": 10**6})]:
        bins = kwargs.pop("bins", None)
        for noise in ("continuous", "lattice"):
            ch = build_channel(name, 1.0, (0, 1), bins, noise=noise, **kwargs)
            assert ch.params()["noise"] == noise, name


def test_channel_options_are_declared_once_and_read_everywhere():
    """Each channel's options are declared in its module: the CLI offers a flag per option, the declared
    defaults are the ones the channel applies, and build_channel refuses options a channel does not take."""
    import inspect

    from ldp_dask.channels import CHANNELS, channel_options
    from ldp_dask.cli_parser import build_parser as _parser

    sub = next(a for a in _parser()._actions if a.dest == "command").choices["privatize"]
    flags = {f for a in sub._actions for f in a.option_strings}
    assert sub._option_string_actions["--channel"].choices == ["auto", *sorted(CHANNELS)]
    for name, (opt, _users) in channel_options().items():
        assert (opt.flag in flags) == opt.cli, name
    for cls in CHANNELS.values():
        for fn in (cls.__init__, getattr(cls, "_build", cls.build)):
            params = inspect.signature(fn).parameters
            for opt in cls.options:
                if opt.name in params and params[opt.name].default is not inspect.Parameter.empty:
                    assert params[opt.name].default == opt.default, (cls.name, fn.__name__, opt.name)
        with pytest.raises(LdpDaskError, match="do not apply"):
            build_channel(cls.name, 1.0, None if cls.value_kind == "categorical" else (0, 1), n=100,
                          not_an_option=1)
