"""Digests of released summaries for the benchmarks' channel configurations.

A refactoring must not change what is released: for the same key and the same
partitioning, every summary must stay bit-identical. This script privatizes a
fixed data set with every channel configuration the benchmarks use (both noise
modes, summary and rows modes, in memory, from Parquet in this process and on a
LocalCluster) and prints one SHA-256 per configuration. Central quantiles,
goodness-of-fit and local-quantile results are digested too (their values are
not summaries, but a change there is worth knowing about).

    python benchmarks/digests.py --write before.json      # on the old code
    python benchmarks/digests.py --check before.json      # on the new code: exit 1 on any difference
"""

from __future__ import annotations

import os

# The continuous wavelet channel's exact sums come from matrix products (ldp_dask.bases), whose last bits depend on
# the BLAS kernel OpenBLAS picks for the processor: on an AVX-512 machine (SkylakeX kernels) 9 of the 98 digests
# differ from those recorded with the Haswell/Zen kernels, before and after any change alike. One kernel for every
# machine, set before numpy loads (the Dask workers inherit it), makes the digests comparable across machines.
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
# Every release is recorded in a ledger unless told otherwise: these go to a throwaway one, never the user's.
os.environ.setdefault("LDP_DASK_LEDGER", os.path.join(__import__("tempfile").mkdtemp(prefix="ldp-digests-ledger-"),
                                                      "ledger.sqlite"))

import argparse
import hashlib
import json
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ldp_dask  # noqa: E402
from ldp_dask import gof  # noqa: E402
from ldp_dask.central import quantiles  # noqa: E402
from ldp_dask.channels import (  # noqa: E402
    HaarAdaptive,
    HaarLaplace,
    LaplaceHistogram,
    LaplaceMean,
    RandomizedResponse,
    WaveletLaplace,
    adaptive_levels,
    build_channel,
)
from ldp_dask.estimators import local_quantiles  # noqa: E402

N = 60_000
DOMAIN = (0.0, 1.0)
CATEGORIES = [f"c{i:02d}" for i in range(16)]


def channels() -> dict[str, object]:
    out: dict[str, object] = {}
    for noise in ("lattice", "continuous"):
        out.update({
            f"histogram K=256 {noise}": LaplaceHistogram(1.0, 256, DOMAIN, noise=noise),
            f"histogram K=32 eps=0.5 {noise}": LaplaceHistogram(0.5, 32, DOMAIN, noise=noise),
            f"mean {noise}": LaplaceMean(1.0, DOMAIN, noise=noise),
            f"wavelet db4 auto {noise}": build_channel("wavelet", 1.0, DOMAIN, n=10**8, noise=noise),
            f"wavelet db4 3-7 {noise}": WaveletLaplace(1.0, DOMAIN, 3, 7, noise=noise),
            f"wavelet sym4 paper {noise}": WaveletLaplace(2.0, DOMAIN, 2, 6, wavelet="sym4", calibration="paper",
                                                          noise=noise),
            f"haar J=5 {noise}": HaarLaplace(1.0, 5, DOMAIN, noise=noise),
            f"haar auto {noise}": build_channel("haar", 1.0, DOMAIN, n=10**8, noise=noise),
            f"haar-adaptive rows {noise}": HaarAdaptive(1.0, adaptive_levels(10_000, 1.0, span=None), DOMAIN, "rows", noise),
            f"haar-adaptive epsilon {noise}": HaarAdaptive(1.0, adaptive_levels(10_000, 1.0, span=None), DOMAIN, "epsilon",
                                                           noise),
        })
    for enc in ("kary", "unary"):
        out[f"rr {enc} d=16"] = RandomizedResponse(1.0, CATEGORIES, encoding=enc)
    out["rr warner"] = RandomizedResponse(1.0, CATEGORIES[:2], encoding="warner")
    return out


def digest(summary: ldp_dask.Summary) -> str:
    h = hashlib.sha256()
    h.update(str(summary.n).encode())
    for k in sorted(summary.sums):
        h.update(k.encode())
        h.update(np.ascontiguousarray(summary.sums[k], dtype=np.float64).tobytes())
    return h.hexdigest()[:24]


def digest_values(*arrays: object) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes())
    return h.hexdigest()[:24]


