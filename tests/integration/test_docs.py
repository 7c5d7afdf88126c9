"""The documentation runs: the site builds strictly, and every code block in the README and docs/ executes.

* ``mkdocs build --strict`` (broken links, missing pages, API reference
  entries that do not resolve all fail it).
* Each page's ```` ```python ```` and ```` ```bash ```` blocks run in order,
  in a fresh directory holding a small generated data set (:func:`make_data`),
  with ``ldp-dask`` on the PATH and a ledger of the page's own. A Python block
  runs as a script of its own (``__name__ == "__main__"``), so each must be
  complete — imports, names and the guard a process-based LocalCluster needs.
  Blocks in other languages (``text``, ``yaml``, ``json``) show output,
  formulas or configuration and are not run; a runnable language is required
  for anything that starts with a command or an import.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(["README.md", *(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))])
RUNNABLE = {"python", "bash"}
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```\s*$", re.M | re.S)
#: pages whose blocks start Dask clusters or Prefect flow runs: seconds each, left out of make test-fast
SLOW = {"docs/how-to/prefect.md", "docs/how-to/dask-cluster.md", "docs/how-to/object-storage.md",
        "docs/getting-started.md", "README.md", "docs/how-to/incremental.md", "docs/how-to/goodness-of-fit.md",
        "docs/how-to/plans.md", "docs/how-to/longitudinal.md", "docs/how-to/density.md", "docs/how-to/parameters.md",
        "docs/how-to/quantiles.md", "docs/how-to/mean.md", "docs/how-to/frequencies.md", "docs/how-to/tables.md"}


def blocks(page: str) -> list[tuple[str, str]]:
    """The fenced blocks of ``page`` as (language, code), in order."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [(m["lang"], _dedent(m["body"], len(m["indent"]))) for m in FENCE.finditer(text)]


def _dedent(body: str, n: int) -> str:
    return "".join(line[n:] if line[:n].strip() == "" else line for line in body.splitlines(keepends=True))


def make_data(where: Path) -> None:
    """The data set the examples use: ``data/``, the sample table ``ldp-dask demo --data-only data/`` writes
    (:func:`ldp_dask.demo.sample_table`)."""
    from ldp_dask.demo import sample_table

    sample_table(where / "data")


def test_every_page_is_in_the_site_or_the_readme():
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]

    def walk(items):
        for item in items:
            for v in item.values():
                yield from walk(v) if isinstance(v, list) else [v]

    listed = set(walk(nav))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts}
    assert pages <= listed, f"pages missing from mkdocs.yml's nav: {sorted(pages - listed)}"


def test_code_that_looks_runnable_is_marked_runnable():
    """A block that starts with an import or an ``ldp-dask`` command must be python or bash, so it is run here."""
    for page in PAGES:
        for lang, code in blocks(page):
            first = code.lstrip().split("\n", 1)[0]
            if re.match(r"(import |from \w[\w.]* import |ldp-dask |python )", first):
                assert lang in RUNNABLE, f"{page}: a {lang or 'bare'} block that looks runnable: {first!r}"
        text = (ROOT / page).read_text(encoding="utf-8")
        assert not re.search(r"\n\n    (ldp-dask|import |from ldp_dask)", text), f"{page}: an indented code block"


@pytest.mark.slow  # a whole site build, seconds: make test runs it, make test-fast does not
def test_the_site_builds_strictly(tmp_path):
    # not -q: mkdocs counts a warning against --strict only when it is logged
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0 and "WARNING" not in r.stdout + r.stderr, r.stdout + r.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "ldp_dask.pipeline.privatize" in api and "Parameters" in api  # the reference comes from the docstrings
    # the docstrings' Sphinx roles are links (or code where the target is not documented), never raw text
    raw = re.findall(r":(?:py:)?(?:class|func|meth|attr|mod|data|obj|exc|const):", api)
    assert raw == [], f"{len(raw)} raw Sphinx roles in the API reference"
    assert api.count('class="autorefs autorefs-internal"') >= 30
    # privatize's signature shows the run options a user types, with their types (not **run)
    signature = re.sub(r"<[^>]+>", "", api.split('id="ldp_dask.pipeline.privatize"', 1)[1].split("</pre>", 1)[0])
    for shown in ("privacy_unit: str | None = None", "ledger: Any = True", "nulls: Any = None",
                  "client: Any = None", "seed: int | None = None"):
        assert shown in signature, shown
    assert signature.index("unit_nulls: str") < signature.index("**run: Unpack[RunKwargs]")  # **run comes last
    # every benchmark plot sits in its section with a caption; the table of contents shows short headings
    import tomllib

    captions = tomllib.loads((ROOT / "benchmarks" / "figures.toml").read_text(encoding="utf-8"))
    assert set(captions) == {p.name for p in (ROOT / "benchmarks").glob("*.png")}
    bench = (tmp_path / "site" / "benchmarks" / "index.html").read_text(encoding="utf-8")
    shown = re.findall(r'<figure class="ldp-figure">.*?src="([\w.-]+\.png)".*?<figcaption>(.*?)</figcaption>', bench, re.S)
    assert sorted(name for name, _ in shown) == sorted(captions) and all(len(c) > 80 for _, c in shown)
    toc = bench[bench.index("md-nav--secondary"):]
    labels = [re.sub(r"<[^>]+>", "", x).strip() for x in re.findall(r'<span class="md-ellipsis">(.*?)</span>', toc, re.S)]
    assert len(labels) > 30 and max(map(len, labels)) <= 41, max(labels, key=len)
    assert (tmp_path / "site" / "benchmarks" / "scale.png").is_file()


