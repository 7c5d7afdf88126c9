"""MkDocs hook: pages that live elsewhere in the repository, published in the site without a copy.

* ``benchmarks.md``: ``benchmarks/RESULTS.md`` (what the benchmarks measured, with the machine), every
  ``benchmarks/*.png`` plot in its section with the caption ``benchmarks/figures.toml`` gives it, the headings
  shortened in the table of contents, and the page laid out wide (no navigation column) so that a figure of
  several panels stays legible.
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


#: the longest heading the table of contents shows whole
TOC_LABEL = 40


def toc_label(title: str) -> str:
    """A heading's short form for the table of contents: without its script's name in parentheses, up to its first
    colon, at most :data:`TOC_LABEL` characters (cut at a word)."""
    short = re.sub(r"\s*\(`[^`]*`[^)]*\)", "", title).split(": ", 1)[0].replace("`", "").replace('"', "").strip()
    if len(short) > TOC_LABEL:
        short = short[:TOC_LABEL].rsplit(" ", 1)[0]
        if short.count("(") > short.count(")"):  # cut inside a parenthesis: leave the parenthesis out
            short = short[:short.rindex("(")]
        short = short.rstrip(" ,;:") + "…"
    return short


def figures() -> dict[str, dict[str, str]]:
    import tomllib

    return tomllib.loads((ROOT / "benchmarks" / "figures.toml").read_text(encoding="utf-8"))


def _figure(name: str, caption: str) -> str:
    alt = name.removesuffix(".png").replace("_", " ")
    text = " ".join(caption.split())
    return (f'<figure class="ldp-figure" markdown="span">\n  [![{alt}](benchmarks/{name})](benchmarks/{name})\n'
            f"  <figcaption>{text} (Click for the full-size image.)</figcaption>\n</figure>")


def _benchmarks_page() -> str:
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    text = re.sub(r"\]\((\w[\w.-]*\.png)\)", r"](benchmarks/\1)", text)
    lines = text.split("\n")
    placed: dict[int, list[str]] = {}
    for name, fig in figures().items():
        at = next((i for i, line in enumerate(lines) if line.startswith(fig["section"])), None)
        if at is None:
            raise PluginError(f"benchmarks/figures.toml: no heading of RESULTS.md starts with {fig['section']!r}")
        end = next((j for j in range(at + 2, len(lines)) if not lines[j].strip()), len(lines))  # its first paragraph
        placed.setdefault(end, []).append(_figure(name, fig["caption"]))
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"(#{2,3}) (.+)$", line)
        if m and toc_label(m[2]) != m[2]:
            line = f'{line} {{ data-toc-label="{toc_label(m[2])}" }}'
        out.append(line)
        for fig in placed.get(i, []):
            out += ["", fig]
    head, _, rest = "\n".join(out).partition("\n")
    return ("---\nhide:\n  - navigation\n---\n\n"
            f"{head}\n\nEvery benchmark runs with `make bench` and writes its section below, with the machine it "
            f"ran on; each plot sits in its section, with what to look at.\n{rest}")


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
