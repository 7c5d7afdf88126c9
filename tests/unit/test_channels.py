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

import ldp_dask
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


# --- fused kernels: the numpy references' numbers, and sums that add over pieces ------------------------------
@pytest.fixture(params=["numpy", "fused"])
def counting(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once on each counting path: numpy in chunks (of 1,000 values here, so that the tests' blocks
    span several), and the fused kernels (a process switches to them after FUSED_AFTER values; here at once, or
    never)."""
    from ldp_dask.channels import base

    if request.param == "fused":
        monkeypatch.setattr(base, "_counted", base.FUSED_AFTER)
    else:
        monkeypatch.setattr(base, "FUSED_AFTER", 1 << 62)
        monkeypatch.setattr(base, "_counted", 0)
        monkeypatch.setattr(base, "CHUNK", 1000)
    return str(request.param)


def test_a_process_switches_to_the_kernels_after_counting_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    from ldp_dask.channels import base

    monkeypatch.setattr(base, "_counted", 0)
    monkeypatch.setattr(base, "FUSED_AFTER", 10_000)
    assert [base.use_fused(n) for n in (100, 6000, 6000, 5000, 100)] == [False, False, False, True, False]


@pytest.mark.parametrize("domain", [(0.0, 1.0), (-3.5, 17.25), (0, 7), (1e9, 1e9 + 3.0)])
@pytest.mark.parametrize("cells", [1, 3, 7, 256, 1000, (1 << 16) + 3])
def test_fused_grid_counts_are_the_numpy_cells(domain: tuple[float, float], cells: int, counting: str) -> None:
    from ldp_dask.channels.base import grid_counts, grid_index

    lo, hi = domain
    rng = np.random.default_rng(cells)
    edges = lo + (hi - lo) / cells * np.arange(cells)  # values on the cells' edges, where rounding would show
    x = np.concatenate([rng.uniform(lo, hi, 20_000), [lo, hi, np.nextafter(hi, lo)], edges[:5000]])
    got = grid_counts(x, domain, cells)
    assert got.dtype == np.int64
    assert np.array_equal(got, np.bincount(grid_index(x, domain, cells), minlength=cells))


@pytest.mark.parametrize("domain", [(0.0, 1.0), (-40.0, 2.5e6)])
def test_fused_lattice_sum_is_the_numpy_sum(domain: tuple[float, float], counting: str) -> None:
    ch = build_channel("mean", 1.0, domain)
    lo, hi = domain
    rng = np.random.default_rng(5)
    steps = lo + ch.granularity * (np.arange(10_000) + 0.5)  # exact half steps: round half to even in both
    x = np.concatenate([rng.uniform(lo, hi, 50_000), [lo, hi], steps[steps <= hi]])
    got = ch.exact_stats(x)["sum"]
    assert got.dtype == np.float64 and np.array_equal(got, np.array([ch._lattice(x).sum()]))


INTEGER_SUM_CHANNELS = [
    ("histogram", {"bins": 37}), ("histogram", {"bins": 1 << 17}), ("mean", {}), ("square-wave", {"n": 10**6}),
    ("wavelet", {"n": 10**6}), ("rr", {"categories": list(range(9))}),
]


@pytest.mark.parametrize(("name", "kw"), INTEGER_SUM_CHANNELS)
def test_integer_sums_add_exactly_over_pieces(name: str, kw: dict, counting: str) -> None:
    """A channel that says its exact sums are integers gets the statistics of a partition from its pieces' sums
    (tasks sum pieces as they read them): the pieces' sums must add up to the whole's, bit for bit."""
    rest = {k: v for k, v in kw.items() if k != "bins"}
    ch = build_channel(name, 1.0, (0.0, 1.0), kw.get("bins"), **rest) if name != "rr" else build_channel(name, 1.0, **kw)
    assert ch.integer_sums
    rng = np.random.default_rng(11)
    sizes = [70_000, 3, 5_000, 123_457]  # on both sides of the kernels' threshold
    parts = [ch.prepare(rng.integers(0, 9, s) if name == "rr" else rng.beta(2, 5, s))[0] for s in sizes]
    whole = ch.exact_stats(np.concatenate(parts))
    pieces = [ch.exact_stats(p) for p in parts]
    for k, v in whole.items():
        assert np.all(v == np.round(v))
        assert np.array_equal(v, sum(p[k] for p in pieces))
    assert not build_channel("mean", 1.0, (0.0, 1.0), noise="continuous").integer_sums


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64"])
@pytest.mark.parametrize("other", [False, True])
def test_integer_category_lookup_is_the_arrow_lookup(dtype: str, other: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Integer values of integer categories take a table lookup (the fused kernel: pyarrow's own path is the
    reference); its codes are pyarrow's ``index_in``'s."""
    from ldp_dask.channels import base

    monkeypatch.setattr(base, "_counted", base.FUSED_AFTER)
    import pyarrow.compute as pc

    from ldp_dask.channels.categorical import category_codes

    cats = [3, 0, 7, 5, 100, 2, 64]
    ch = build_channel("rr", 1.0, categories=cats, other=other)
    rng = np.random.default_rng(3)
    inside = rng.choice(np.array(cats), 30_000)
    x = inside.astype(dtype)
    ref = np.asarray(category_codes(x, pa_array(cats)).to_numpy(zero_copy_only=False), dtype=np.int64)
    got, clipped = ch.prepare(x)
    assert clipped == 0 and got.dtype == np.int64 and np.array_equal(got, ref)
    import pyarrow as pa

    for column in (pa.array(x), pa.chunked_array([pa.array(x)])):  # as a Parquet column arrives
        assert np.array_equal(ch.prepare(column)[0], ref)
    outside = np.concatenate([inside, [1, 4, 99, 101, 127]]).astype(dtype)
    if not other:
        with pytest.raises(ldp_dask.InputDataError, match="outside the declared categories"):
            ch.prepare(outside)
        return
    codes = category_codes(outside, pa_array(cats))
    ref = np.asarray(pc.fill_null(codes, len(cats)).to_numpy(zero_copy_only=False), dtype=np.int64)
    assert np.array_equal(ch.prepare(outside)[0], ref)
    if np.dtype(dtype).kind == "i":
        neg = np.array([-1, -128, 3], dtype=dtype)
        assert ch.prepare(neg)[0].tolist() == [len(cats), len(cats), 0]


def pa_array(values: list) -> object:
    import pyarrow as pa

    return pa.array(values)


@pytest.mark.parametrize("level", [0, 1, 5, 10, 17])
@pytest.mark.parametrize("domain", [(0.0, 1.0), (-2.0, 3.0)])
def test_fused_haar_counts_are_the_numpy_bins(level: int, domain: tuple[float, float], counting: str) -> None:
    """Haar's level-J counts (one fused pass) are those of its numpy reference, t = (x − lo)/width clipped,
    ⌊2^J t⌋ with t = 1 in the last bin; the adaptive channel's finest counts likewise."""
    from ldp_dask.channels.haar import _bin_index

    lo, hi = domain
    rng = np.random.default_rng(level)
    edges = lo + (hi - lo) * np.arange(min(1 << level, 4096)) / (1 << level)
    x = np.concatenate([rng.uniform(lo, hi, 30_001), [lo, hi, np.nextafter(hi, lo)], edges])
    ch = build_channel("haar", 1.0, domain, level=level)
    ref = np.bincount(_bin_index(ch.to_unit(x), 1 << level), minlength=1 << level)
    assert np.array_equal(ch.exact_stats(x)["sum"], ref * ch.c)
