"""The repository is self-contained: nothing refers to files a person who clones it does not have, and the
documentation's links and the code's pointers into docs/ resolve."""

from __future__ import annotations

import re
import subprocess
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# spelled in pieces so that this file does not match itself
OUTSIDE = re.compile("|".join([
    r"\bS" + r"PEC\b", r"[Ss]eeds? 0" + r"0[0-9]", r"\.\./" + r"shared", r"\bDESIGN" + r"\.md", r"\bSTYLE" + r"\.md",
]))


def _tracked_text_files() -> list[Path]:
    try:
        names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        files = [ROOT / n for n in names.splitlines()]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file outside build outputs
        skip = {".venv", ".git", "build", "demo-output", "__pycache__", ".pytest_cache", ".hypothesis"}
        files = [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]
    out = []
    for p in files:
        if p.suffix in {".png", ".parquet", ".sqlite"} or not p.is_file():
            continue
        try:
            p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        out.append(p)
    return out


FILES = _tracked_text_files()


def test_nothing_refers_to_files_outside_the_repository():
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()[:100]}"
            for p in FILES for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if OUTSIDE.search(line)]
    assert hits == [], "\n".join(hits)


def test_the_check_can_fail():
    for bad in ("see S" + "PEC §1.1", "(s" + "eed 000, eq. 4)", "../" + "shared/x"):
        assert OUTSIDE.search(bad), bad


def _slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    value = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def _anchors(md: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", md.read_text(encoding="utf-8"), re.M)}


#: pages the documentation site makes from files elsewhere in the repository (docs/hooks/repository_pages.py)
SITE_PAGES = {ROOT / "docs" / "benchmarks.md": ROOT / "benchmarks" / "RESULTS.md",
              ROOT / "docs" / "security.md": ROOT / "SECURITY.md"}
MARKDOWN = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)]


@pytest.mark.parametrize("md", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_links_resolve(md):
    text = md.read_text(encoding="utf-8")
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if "://" in target or target.startswith(("mailto:", "data:")):
            continue
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        dest = SITE_PAGES.get(dest, dest)
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with that anchor")
    assert broken == [], broken


def test_pointers_into_docs_resolve():
    """Docstrings, --help texts and results cite docs/<page>.md (sometimes with an anchor): each must exist."""
    bad = []
    for p in FILES:
        for page, anchor in re.findall(r"docs/([\w-]+\.md)(?:#([\w-]+))?", p.read_text(encoding="utf-8")):
            dest = ROOT / "docs" / page
            if not dest.exists() or (anchor and anchor not in _anchors(dest)):
                bad.append(f"{p.relative_to(ROOT)}: docs/{page}{'#' + anchor if anchor else ''}")
    assert bad == [], bad


def test_docs_cover_every_channel_estimator_and_mechanism():
    from ldp_dask.central import METHODS
    from ldp_dask.channels import CHANNELS

    docs = " ".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    for name, cls in CHANNELS.items():
        assert f"--channel {name}`" in docs and cls.__name__ in docs, name
    for method in METHODS:
        assert f"`{method}" in docs or f'"{method}"' in docs, method
