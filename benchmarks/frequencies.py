"""Frequency estimation under randomized response: error against n and d, and throughput.

Run: ``python benchmarks/frequencies.py`` (``--quick`` for a smoke run; needs the
``bench`` extra for pure-ldp and multi-freq-ldpy). ε = 1; a Zipf(1.1) distribution
over d ∈ {2, 10, 100, 1000} categories; n from 10^3 to 10^6.

* Error: L1 and L2 (‖θ̂ − θ‖) of the unbiased estimates of ldp_dask's encodings
  (summary mode, drawn exactly in distribution from the exact counts), next to
  the exact expected L2² Σ_j π_j(1 − π_j)/(n (p_in − p_out)²) (docs/channels.md: ≍ d/(nα²)
  for unary; k-ary grows like d²/(n e^α) for large d), and the same data through
  pure-ldp (DE = k-ary, UE) and multi-freq-ldpy (GRR, OUE) at n ≤ 10^5.
* Throughput: rows/s of the whole privatize call (summary mode, in-process, one
  core) against the libraries' per-user client + aggregator.

Rewrites the "frequencies" section of RESULTS.md and writes ``frequencies.png``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_section  # noqa: E402

import ldp_dask  # noqa: E402
from ldp_dask.channels import RandomizedResponse  # noqa: E402
from ldp_dask.estimators import frequencies  # noqa: E402
from ldp_dask.summary import Summary  # noqa: E402

EPS = 1.0
PNG = Path(__file__).with_name("frequencies.png")


def zipf(d: int) -> np.ndarray:
    w = 1.0 / np.arange(1, d + 1) ** 1.1
    return w / w.sum()


def theory_l2sq(ch: RandomizedResponse, theta: np.ndarray, n: int) -> float:
    p_in, p_out = ch.report_probabilities
    pi = p_out + (p_in - p_out) * theta
    return float(np.sum(pi * (1 - pi)) / (n * (p_in - p_out) ** 2))


def lib_estimates(name: str, x: np.ndarray, d: int) -> np.ndarray:
    warnings.simplefilter("ignore")
    if name == "pure-ldp DE":
        from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer

        c, s = DEClient(EPS, d), DEServer(EPS, d)
        for v in x:
            s.aggregate(c.privatise(int(v) + 1))
        return np.array(s.estimate_all(range(1, d + 1))) / len(x)
    if name == "pure-ldp UE":
        from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer

        c, s = UEClient(EPS, d), UEServer(EPS, d)
        for v in x:
            s.aggregate(c.privatise(int(v) + 1))
        return np.array(s.estimate_all(range(1, d + 1))) / len(x)
    from multi_freq_ldpy.pure_frequency_oracles import GRR, UE

    if name == "multi-freq-ldpy GRR":
        return np.asarray(GRR.GRR_Aggregator_MI([GRR.GRR_Client(int(v), d, EPS) for v in x], d, EPS))
    return np.asarray(UE.UE_Aggregator_MI([UE.UE_Client(int(v), d, EPS, True) for v in x], EPS, True))


LIBS = ("pure-ldp DE", "pure-ldp UE", "multi-freq-ldpy GRR", "multi-freq-ldpy OUE")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(2026)
    ds = (2, 10, 100, 1000)
    ns = (1_000, 10_000, 100_000, 1_000_000) if not a.quick else (1_000, 10_000)
    R = 3 if a.quick else 20
    lib_max_n = 10_000 if a.quick else 100_000
    t0 = time.perf_counter()
    rows, curves = [], {}
    for d in ds:
        theta = zipf(d)
        cats = list(range(d))
        encs = ["kary", "unary"] + (["warner"] if d == 2 else [])
        for n in ns:
            res: dict[str, list[tuple[float, float]]] = {}
            for _ in range(R):
                x = rng.choice(d, size=n, p=theta)
                counts = np.bincount(x, minlength=d)
                for enc in encs:
                    ch = RandomizedResponse(EPS, cats, encoding=enc)
                    summ = Summary(ch, n, ch.add_noise({"counts": counts}, n, rng), {})
                    for proj in ("none", "simplex"):
                        f = frequencies(summ, projection=proj).frequencies
                        key = f"ldp_dask {enc}" + ("+simplex" if proj == "simplex" else "")
                        res.setdefault(key, []).append((np.abs(f - theta).sum(), np.sum((f - theta) ** 2)))
            if n <= lib_max_n and not (d == 1000 and n > 10_000):
                x = rng.choice(d, size=n, p=theta)
                for lib in LIBS:
                    f = lib_estimates(lib, x, d)
                    res.setdefault(lib, []).append((np.abs(f - theta).sum(), np.sum((f - theta) ** 2)))
            for name, e in res.items():
                e = np.array(e)
                enc = name.split()[-1]
                th = (theory_l2sq(RandomizedResponse(EPS, cats, encoding=enc), theta, n)
                      if name.startswith("ldp_dask") and "+" not in name else None)
                rows.append(f"| {d} | {n:,} | {name} | {len(e)} | {e[:, 0].mean():.4g} | {math.sqrt(e[:, 1].mean()):.4g} | "
                            + (f"{math.sqrt(th):.4g} |" if th is not None else "– |"))
                curves.setdefault((d, name), []).append((n, math.sqrt(e[:, 1].mean())))
            print(f"  d={d} n={n:,} ({time.perf_counter() - t0:.0f} s)", flush=True)

    # throughput: the whole privatize call (summary mode, in-process) vs per-user library loops
    thr = []
    for d in (10, 1000):
        theta = zipf(d)
        n_ours = 2_000_000 if not a.quick else 200_000
        x = rng.choice(d, size=n_ours, p=theta)
        for enc in ("kary", "unary"):
            ch = RandomizedResponse(EPS, list(range(d)), encoding=enc)
            ldp_dask.privatize(x[:1000], channel=ch, seed=0)
            t = time.perf_counter()
            ldp_dask.privatize(x, channel=ch, seed=1)
            thr.append((d, f"ldp_dask {enc} (summary mode)", n_ours / (time.perf_counter() - t)))
        n_lib = 20_000 if d == 10 else 2_000
        xl = x[:n_lib]
        for lib in LIBS:
            lib_estimates(lib, xl[:50], d)  # warm-up (numba compilation in multi-freq-ldpy)
            t = time.perf_counter()
            lib_estimates(lib, xl, d)
            thr.append((d, lib, n_lib / (time.perf_counter() - t)))
    thr_rows = []
    for d in (10, 1000):
        ours = max(r for dd, nm, r in thr if dd == d and nm.startswith("ldp_dask"))
        for dd, nm, r in thr:
            if dd == d:
                thr_rows.append(f"| {d} | {nm} | {r:,.0f} | {ours / r:,.0f}× |")
    body = "\n".join([
        "## Frequencies: randomized response, ε = 1 (`benchmarks/frequencies.py`)", "",
        f"Machine: {machine()}. Zipf(1.1) over d categories; {R} data sets per (d, n) for ldp_dask, one for the "
        f"libraries (their per-user loops), which stop at n = {lib_max_n:,} (10,000 for d = 1000). "
        f"Run time {time.perf_counter() - t0:.0f} s. Plot: `benchmarks/frequencies.png`.", "",
        "Theory: the exact RMS L2 of the unbiased estimate, √(Σ_j π_j(1 − π_j)/(n (p_in − p_out)²)). "
        "+simplex: projected onto the simplex (post-processing). multi-freq-ldpy's aggregators return "
        "non-negative normalised estimates, to be compared with +simplex; its OUE is optimised unary "
        "encoding (Wang et al. 2017), which ldp_dask offers as `--encoding oue` (benchmarks/frequency_channels.py).", "",
        "| d | n | method | data sets | mean L1 | RMS L2 | theory RMS L2 |", "|---|---|---|---|---|---|---|", *rows, "",
        "### Throughput (rows/s, one core)", "",
        "| d | method | rows/s | ldp_dask's best over it |", "|---|---|---|---|", *thr_rows,
    ])
    print(body)
    plot(curves, ds)
    if not a.quick:
        write_section("frequencies", body)


def plot(curves, ds) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ds), figsize=(16, 4), dpi=110)
    for ax, d in zip(axes, ds):
        for (dd, name), pts in curves.items():
            if dd == d:
                n, e = zip(*pts)
                ax.loglog(n, e, "o-" if name.startswith("ldp_dask") else "s--", label=name, ms=3)
        ax.set_title(f"d = {d}")
        ax.set_xlabel("n")
        ax.set_ylabel("RMS L2 error")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(PNG)
    plt.close(fig)


if __name__ == "__main__":
    main()
