"""Helpers shared by benchmarks: machine description and RESULTS.md sections."""

from __future__ import annotations

import os
import platform
import re
from importlib.metadata import version
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


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
    return f"{cpu}, {os.cpu_count()} cores{mem}; Python {platform.python_version()}; {libs}"


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
