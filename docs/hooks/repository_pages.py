"""MkDocs hook: pages that live elsewhere in the repository, published in the site without a copy.

* ``benchmarks.md``: ``benchmarks/RESULTS.md`` (what the benchmarks measured, with the machine) and every
  ``benchmarks/*.png`` plot, shown at the top.
* ``security.md``: ``SECURITY.md`` (the security model), its pointers to pages of docs/ turned into site links.
* ``javascripts/tex-svg-full.js``: MathJax 3 (the ``django-static-mathjax`` wheel of the ``docs`` extra ships its
  built files), which typesets the pages' LaTeX into SVG in the reader's browser. Served from the site itself, so
  the mathematics renders with no network; the fonts are inside the one file.

The sources stay the single copy: the benchmarks write RESULTS.md and their plots where they are.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
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


def _mathjax() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("mathjax")
    bundle = Path(spec.origin).parent / "static" / "mathjax" / "es5" / "tex-svg-full.js" if spec and spec.origin else None
    if bundle is None or not bundle.is_file():
        raise PluginError("MathJax is missing: the docs extra installs it (pip install -e '.[docs]').")
    return bundle


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "benchmarks.md", content=_benchmarks_page()))
    files.append(File.generated(config, "security.md", content=_security_page()))
    for png in sorted((ROOT / "benchmarks").glob("*.png")):
        files.append(File.generated(config, f"benchmarks/{png.name}", abs_src_path=str(png)))
    files.append(File.generated(config, "javascripts/tex-svg-full.js", abs_src_path=str(_mathjax())))
    return files
