"""MkDocs hook: pages that live elsewhere in the repository, published in the site without a copy.

* ``benchmarks.md``: ``benchmarks/RESULTS.md`` (what the benchmarks measured, with the machine) and every
  ``benchmarks/*.png`` plot, shown at the top.
* ``security.md``: ``SECURITY.md`` (the security model), its pointers to pages of docs/ turned into site links.

The sources stay the single copy: the benchmarks write RESULTS.md and their plots where they are.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]


def _benchmarks_page() -> str:
    plots = sorted((ROOT / "benchmarks").glob("*.png"))
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    text = re.sub(r"\]\((\w[\w.-]*\.png)\)", r"](benchmarks/\1)", text)
    gallery = "\n\n".join(f"![{p.stem.replace('_', ' ')}](benchmarks/{p.name})" for p in plots)
    head, _, rest = text.partition("\n")
    return (f"{head}\n\nEvery benchmark runs with `make bench` and writes its section below, with the machine it "
            f"ran on. Plots:\n\n{gallery}\n{rest}")


def _security_page() -> str:
    text = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    return re.sub(r"\bdocs/([\w-]+)\.md", r"[\1](\1.md)", text)


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "benchmarks.md", content=_benchmarks_page()))
    files.append(File.generated(config, "security.md", content=_security_page()))
    for png in sorted((ROOT / "benchmarks").glob("*.png")):
        files.append(File.generated(config, f"benchmarks/{png.name}", abs_src_path=str(png)))
    return files
