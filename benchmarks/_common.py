"""Helpers shared by benchmarks: machine description and RESULTS.md sections."""

from __future__ import annotations

import os
import platform
import re
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).with_name("RESULTS.md")

# Every release is recorded in a ledger unless told otherwise; a benchmark's go to a throwaway one, never the
# user's (~/.ldp_dask). The timed releases say ledger=False: they measure the engine, not the ledger's writes.
os.environ.setdefault("LDP_DASK_LEDGER", os.path.join(tempfile.mkdtemp(prefix="ldp-bench-ledger-"), "ledger.sqlite"))


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, AttributeError):
        pass
    libs = ", ".join(f"{p} {version(p)}" for p in ("numpy", "pyarrow", "dask", "distributed"))
    return f"{cpu}, {os.cpu_count()} cores{mem}; Python {platform.python_version()}; {libs}; {load()}"


def _loadavg() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except OSError:
        return None


#: The load averages when the benchmark started (this module is imported first): what else the machine was doing.
START_LOAD = _loadavg()


def load() -> str:
    """The machine's load when the benchmark started: the 1- and 5-minute load averages against its cores (a
    figure taken at a load near or above the core count was measured on a busy machine, and says so)."""
    if START_LOAD is None:
        return "load unknown"
    one, five, _ = START_LOAD
    cores = os.cpu_count() or 1
    busy = " — a busy machine: these figures are pessimistic" if five > 0.75 * cores else ""
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {cores} cores when the run started{busy}"


def write_section(name: str, body: str) -> None:
    """Replace the section ``name`` of RESULTS.md (between markers), keeping the others."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\nEach section is rewritten by its script.\n"
    block = f"{start}\n{body.rstrip()}\n{end}"
    if start in text:
        text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    RESULTS.write_text(text)


def best_of(fn: Callable[[], Any], repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def make_data(directory: Path, rows: int, files: int, sampler: Callable[[np.random.Generator, int], np.ndarray]
              | None = None) -> Path:
    """``files`` Parquet files with a float column ``x`` (Beta(2, 5) unless ``sampler``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    per = rows // files
    for f in range(files):
        x = sampler(rng, per) if sampler is not None else rng.beta(2, 5, per)
        pq.write_table(pa.table({"x": x}), directory / f"part-{f:03d}.parquet", row_group_size=1 << 20)
    return directory


def _sum(*parts: np.ndarray) -> np.ndarray:
    return np.sum(parts, axis=0)


def tree_sum(client: Any, futures: list[Any], split_every: int = 8) -> np.ndarray:
    """Tree-sum the arrays behind ``futures`` on the cluster (the non-private floor's reduction)."""
    level = futures
    while len(level) > 1:
        level = [client.submit(_sum, *level[i:i + split_every], pure=False) for i in range(0, len(level), split_every)]
    return level[0].result()
