"""The documentation site as a reader sees it: a real headless Chromium over the built site, served on 127.0.0.1.

* The mathematics pages: MathJax (served from the site itself, no network) typesets every formula, and no LaTeX is
  left as text — no ``$``, ``\\frac``, ``^{`` or ``_{`` in what the page shows outside code blocks, and no
  ``^{``/``_{`` inside them either (formulas belong in LaTeX, not in code blocks).
* The browser is given no network beyond 127.0.0.1 (every other request is aborted and counted), so a page that
  still loaded its scripts or fonts from a CDN fails here.

Screenshots go to ``$LDP_DASK_SCREENSHOTS`` when it is set (the test's temporary directory otherwise).
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: the pages whose formulas are LaTeX, typeset on the site
MATH_PAGES = ("privacy", "channels", "estimators", "goodness-of-fit", "central-quantiles", "corrections")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]

# a browser and a site build: seconds each, left out of make test-fast
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None and not os.environ.get("LDP_DASK_REQUIRE_BROWSER"),
                                 reason="no chromium binary (apt-get install chromium); .ci/run installs it and "
                                        "requires it")]

#: the text a page shows outside <pre>/<code> (MathJax's own output excluded: its SVG carries no text)
_PROSE = """() => {
  const root = document.querySelector('article') || document.body;
  const clone = root.cloneNode(true);
  clone.querySelectorAll('pre, code, mjx-container, script, style, .headerlink').forEach(e => e.remove());
  return clone.innerText;
}"""
_CODE = "() => Array.from(document.querySelectorAll('article pre')).map(e => e.innerText).join('\\n')"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    where = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(where)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0 and "WARNING" not in r.stdout + r.stderr, r.stdout + r.stderr
    handler = functools.partial(_Quiet, directory=str(where))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test reads the pages, not the server's log
        pass


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None, "LDP_DASK_REQUIRE_BROWSER is set but chromium is not installed"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


def _open(browser, url: str):
    """A page at ``url`` with every request off 127.0.0.1 aborted and recorded."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    outside: list[str] = []

    def route(r):
        if r.request.url.startswith("http://127.0.0.1:"):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(url, wait_until="load")
    return page, outside


def test_the_notebook_page_shows_its_results_offline(site, browser, tmp_path):
    page, outside = _open(browser, f"{site}/how-to/notebook/")
    article = page.locator("article")
    article.get_by_text("Locally private density of x").first.wait_for(timeout=30_000)
    assert article.locator("img[src^='data:image/png;base64,']").count() >= 1  # the density's plot
    assert article.locator(".ldp-dask-result table").count() >= 3
    prose = page.evaluate(_PROSE)
    assert "$" not in prose and "Traceback" not in prose
    assert not outside, f"requests off the site: {outside[:3]}"
    shots = Path(os.environ.get("LDP_DASK_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "docs-notebook.png"))
    page.close()


@pytest.mark.parametrize("name", MATH_PAGES)
def test_mathematics_is_typeset(site, browser, name, tmp_path):
    page, outside = _open(browser, f"{site}/{name}/")
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000)
    page.evaluate("() => MathJax.startup.promise")
    formulas = page.locator("article .arithmatex").count()
    typeset = page.locator("article mjx-container svg").count()
    assert formulas > 0, f"{name}: no LaTeX formula on the page"
    assert typeset >= formulas, f"{name}: {typeset} of {formulas} formulas typeset"
    assert page.locator("mjx-merror, [data-mjx-error]").count() == 0, f"{name}: MathJax reported a TeX error"
    prose, code = page.evaluate(_PROSE), page.evaluate(_CODE)
    for raw in ("$", "\\frac", "^{", "_{", "\\(", "* **"):  # the last: a list item Markdown did not see
        assert raw not in prose, f"{name}: {raw!r} left as text: …{prose[max(prose.find(raw) - 60, 0):][:120]}…"
    for raw in ("^{", "_{"):
        assert raw not in code, f"{name}: {raw!r} in a code block: …{code[max(code.find(raw) - 60, 0):][:120]}…"
    assert not outside, f"{name}: requests off the site: {outside[:3]}"
    shots = Path(os.environ.get("LDP_DASK_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"docs-{name}.png"))
    assert (shots / f"docs-{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page.close()
