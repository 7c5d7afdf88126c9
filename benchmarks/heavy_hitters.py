"""Heavy hitters of a column nobody listed: ldp_dask's ``heavy-hitters`` release beside pure-ldp's PEM and TreeHist
(Cormode, Maddock and Maple 2021; the ``bench`` extra), on the same rows and ε.

Run: ``python benchmarks/heavy_hitters.py`` (``--quick`` for a smoke run).

* Data: (a) a Zipf(1.1) column over 10^6 distinct strings of six letters; (b) English words of at most 10 letters
  a–z drawn by their real frequencies (the ``wordfreq`` package's English list, top 10^5 words).
* Methods: ours (summary mode, defaults but ``max_bytes`` = the longest value; decoded with the public alphabet
  a–z, the alphabet the peers are given); pure-ldp 1.2.0's PEM and TreeHist,
  each with its count-mean-sketch oracle (k = 32 hash functions, m = 1,024; its default local-hashing oracle loops
  over the whole domain for every row, 26^6 = 3·10^8 steps here, which no run could finish). pure-ldp passes
  ``str`` to xxhash, which xxhash ≥ 2 refuses, and a None shape to numpy: the script adapts both (``_pure_ldp``).
* Metrics, K = 10: recall (true top 10 among the 10 listed), mean |f̂ − f| (share) over the true top-10
  values listed, and rows/s: privatize + aggregate per row for the peers (one core), the worker's pass
  (``prepare`` + summary draw) for ours on 10^6 rows (one core), its decode time apart.

Rewrites the "heavy-hitters" section of RESULTS.md. ``--profile EPS`` instead measures, on the Zipf strings at that
ε, how often each of the true first five values is listed (ours at the default estimate share and at 0.02, PEM;
``--reps`` runs each) and rewrites the "heavy-hitters-profile" section. ``--frontier EPS`` measures, on the same
strings, our recall and error at each estimate share of FRONTIER beside PEM's (``--reps`` runs each): the rows held
out for unbiased estimates are rows the search does not get; rewrites the "heavy-hitters-frontier" section.
"""

from __future__ import annotations

import argparse
import re
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_section  # noqa: E402

from ldp_dask.channels import HeavyHitters  # noqa: E402
from ldp_dask.estimators import heavy_hitters  # noqa: E402
from ldp_dask.summary import Summary  # noqa: E402

EPSILONS = (1.0, 2.0, 4.0)
K = 10
#: runs of each method and ε on the same rows (fresh randomness each): recall and error are their means, with
#: standard errors (at ε 1 a method lists one or two of the true top 10 per run, so few runs say little)
REPS = 12
#: the estimate shares of ``--frontier``
FRONTIER = (0.05, 0.10, 0.15, 0.20, 0.25)


class _Numpy:
    """numpy as pure-ldp 1.2.0 expects it: ``np.zeros(None)`` a 0-d array (numpy 2 refuses a None shape)."""

    def __getattr__(self, name: str) -> object:
        return getattr(np, name)

    @staticmethod
    def zeros(shape: object, *args: object, **kwargs: object) -> np.ndarray:
        return np.zeros(() if shape is None else shape, *args, **kwargs)  # type: ignore[call-overload]


def _pure_ldp() -> None:
    """pure-ldp 1.2.0 against today's libraries: it hashes ``str`` with xxhash, which xxhash ≥ 2 refuses (encode
    as UTF-8 first, as xxhash 1 did), and sizes a sketch server's unused array with a None shape."""
    import pure_ldp.core._freq_oracle_server as server
    import xxhash

    if getattr(xxhash, "_ldp_dask_shim", False):
        return
    server.np = _Numpy()
    x32, x64 = xxhash.xxh32, xxhash.xxh64
    xxhash.xxh32 = lambda d, seed=0: x32(d.encode() if isinstance(d, str) else d, seed=seed)
    xxhash.xxh64 = lambda d, seed=0: x64(d.encode() if isinstance(d, str) else d, seed=seed)
    xxhash._ldp_dask_shim = True


