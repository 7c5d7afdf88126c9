"""Coverage and width of local-DP quantile intervals: four distributions, two sizes, ε = 1.

Run: ``python benchmarks/quantile_coverage.py`` (part of ``make bench``). For each
distribution (Beta(2, 5) on [0, 1]; a lognormal, σ = 0.6, on [0, 8]; a bimodal
normal mixture on [0, 1]; uniform on [0, 1]) and n ∈ {2·10^4, 2·10^5}, R data
sets are drawn; each is released through the histogram channel with its
automatic K, through the default wavelet release (db4, the rows split among
three father levels) and through one wavelet father level at its automatic
level — summary mode, lattice noise, exactly as ``privatize`` releases them —
and the nine deciles' 95% intervals are made by each method of
``local_quantiles`` (histogram: "bins", the default; "band"; "bootstrap",
B = 200; wavelet: "envelope", the default; one level also "bootstrap",
B = 100). A
hit is an interval that holds the population decile. Reports per decile the
coverage (binomial standard error ≤ 1.1% at R = 400) and the mean width as a
fraction of the domain. Rewrites the "quantile-coverage" section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_section  # noqa: E402

from ldp_dask.channels import build_channel, linear_level  # noqa: E402
from ldp_dask.estimators import local_quantiles  # noqa: E402
from ldp_dask.summary import Summary  # noqa: E402

Q = np.arange(1, 10) / 10
SIZES = (20_000, 200_000)
#: (release, channel options, interval methods, bootstrap replicates); "one level" pins j0 = linear_level(n, ε)
RELEASES = (("histogram", {}, ("bins", "band", "bootstrap"), 200),
            ("wavelet", {"wavelet": "db4"}, ("envelope",), 100),
            ("wavelet one level", {"wavelet": "db4"}, ("envelope", "bootstrap"), 100))
DOMAINS = {"Beta(2, 5)": (0.0, 1.0), "lognormal(0, 0.6)": (0.0, 8.0), "bimodal mixture": (0.0, 1.0),
           "uniform": (0.0, 1.0)}


def sample(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    lo, hi = DOMAINS[name]
    if name == "Beta(2, 5)":
        x = rng.beta(2.0, 5.0, n)
    elif name == "lognormal(0, 0.6)":
        x = rng.lognormal(0.0, 0.6, n)
    elif name == "bimodal mixture":  # 0.6 N(0.3, 0.06²) + 0.4 N(0.72, 0.09²)
        x = np.where(rng.random(n) < 0.6, rng.normal(0.3, 0.06, n), rng.normal(0.72, 0.09, n))
    else:
        x = rng.random(n)
    return np.clip(x, lo, hi)  # the release clamps to the public domain (--clip)


def population_deciles(name: str) -> np.ndarray:
    lo, hi = DOMAINS[name]
    if name == "Beta(2, 5)":
        return stats.beta(2, 5).ppf(Q)
    if name == "lognormal(0, 0.6)":
        return np.clip(stats.lognorm(0.6).ppf(Q), lo, hi)
    if name == "uniform":
        return Q.copy()

    def cdf(v: float) -> float:
        return 0.6 * stats.norm.cdf(v, 0.3, 0.06) + 0.4 * stats.norm.cdf(v, 0.72, 0.09)

    from scipy.optimize import brentq

    return np.array([brentq(lambda v, q=q: cdf(v) - q, -1.0, 2.0, xtol=1e-12) for q in Q])


def width_scan(reps: int, write: bool) -> None:
    """How narrow can an assumption-free interval get? The envelope of one wavelet father level at every J against
    the bins interval of a histogram at every K, chosen with hindsight (section "envelope-width")."""
    from ldp_dask.bases import get_basis

    t0 = time.perf_counter()
    Js, Ks = range(1, 8), (4, 6, 8, 12, 16, 24, 32, 48)
    rows, ratios = [], []
    for name in ("Beta(2, 5)", "bimodal mixture"):
        lo, hi = DOMAINS[name]
        truth = population_deciles(name)
        for n in SIZES:
            rng = np.random.default_rng([n, 7])
            data = [sample(name, n, rng) for _ in range(reps)]
            widths: dict[str, float] = {}
            for key, ch in [(f"J={J}", build_channel("wavelet", 1.0, (lo, hi), n=n, j0=J)) for J in Js] + \
                    [(f"K={K}", build_channel("histogram", 1.0, (lo, hi), n=n, bins=K)) for K in Ks]:
                w, cover = 0.0, 1.0
                for x in data:
                    est = local_quantiles(Summary(ch, n, ch.stats(x, rng), {}), q=Q)
                    w += float(np.mean(est.ci_high - est.ci_low)) / (hi - lo) / reps
                    cover = min(cover, float(np.mean((est.ci_low <= truth) & (truth <= est.ci_high))))
                widths[key] = w
            env = min((k for k in widths if k.startswith("J")), key=widths.get)
            bins = min((k for k in widths if k.startswith("K")), key=widths.get)
            default_K = build_channel("histogram", 1.0, (lo, hi), n=n).bins
            ratios.append(widths[env] / widths[bins])
            rows.append(f"| {name} | {n:,} | " + " | ".join(f"{widths[f'J={J}']:.3f}" for J in Js) + f" | {env} "
                        f"{widths[env]:.3f} | {bins} {widths[bins]:.3f} (default K = {default_K}) | "
                        f"**{widths[env] / widths[bins]:.2f}** |")
            print(rows[-1], flush=True)
    s_phi = get_basis("db4").sup_sum["phi"]
    body = "\n".join([
        "### How narrow can an assumption-free interval get? (`benchmarks/quantile_coverage.py --width-scan`)", "",
        f"Machine: {machine()}. ε = 1, lattice noise, summary mode; {reps} data sets per row, the same data for every "
        "release; mean width of the nine deciles' intervals over the domain's, default level 95%. One db4 father "
        f"level at each J (`envelope`) against the histogram at each K in {list(Ks)} (`bins`), each chosen with "
        f"hindsight. Run time {time.perf_counter() - t0:.0f} s.", "",
        "| distribution | n | " + " | ".join(f"envelope J = {J}" for J in Js) + " | best envelope | best bins "
        "| best envelope / best bins |",
        "|---|---|" + "---|" * (len(Js) + 3), *rows, "",
        f"Best envelope over best bins: {min(ratios):.2f}–{max(ratios):.2f} (the goal of 1.5 asks it of the default "
        "release). Why no level gets there: the bins interval is at least one bin (1/K) plus its noise, the CDF of "
        "k bins having variance 8Kt/(nε²); the envelope is at least about one and a half father cells (1.5·2^−J) "
        f"plus its noise, a prefix of father coefficients having s_φ² = {s_phi ** 2:.2f} times that variance at "
        "2^J = K (s_φ = sup Σ_k |φ(u − k)|). Minimising a/x + b·x^{1/2} over the resolution x gives "
        "(3/2^{2/3})·a^{1/3}·b^{2/3}, so the best envelope is at least "
        f"1.5^{{1/3}}·s_φ^{{2/3}} = {1.5 ** (1 / 3) * s_phi ** (2 / 3):.2f} times the best bins interval in this "
        "model, before the envelope's slack and its dyadic levels.",
    ])
    print(body)
    if write:
        write_section("envelope-width", body)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=None, help="data sets per row (default 400; 40 with --width-scan)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--width-scan", action="store_true",
                    help="widths of the envelope at every level against the bins at every K (40 data sets by default)")
    a = ap.parse_args()
    if a.width_scan:
        width_scan(a.reps or 40, not a.no_write)
        return
    a.reps = a.reps or 400
    t0 = time.perf_counter()
    rows = []
    worst: dict[str, float] = {}
    for name, (lo, hi) in DOMAINS.items():
        truth = population_deciles(name)
        for n in SIZES:
            for kind, opts, methods, B in RELEASES:
                one = {"j0": linear_level(n, 1.0)} if kind == "wavelet one level" else {}
                ch = build_channel(kind.split()[0], 1.0, (lo, hi), n=n, **opts, **one)
                label = (f"histogram, K = {ch.bins}" if kind == "histogram" else
                         f"wavelet {ch.wavelet}, J = {ch.j0}" if one else
                         f"wavelet {ch.wavelet}, levels {', '.join(map(str, ch.levels))} (split)")
                rng = np.random.default_rng([n, len(name)])
                hits = {m: np.zeros(len(Q)) for m in methods}
                width = {m: np.zeros(len(Q)) for m in methods}
                for _ in range(a.reps):
                    x = sample(name, n, rng)
                    s = Summary(ch, n, ch.add_noise(ch.exact_stats(x), n, rng), {})
                    for m in methods:
                        est = local_quantiles(s, q=Q, interval=m, B=B, rng=rng)
                        hits[m] += (est.ci_low <= truth) & (truth <= est.ci_high)
                        width[m] += (est.ci_high - est.ci_low) / (hi - lo)
                for m in methods:
                    cov = hits[m] / a.reps
                    key = f"{kind} {m}"
                    worst[key] = min(worst.get(key, 1.0), float(cov.min()))
                    rows.append(f"| {name} | {n:,} | {label} | {m} | "
                                + " | ".join(f"{c:.3f}" for c in cov) + f" | {cov.min():.3f} | "
                                + f"{np.mean(width[m] / a.reps):.3f} |")
                    print(rows[-1], flush=True)
    body = "\n".join([
        "## Local-DP quantile intervals: coverage and width (`benchmarks/quantile_coverage.py`)", "",
        f"Machine: {machine()}. Histogram channel with its automatic K, the default wavelet release (db4, the "
        "rows split among the father levels J − 1, J, J + 1) and one wavelet father level at its automatic level J "
        "(the default before the split); ε = 1, lattice noise, summary mode; "
        f"{a.reps} data sets per row; nine deciles at nominal 95% (`bins`, `band`, `envelope`: all nine at once, "
        "a simultaneous band; `bootstrap`: each); population deciles as the truth. Width: mean "
        "interval length over the domain's. Bootstrap: B = 200 (histogram), 100 (wavelet). Run time "
        f"{time.perf_counter() - t0:.0f} s.", "",
        "| distribution | n | release | interval | " + " | ".join(f"q = {q:.1f}" for q in Q)
        + " | lowest | mean width |",
        "|---|---|---|---|" + "---|" * (len(Q) + 2), *rows, "",
        "Lowest coverage over every decile, distribution and size: "
        + ", ".join(f"{k} {v:.3f}" for k, v in worst.items()) + " (binomial standard error "
        f"{np.sqrt(0.95 * 0.05 / a.reps):.3f} at 95%). The defaults, `bins` (histogram) and `envelope` (wavelet), "
        "make no assumption about the density and hold at every edge at once, so they over-cover at each decile: "
        "`bins` is at least one bin wide, `envelope` about one and a half father cells (for the split release, "
        "the bounds of its three levels, each from its own rows, Bonferroni over all their grid points). `band` interpolates the "
        "band within bins and under-covers where a "
        "bin holds a fast-changing density (the lognormal's first bins); the bootstrap also ignores the bias "
        "projection pushes into the tails.",
    ])
    print(body)
    if not a.no_write:
        write_section("quantile-coverage", body)


if __name__ == "__main__":
    main()