def data(work: Path) -> dict[str, object]:
    rng = np.random.default_rng(20261122)
    x = rng.beta(2, 5, N)
    cats = np.array(CATEGORIES)[rng.integers(0, 16, N)]
    two = np.array(CATEGORIES[:2])[rng.integers(0, 2, N)]
    d = work / "data"
    d.mkdir()
    for i, (a, b) in enumerate(((0, 25_000), (25_000, 45_000), (45_000, N))):
        pq.write_table(pa.table({"x": x[a:b], "c": pa.array(cats[a:b]), "w": pa.array(two[a:b])}),
                       d / f"part-{i}.parquet", row_group_size=7_000)
    return {"x": x, "c": cats, "w": two, "dir": str(d)}


def run(work: Path) -> dict[str, str]:
    from distributed import Client, LocalCluster

    src = data(work)
    out: dict[str, str] = {}
    chans = channels()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR) as lc, Client(lc) as client:
        for name, ch in chans.items():
            col = "x" if ch.value_kind == "numeric" else ("w" if "warner" in name else "c")
            mem = src[col]
            out[f"{name} | memory"] = digest(ldp_dask.privatize(mem, column=col, channel=ch, seed=7,
                                                                partition_rows=16_384))
            out[f"{name} | parquet local"] = digest(ldp_dask.privatize(src["dir"], column=col, channel=ch,
                                                                       client="local", seed=7))
            out[f"{name} | parquet cluster"] = digest(ldp_dask.privatize(src["dir"], column=col, channel=ch,
                                                                         client=client, seed=7, split_every=3))
            if ch.dim <= 300:
                rows = work / f"rows-{len(out)}"
                out[f"{name} | rows mode"] = digest(ldp_dask.privatize(src["dir"], column=col, channel=ch,
                                                                       client="local", seed=7, mode="rows",
                                                                       rows_path=str(rows)))
        x = src["x"]
        for method in ("joint-exp", "inverse-sensitivity", "histogram", "laplace"):
            r = quantiles(x[:5000], q=[0.1, 0.5, 0.9], epsilon=1.0, bounds=DOMAIN, method=method, seed=3)
            out[f"central {method} | memory"] = digest_values(r.values)
        r = quantiles(src["dir"], column="x", epsilon=1.0, bounds=DOMAIN, client=client, seed=3, exact_max=0)
        out["central best grid | cluster"] = digest_values(r.values)
        h = ldp_dask.privatize(x, channel=HaarLaplace(1.0, 4, DOMAIN), seed=2)
        t = gof.test(h, "beta(2,5)", B=999, rng=1)
        out["gof single"] = digest_values([t.statistic, t.p_value, t.critical_value])
        for split in ("rows", "epsilon"):
            a = ldp_dask.privatize(x, channel=HaarAdaptive(1.0, [1, 2, 3, 4], DOMAIN, split), seed=2)
            t = gof.adaptive_test(a, "beta(2,5)", B=999, rng=1)
            out[f"gof adaptive {split}"] = digest_values([t.statistic, t.p_value])
        res, _ = gof.run(src["dir"], "beta(2,5)", column="x", domain=DOMAIN, epsilon=1.0, B=999, rng=1,
                         client=client, seed=4)
        out["gof run | cluster"] = digest_values([res.statistic, res.p_value])
        hs = ldp_dask.privatize(x, channel=LaplaceHistogram(1.0, 32, DOMAIN), seed=5)
        lq = local_quantiles(hs, B=50, rng=1)
        out["local quantiles histogram"] = digest_values(lq.values, lq.ci_low, lq.ci_high)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", help="write the digests to this JSON file")
    g.add_argument("--check", help="compare with the digests in this JSON file; exit 1 on a difference")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        now = run(Path(tmp))
    if a.write:
        Path(a.write).write_text(json.dumps({"numpy": np.__version__, "digests": now}, indent=1, sort_keys=True))
        print(f"wrote {len(now)} digests to {a.write}")
        return 0
    ref = json.loads(Path(a.check).read_text())["digests"]
    summaries = [k for k in ref if not k.startswith(("central", "gof", "local"))]
    changed = sorted(k for k in ref if now.get(k) != ref[k])
    missing = sorted(set(ref) - set(now))
    for k in changed:
        print(f"CHANGED  {k}")
    same = len(ref) - len(changed)
    print(f"{same} of {len(ref)} digests identical ({len(summaries)} summaries, "
          f"{sum(1 for k in summaries if k not in changed)} identical); missing: {missing or 'none'}")
    return 1 if any(k in summaries for k in changed) else 0


if __name__ == "__main__":
    sys.exit(main())