def zipf_strings(rng: np.random.Generator, n: int, d: int = 1_000_000) -> tuple[np.ndarray, np.ndarray]:
    codes = np.unique(rng.integers(0, 26**6, size=int(d * 1.01)))[:d]
    rng.shuffle(codes)
    letters = np.array(list(string.ascii_lowercase))
    digits = (codes[:, None] // 26 ** np.arange(5, -1, -1)) % 26
    vocab = np.array(["".join(r) for r in letters[digits]], dtype=object)
    w = 1.0 / np.arange(1, d + 1) ** 1.1
    return vocab, rng.choice(d, n, p=w / w.sum())


def english_words(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    import wordfreq

    words = [w for w in wordfreq.top_n_list("en", 100_000) if re.fullmatch(r"[a-z]{1,10}", w)]
    f = np.array([wordfreq.word_frequency(w, "en") for w in words])
    return np.array(words, dtype=object), rng.choice(len(words), n, p=f / f.sum())


def ours(values: list[str], eps: float, L: int, rng: np.random.Generator,
         **options: float) -> tuple[dict[str, float], float]:
    ch = HeavyHitters(eps, max_bytes=L, salt=int(rng.integers(0, 2**62)), **options)
    s = Summary(ch, len(values), ch.stats(ch.prepare(pa.array(values))[0], rng), {})
    t = time.perf_counter()
    r = heavy_hitters(s, top=K, alphabet=string.ascii_lowercase)
    return dict(zip(r.labels, r.raw)), time.perf_counter() - t


def peer(name: str, values: list[str], eps: float, L: int) -> tuple[dict[str, float], float]:
    _pure_ldp()
    from pure_ldp.core import generate_hash_funcs
    from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer
    from pure_ldp.heavy_hitters.prefix_extending import PEMClient, PEMServer
    from pure_ldp.heavy_hitters.treehistogram import TreeHistClient, TreeHistServer

    alpha = list(string.ascii_lowercase)
    fo_c, fo_s = CMSClient(eps, generate_hash_funcs(32, 1024), 1024), CMSServer(eps, 32, 1024)
    if name == "PEM":  # the padding is a letter of PEM's alphabet, or a short value could never be found
        kw = dict(epsilon=eps, start_length=1, max_string_length=L, fragment_length=1, alphabet=alpha + ["*"])
        cl, sv = PEMClient(fo_client=fo_c, **kw), PEMServer(fo_server=fo_s, **kw)
    else:
        kw = dict(epsilon=eps, fragment_length=1, max_string_length=L, alphabet=alpha)
        cl, sv = TreeHistClient(fo_client=fo_c, **kw), TreeHistServer(fo_server=fo_s, **kw)
    t = time.perf_counter()
    for v in values:
        sv.aggregate(cl.privatise(v))
    rate = len(values) / (time.perf_counter() - t)
    found, freq = sv.find_heavy_hitters(k=K)
    n = len(values)
    return {str(v).rstrip("*"): float(c) / n for v, c in zip(found, freq)}, rate


def worker_rates(column: pa.Array, L: int, rng: np.random.Generator) -> tuple[float, ...]:
    """Rows/s of a worker's pass over ``column`` on one core, best of 3 (compiled before timing): Arrow → fixed
    width (``prepare``), the hash-and-count kernel on the prepared rows (``exact_stats``), the fused pass from the
    Arrow strings (``counted``: what a worker runs), and that pass with the summary draw (the whole task)."""
    ch = HeavyHitters(2.0, max_bytes=L)
    ch.stats(ch.prepare(column[:1000])[0], rng)
    ch.counted(column[:1000])
    best = [0.0] * 4
    for _ in range(3):
        t0 = time.perf_counter()
        x = ch.prepare(column)[0]
        t1 = time.perf_counter()
        ch.exact_stats(x)
        t2 = time.perf_counter()
        del x
        ch.counted(column)
        t3 = time.perf_counter()
        m, _, exact = ch.counted(column)
        ch.add_noise(exact, m, rng)
        t4 = time.perf_counter()
        best = [max(b, len(column) / d) for b, d in zip(best, (t1 - t0, t2 - t1, t3 - t2, t4 - t3))]
    return tuple(best)


def score(listed: dict[str, float], truth: dict[str, float], top: set[str]) -> tuple[float, list[float]]:
    """Recall of the true top K, and |f̂ − f| of each true top-K value listed."""
    hit = top & set(listed)
    return len(hit) / K, [abs(listed[v] - truth[v]) for v in hit]


def _mean(scores: list[tuple[float, list[float]]], digits: int = 2) -> str:
    """Two table cells: the mean recall over the runs ± its standard error, and the mean |f̂ − f| over every true
    top-K value listed in any run ± its standard error, with how many values it averages (in brackets)."""
    recall = np.array([r for r, _ in scores])
    errs = np.array([e for _, es in scores for e in es])
    cell = f"{recall.mean():.{digits}f} ± {recall.std(ddof=1) / np.sqrt(len(recall)):.{digits}f} | "
    if len(errs) == 0:
        return cell + "– [0]"
    se = errs.std(ddof=1) / np.sqrt(len(errs)) if len(errs) > 1 else float("nan")
    return cell + f"{errs.mean():.4f} ± {se:.4f} [{len(errs)}]"


def profile(eps: float, reps: int) -> None:
    """How often each of the true first five Zipf values is listed, and the recall of the top K, by method
    (module docstring)."""
    n, rng, t0 = 100_000, np.random.default_rng(2029), time.perf_counter()
    vocab, x = zipf_strings(rng, n)
    values = vocab[x].tolist()
    counts = np.bincount(x, minlength=len(vocab))
    order = np.argsort(-counts, kind="stable")[:K]
    first = vocab[order]
    methods: dict[str, Callable[[], dict[str, float]]] = {
        f"ours (estimate share {HeavyHitters(eps).estimate_share:g}, the default)": lambda: ours(values, eps, 6, rng)[0],
        "ours (estimate share 0.02)": lambda: ours(values, eps, 6, rng, estimate_share=0.02)[0],
        "PEM": lambda: peer("PEM", values, eps, 6)[0]}
    rows = []
    for name, run in methods.items():
        listed = np.array([[v in got for v in first] for got in (run() for _ in range(reps))], dtype=float)
        top10 = listed.sum(axis=1) / K
        rows.append(f"| {name} | " + " | ".join(f"{p:.2f}" for p in listed.mean(axis=0)[:5])
                    + f" | {top10.mean():.3f} ± {top10.std(ddof=1) / np.sqrt(reps):.3f} |")
        print(rows[-1], flush=True)
    body = "\n".join([
        "## Heavy hitters: which of the first values each method lists (`benchmarks/heavy_hitters.py --profile`)",
        "", f"Machine: {machine()}. The Zipf(1.1) strings of the section above (n = {n:,}), ε = {eps:g}, K = {K}, "
        f"{reps} runs a method (fresh randomness). Shares (true, this sample): "
        + ", ".join(f"{c / n:.4f}" for c in counts[order[:5]])
        + f". Run time {time.perf_counter() - t0:.0f} s.", "",
        "| method | 1st | 2nd | 3rd | 4th | 5th | recall (top 10) |",
        "|---|---|---|---|---|---|---|", *rows])
    print(body)
    write_section("heavy-hitters-profile", body)


def frontier(eps: float, reps: int) -> None:
    """Recall and error on the Zipf strings at ``eps`` by estimate share, ours, beside PEM's (module docstring)."""
    n, rng, t0 = 100_000, np.random.default_rng(2029), time.perf_counter()
    vocab, x = zipf_strings(rng, n)
    values = vocab[x].tolist()
    truth_arr = np.bincount(x, minlength=len(vocab)) / n
    truth = {vocab[i]: truth_arr[i] for i in np.flatnonzero(truth_arr)}
    top = set(vocab[np.argsort(-truth_arr, kind="stable")[:K]])
    rows = []
    for share in FRONTIER:
        runs = [score(ours(values, eps, 6, rng, estimate_share=share)[0], truth, top) for _ in range(reps)]
        rows.append(f"| ours, estimate share {share:g} | {_mean(runs, 3)} |")
        print(rows[-1], flush=True)
    rows.append(f"| PEM | {_mean([score(peer('PEM', values, eps, 6)[0], truth, top) for _ in range(reps)], 3)} |")
    body = "\n".join([
        "## Heavy hitters: recall and error by estimate share (`benchmarks/heavy_hitters.py --frontier`)", "",
        f"Machine: {machine()}. The Zipf(1.1) strings of the section above (n = {n:,}), ε = {eps:g}, K = {K}, "
        f"{reps} runs a row (fresh randomness); recall and error as above. Run time {time.perf_counter() - t0:.0f} s.",
        "", "| method | recall | error |", "|---|---|---|", *rows])
    print(body)
    write_section("heavy-hitters-frontier", body)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=REPS, help=f"runs of each method and ε (default {REPS})")
    ap.add_argument("--profile", type=float, metavar="EPS", help="the listing profile at this ε (module docstring)")
    ap.add_argument("--frontier", type=float, metavar="EPS", help="recall and error by estimate share at this ε")
    a = ap.parse_args()
    if a.profile is not None:
        profile(a.profile, a.reps)
        return
    if a.frontier is not None:
        frontier(a.frontier, a.reps)
        return
    n = 20_000 if a.quick else 100_000
    rng = np.random.default_rng(2029)
    t0 = time.perf_counter()
    rows, passes = [], []
    speed = []
    for label, make, L in (("Zipf(1.1), 10^6 strings", zipf_strings, 6), ("English words", english_words, 10)):
        vocab, x = make(rng, n)
        values = vocab[x].tolist()
        truth_arr = np.bincount(x, minlength=len(vocab)) / n
        truth = {vocab[i]: truth_arr[i] for i in np.flatnonzero(truth_arr)}
        top = set(vocab[np.argsort(-truth_arr, kind="stable")[:K]])
        for eps in EPSILONS:
            runs = [ours(values, eps, L, rng) for _ in range(a.reps)]
            line = f"| {label} | {eps:g} | {_mean([score(got, truth, top) for got, _ in runs])} |"
            for name in ("PEM", "TreeHist"):
                got_p = [peer(name, values, eps, L) for _ in range(a.reps)]
                line += f" {_mean([score(found, truth, top) for found, _ in got_p])} |"
                speed.extend(rate for _, rate in got_p)
            rows.append(line + f" {np.median([d for _, d in runs]):.2f} |")
            print(rows[-1], f"({time.perf_counter() - t0:.0f} s)", flush=True)
        # our worker pass on 10^7 rows of this column, one core
        big = pa.array(vocab[rng.choice(x, 10_000_000 if not a.quick else 200_000)])
        rates = worker_rates(big, L, rng)
        passes.append(f"| {label} | {len(big):,} | " + " | ".join(f"{r:.3g}" for r in rates) + " |")
        speed.append(-rates[3])
        del big
    ours_rate = [-s for s in speed if s < 0]
    peer_rate = [s for s in speed if s > 0]
    body = "\n".join([
        "## Heavy hitters of an unlisted column beside pure-ldp's PEM and TreeHist (`benchmarks/heavy_hitters.py`)",
        "",
        f"Machine: {machine()}. n = {n:,} rows, the same rows for every method; top "
        f"K = {K}; each figure the mean of {a.reps} runs (fresh randomness) ± its standard error. pure-ldp "
        "1.2.0's PEM and TreeHist run with its count-mean-sketch oracle (32 × 1,024; its "
        "local-hashing oracle loops over the whole domain for every row). Recall: of the true top 10, the share "
        "listed. Error: mean |f̂ − f| (share) over every true top-10 value a method listed in any run, with the "
        "number of such values in brackets. Decode: our "
        f"driver's search and estimates (s). Run time {time.perf_counter() - t0:.0f} s.", "",
        "| data | ε | ours recall | ours error | PEM recall | PEM error | TreeHist recall | TreeHist error | "
        "our decode (s) |",
        "|---|---|---|---|---|---|---|---|---|", *rows, "",
        f"Throughput, one core: ours {min(ours_rate):,.0f}–{max(ours_rate):,.0f} rows/s (the whole task: the "
        f"fused count and the summary draw); pure-ldp {min(peer_rate):,.0f}–{max(peer_rate):,.0f} rows/s "
        f"(privatize + aggregate per row): **{min(ours_rate) / max(peer_rate):,.0f}×** at the least.", "",
        "Our worker's pass by step, rows/s on one core (best of 3): Arrow strings → fixed-width bytes (prepare), "
        "the hash-and-count kernel over those rows (count), the fused pass straight from the Arrow strings that a "
        "worker runs (fused), and the whole task (fused + the draw of G·m binomials).", "",
        "| column | rows | prepare | count | fused | whole task |", "|---|---|---|---|---|---|", *passes,
    ])
    print(body)
    if not a.quick:
        write_section("heavy-hitters", body)


if __name__ == "__main__":
    main()