NOTEBOOK = ROOT / "docs" / "how-to" / "notebook.ipynb"


def _shown(outputs: list) -> list[str]:
    """What a cell's outputs show, pictures left out (their PNG bytes follow the plotting library's version)."""
    shown = []
    for o in outputs:
        data = o.get("data", {})
        text = data.get("text/html") or data.get("text/plain") or o.get("text", "")
        shown.append(re.sub(r'src="data:image/png;base64,[^"]*"', 'src="…"', "".join(text)))
    return shown


@pytest.mark.slow
def test_the_notebook_runs_and_shows_what_it_was_saved_with(tmp_path, monkeypatch):
    """The how-to notebook, run cell by cell in a real Jupyter kernel on the sample table: no cell fails, the results
    render as HTML (their _repr_html_, the density with its plot), and the outputs the site shows — saved in the
    notebook — are what the code prints today."""
    import nbclient
    import nbformat

    make_data(tmp_path)
    monkeypatch.setenv("LDP_DASK_LEDGER", str(tmp_path / "ledger.sqlite"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    saved = nbformat.read(NOTEBOOK, as_version=4)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    html = [o["data"]["text/html"] for c in code for o in c.outputs if "text/html" in o.get("data", {})]
    assert len(html) >= 3 and all('class="ldp-dask-result"' in h for h in html)
    assert any("data:image/png;base64," in h for h in html)  # the density draws itself
    assert [_shown(c.outputs) for c in code] == [_shown(c.outputs) for c in saved.cells if c.cell_type == "code"], \
        ("the saved outputs are stale: run the notebook where the sample table is (ldp-dask demo --data-only "
         "data/), as this test does, and save it with its outputs")


#: pages that read object storage: run against the suite's S3-compatible server, data uploaded to s3://ldp-docs/
S3_PAGES = {"docs/how-to/object-storage.md"}


def _page_params():
    def marks(p):
        return [pytest.mark.slow] * (p in SLOW) + [pytest.mark.s3] * (p in S3_PAGES)

    return [pytest.param(p, marks=marks(p), id=p) for p in PAGES if any(lang in RUNNABLE for lang, _ in blocks(p))]


def _upload(tmp_path: Path, endpoint: str) -> None:
    import fsspec

    # the page's commands take the endpoint from the environment (read by fsspec when it starts, as in their
    # subprocesses); this process imported fsspec before the server started, so it is named here
    fs = fsspec.filesystem("s3", endpoint_url=endpoint)
    if not fs.exists("ldp-docs"):
        fs.mkdir("ldp-docs")
    fs.put(str(tmp_path / "data"), "ldp-docs/data", recursive=True)


@pytest.mark.parametrize("page", _page_params())
def test_code_blocks_run(page, tmp_path, request):
    if page != "README.md":  # the README writes its own, with the command it tells a reader to run
        make_data(tmp_path)
    if page in S3_PAGES:
        endpoint, _ = request.getfixturevalue("s3")
        _upload(tmp_path, endpoint)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "LDP_DASK_LEDGER": str(tmp_path / "ledger.sqlite"), "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"}
    env.pop("LDP_DASK_SECRET", None)
    for i, (lang, code) in enumerate(blocks(page)):
        if lang not in RUNNABLE:
            continue
        script = tmp_path / f"block{i}.{'py' if lang == 'python' else 'sh'}"
        script.write_text(code if lang == "python" else "set -euo pipefail\n" + code, encoding="utf-8")
        cmd = [sys.executable, str(script)] if lang == "python" else ["bash", str(script)]
        r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{page}, block {i} ({lang}) failed:\n{code}\n--- output ---\n{r.stdout}\n{r.stderr}"
