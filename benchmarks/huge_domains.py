"""Frequencies over huge known domains: ``--channel auto``'s oracle against the subset-selection optimum, its decode
time, and the draw's throughput.

Run: ``python benchmarks/huge_domains.py`` (``--quick`` for a smoke run).
d ∈ {2^10, 2^16, 2^20} categories, ε ∈ {1, 2, 4, 6}, n = 10^6 rows in 16 categories (the other categories are the
rare ones whose variance is measured).

* Variance: n·Var θ̂ of a rare category — the closed form of auto's pick, of k-ary RR, optimized unary and Hadamard
  response, over the optimum of subset selection across every size k = 1..d − 1 (Ye and Barg 2018); and the
  measured n·E θ̂² of the categories no row holds, pooled over categories and data sets, over auto's closed form.
* Decode: seconds of ``ldp_dask.estimators.frequencies`` on one summary (the unbiased estimate, its intervals and
  the projection onto the simplex), median of 3.
* Draw: rows/s of the summary draw from the exact counts (``add_noise``), one core.

Rewrites the "huge-domains" section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_section  # noqa: E402

from ldp_dask.channels import SubsetSelection, choose_channel  # noqa: E402
from ldp_dask.channels.auto import frequency_variances  # noqa: E402
from ldp_dask.estimators import frequencies  # noqa: E402
from ldp_dask.summary import Summary  # noqa: E402

DS = (1 << 10, 1 << 16, 1 << 20)
EPSILONS = (1.0, 2.0, 4.0, 6.0)
HEAVY = 16


def optimum(eps: float, d: int) -> float:
    """n·Var of a rare category under subset selection at its best size, over every k in 1..d − 1."""
    e = math.exp(eps)
    k = np.arange(1, d, dtype=np.float64)
    p = k * e / (k * e + d - k)
    q = (p * (k - 1) + (1 - p) * k) / (d - 1)
    return float(np.min(q * (1 - q) / (p - q) ** 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    n = 100_000 if a.quick else 1_000_000
    rng = np.random.default_rng(2028)
    t0 = time.perf_counter()
    rows = []
    for d in DS:
        for eps in EPSILONS:
            ch = choose_channel(eps, categories=list(range(d)))
            p, q = ch.report_probabilities
            own = q * (1 - q) / (p - q) ** 2
            best = optimum(eps, d)
            pred = frequency_variances(eps, d)
            reps = max(2, (1 << 16) // d) if a.quick else max(3, (1 << 18) // d)
            sq, draw, decode = [], [], []
            for _ in range(reps):
                counts = np.bincount(rng.integers(0, HEAVY, n), minlength=d)
                t = time.perf_counter()
                sums = ch.add_noise({"counts": counts}, n, rng)
                draw.append(time.perf_counter() - t)
                s = Summary(ch, n, sums, {})
                t = time.perf_counter()
                f = frequencies(s)
                decode.append(time.perf_counter() - t)
                sq.append(f.raw[HEAVY:] ** 2)
            pooled = np.concatenate(sq)
            measured = n * float(np.mean(pooled))
            noise = 4 * math.sqrt(2 / len(pooled))  # 4 sd of a mean of squares of near-normal errors
            name = ch.name + (f" k={ch.k}" if ch.name == "subset" else f" {getattr(ch, 'encoding', '')}")
            rows.append(f"| {d:,} | {eps:g} | {name} | {own / best:.4f} | {pred['rr/kary'] / best:.3g} | "
                        f"{pred['rr/oue'] / best:.4f} | {pred['hadamard'] / best:.3g} | {measured / own:.3f} ± {noise:.3f} | "
                        f"{np.median(decode):.3f} | {n / np.median(draw):,.0f} |")
            print(rows[-1], f"({time.perf_counter() - t0:.0f} s)", flush=True)
    # subset selection's draw against the unary encoding's at the same d: what the O(k²) per row costs
    thr = []
    counts = np.bincount(rng.integers(0, HEAVY, n), minlength=1024)
    ch = SubsetSelection(4.0, list(range(1024)), subset_size=2)
    ch.add_noise({"counts": counts}, n, rng)  # the fused kernel compiled (or loaded) before timing
    for k in (1, 2, 4, 8, 16, 32, 64):
        ch = SubsetSelection(4.0, list(range(1024)), subset_size=k)
        t = time.perf_counter()
        ch.add_noise({"counts": counts}, n, rng)
        thr.append(f"| {k} | {n / (time.perf_counter() - t):,.0f} |")
    body = "\n".join([
        "## Frequencies over huge known domains: auto's oracle against the optimum "
        "(`benchmarks/huge_domains.py`)", "",
        f"Machine: {machine()}. n = {n:,} rows in {HEAVY} categories; the rare categories are the "
        f"other d − {HEAVY}. Run time {time.perf_counter() - t0:.0f} s. Variance columns: n·Var θ̂ of a rare "
        "category over the subset-selection optimum across every k (1 = optimal). measured/closed form: n·E θ̂² of "
        "the categories no row holds, pooled over categories and data sets, ± 4 sd of sampling noise. "
        "Decode: `frequencies()` on one summary (estimate, intervals, simplex projection), "
        "median of the data sets. Draw: the summary's exact-in-law draw from the counts, one core.", "",
        "| d | ε | auto's pick | pick / optimum | k-ary / optimum | OUE / optimum | Hadamard / optimum | "
        "measured / closed form | decode (s) | draw (rows/s) |",
        "|---|---|---|---|---|---|---|---|---|---|", *rows, "",
        "### Subset selection's draw against its size k (d = 1,024, ε = 4, one core)", "",
        "| k | rows/s |", "|---|---|", *thr,
    ])
    print(body)
    if not a.quick:
        write_section("huge-domains", body)


if __name__ == "__main__":
    main()
