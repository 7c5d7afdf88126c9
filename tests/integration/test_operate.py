"""Operating features: the HTML report, --json on every command, progress bars, the cluster from the
environment, and the secret from a mounted file."""

from __future__ import annotations

import base64
import json
import os
import re
import sqlite3
from html.parser import HTMLParser

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

import ldp_dask
from ldp_dask._validation import LdpDaskError
from ldp_dask.channels import HaarAdaptive, LaplaceHistogram, LaplaceMean, RandomizedResponse
from ldp_dask.cli import main

N = 200_000


@pytest.fixture(scope="module")
def summaries(tmp_path_factory):
    """In-process releases of Beta(2, 5) data (histogram, mean), categories (rr) and adaptive Haar."""
    d = tmp_path_factory.mktemp("report")
    rng = np.random.default_rng(8)
    x = rng.beta(2, 5, N)
    cats = rng.choice(["north", "south", "east"], p=[0.5, 0.3, 0.2], size=N)
    out = {}
    for name, data, ch in [("hist", x, LaplaceHistogram(1.0, 20, (0, 1))), ("mean", x, LaplaceMean(1.0, (0, 1))),
                           ("rr", cats, RandomizedResponse(1.0, ["north", "south", "east"])),
                           ("adaptive", x, HaarAdaptive(1.0, [1, 2, 3], (0, 1)))]:
        path = d / f"{name}.summary.parquet"
        ldp_dask.privatize(data, channel=ch, seed=3).to_parquet(path)
        out[name] = path
    return out


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.images: list[bytes] = []

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.text.append(data.strip())

    def handle_starttag(self, tag, attrs):
        src = dict(attrs).get("src", "")
        if tag == "img" and src.startswith("data:image/png;base64,"):
            self.images.append(base64.b64decode(src.split(",", 1)[1]))


def _page(path) -> _Page:
    p = _Page()
    p.feed(path.read_text())
    return p


def test_report_of_a_density(summaries, capsys):
    assert main(["report", str(summaries["hist"])]) == 0
    html_path = summaries["hist"].with_name("hist.summary.html")  # default: .parquet -> .html
    assert capsys.readouterr().out.strip() == f"wrote {html_path}"
    page = _page(html_path)
    text = " ".join(page.text)
    assert len(page.images) == 1 and page.images[0][:8] == b"\x89PNG\r\n\x1a\n"
    assert "n = 200,000 rows, ε = 1 per row" in text and "LaplaceHistogram" not in text
    for fact in ("histogram", "1 / 1", "lattice", "200,000", "95% pointwise confidence band"):
        assert fact in text, fact
    # the median shown on the page is the true Beta(2,5) median within 0.02: half a bin (0.025) bounds the
    # interpolation error and the noise in the CDF at the median is ~0.014 (5 bins × sd 0.0063), i.e. ~0.006 in x
    median = float(page.text[page.text.index("quantile 50% of the estimate") + 1])
    assert abs(median - stats.beta(2, 5).median()) < 0.02
    # the deciles with their intervals (CDF band at the bin edges): the true median lies in the one shown
    assert "Quantiles" in text and "CDF band at the bin edges" in text
    at = page.text.index("0.5", page.text.index("Quantiles"))
    lo, hi = (float(v) for v in page.text[at + 2].strip("[]").split(","))
    assert lo <= stats.beta(2, 5).median() <= hi


def test_report_of_a_mean_frequencies_and_adaptive(summaries, tmp_path):
    assert main(["report", str(summaries["mean"]), "--out", str(tmp_path / "m.html")]) == 0
    text = " ".join(_page(tmp_path / "m.html").text)
    lo, hi = map(float, re.search(r"\[([0-9.e-]+), ([0-9.e-]+)\]", text).groups())
    # the page shows the 95% interval θ̂ ± 1.96 se: its centre is within 4.5 se of the true mean 2/7
    # (false failure < 1e-5; the coverage of the interval itself is tested in test_estimators.py)
    assert abs((lo + hi) / 2 - 2 / 7) < 4.5 * (hi - lo) / (2 * 1.96), (lo, hi)
    assert main(["report", str(summaries["rr"]), "--out", str(tmp_path / "f.html")]) == 0
    page = _page(tmp_path / "f.html")
    assert len(page.images) == 1
    for cat, p in [("north", 0.5), ("south", 0.3), ("east", 0.2)]:
        i = page.text.index(cat, page.text.index("category"))
        # per-category se at n = 2e5, ε = 1, k = 3: about 0.0025, so 0.01 is 4 se
        assert abs(float(page.text[i + 1]) - p) < 0.01
    assert main(["report", str(summaries["adaptive"]), "--out", str(tmp_path / "a.html")]) == 0
    assert "goodness-of-fit" in (tmp_path / "a.html").read_text()


def test_report_refuses_to_overwrite_and_reports_bad_input(summaries, tmp_path, capsys):
    target = tmp_path / "r.html"
    target.write_text("keep me")
    assert main(["report", str(summaries["hist"]), "--out", str(target)]) == 2
    assert "already exists" in capsys.readouterr().err and target.read_text() == "keep me"
    assert main(["report", str(summaries["hist"]), "--out", str(target), "--overwrite"]) == 0
    assert main(["report", str(tmp_path / "missing.parquet")]) == 2
    assert "no such summary file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["report", str(summaries["hist"]), "--out", str(tmp_path / "x.html"), "--confidence", "1.5"])
    assert "confidence level must be in (0, 1)" in capsys.readouterr().err


@pytest.mark.slow
def test_every_command_has_json_output(summaries, beta_dataset, tmp_path, capsys):
    x = str(beta_dataset)
    halves = []  # two summaries of disjoint files, to merge
    for i, values in enumerate(np.array_split(np.random.default_rng(5).random(2_000), 2)):
        (tmp_path / f"half{i}").mkdir()
        pq.write_table(pa.table({"x": values}), tmp_path / f"half{i}" / "part.parquet")
        halves.append(str(tmp_path / f"half{i}.summary.parquet"))
        ldp_dask.privatize(str(tmp_path / f"half{i}"), "x", ldp_dask.LaplaceHistogram(1.0, 8, (0, 1)), seed=1,
                           client="local", incremental=True, out=halves[-1])
    commands = {
        "privatize": ["privatize", x, "--column", "x", "--channel", "histogram", "--domain", "0", "1",
                      "--epsilon", "1", "--out", str(tmp_path / "s.parquet"), "--local", "--seed", "1", "--no-ledger"],
        "estimate": ["estimate", str(summaries["hist"])],
        "gof": ["gof", str(summaries["adaptive"]), "--null", "beta(2,5)", "--B", "199", "--calibration-seed", "1"],
        "quantiles": ["quantiles", x, "--column", "x", "--bounds", "0", "1", "--epsilon", "1", "--local",
                      "--seed", "2", "--no-ledger"],
        "bounds": ["bounds", x, "--column", "x", "--epsilon", "0.5", "--local", "--seed", "3", "--no-ledger"],
        "verify": ["verify", str(tmp_path / "s.parquet"), "--seed", "1"],
        "budget": ["budget"],
        "report": ["report", str(summaries["mean"]), "--out", str(tmp_path / "m.html")],
        "merge": ["merge", *halves, "--out", str(tmp_path / "merged.parquet"), "--seed", "1"],
        "plan": ["plan", "check", str(tmp_path / "plan.toml"), x, "--epsilon", "1"],
        "release": ["release", str(tmp_path / "plan.toml"), x, "--epsilon", "1", "--seed", "3", "--no-ledger"],
        "demo": ["demo", "--out", str(tmp_path / "demo"), "--rows", "200000", "--files", "2"],  # last: its paths
    }
    (tmp_path / "plan.toml").write_text('[[statistic]]\ncolumn = "x"\nchannel = "mean"\ndomain = [0, 1]\n')
    from ldp_dask.cli_parser import build_parser as _parser

    sub = next(a for a in _parser()._actions if a.dest == "command")
    assert set(commands) == set(sub.choices), "a command was added without a --json check"
    from ldp_dask.ledger import Ledger, default_ledger_path

    before = len(Ledger(default_ledger_path()).entries())
    (tmp_path / "demo").mkdir()  # a demo folder from an earlier version, with its ledger in the old format
    with sqlite3.connect(tmp_path / "demo" / "ledger.sqlite") as con:
        con.execute("CREATE TABLE releases (id INTEGER, fingerprint TEXT)")
    for name, argv in commands.items():
        assert main([*argv, "--json"]) == 0, name
        out = capsys.readouterr().out
        doc = json.loads(out)  # the whole of stdout is one JSON document
        assert isinstance(doc, (dict, list)), name
    assert doc["paths"]["hist"].endswith("income.histogram.summary.parquet")  # the demo's
    # the demo records its two releases in its own ledger, inside its output folder, not the user's
    assert [e["channel"] for e in Ledger(tmp_path / "demo" / "ledger.sqlite").entries()] == ["histogram", "mean"]
    assert len(Ledger(default_ledger_path()).entries()) == before


def test_progress_bars_on_privatize_and_reduce(cluster, beta_dataset, tmp_path, capsys):
    addr = cluster.scheduler.address
    assert main(["privatize", str(beta_dataset), "--column", "x", "--channel", "mean", "--domain", "0", "1",
                 "--epsilon", "1", "--out", str(tmp_path / "m.parquet"), "--scheduler", addr, "--seed", "1",
                 "--progress", "--no-ledger"]) == 0
    err = capsys.readouterr().err
    assert "privatize" in err and "100%" in err and "210k/210k" in err
    from ldp_dask.central import quantiles

    quantiles(str(beta_dataset), "x", epsilon=1.0, bounds=(0, 1), client=cluster, seed=1, exact_max=0,
              progress=True)
    err = capsys.readouterr().err
    assert "reduce" in err and "100%" in err
    assert main(["privatize", str(beta_dataset), "--column", "x", "--channel", "mean", "--domain", "0", "1",
                 "--epsilon", "1", "--out", str(tmp_path / "m2.parquet"), "--scheduler", addr, "--seed", "1",
                 "--no-progress", "--no-ledger"]) == 0
    assert "privatize:" not in capsys.readouterr().err  # no bar


def test_cluster_from_the_environment(cluster, beta_dataset, monkeypatch):
    from ldp_dask.pipeline import connect

    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", cluster.scheduler.address)
    with connect() as c:
        assert c.scheduler.address == cluster.scheduler.address
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS")
    # a cluster class built for the run (what dask-jobqueue / dask-kubernetes users set), here LocalCluster
    monkeypatch.setenv("LDP_DASK_CLUSTER", "distributed.LocalCluster")
    monkeypatch.setenv("LDP_DASK_CLUSTER_OPTIONS", json.dumps({"n_workers": 0, "processes": False,
                                                                "dashboard_address": None}))
    monkeypatch.setenv("LDP_DASK_CLUSTER_WORKERS", "1")
    s = ldp_dask.privatize(str(beta_dataset), column="x", channel=LaplaceMean(1.0, (0, 1)), seed=5)
    ref = ldp_dask.privatize(str(beta_dataset), column="x", channel=LaplaceMean(1.0, (0, 1)), seed=5, client=cluster)
    assert s.n == 210_000 and np.array_equal(s.sums["sum"], ref.sums["sum"])  # same key: bit-identical
    for var, value, needle in [("LDP_DASK_CLUSTER", "no_such_module.Cluster", "LDP_DASK_CLUSTER"),
                               ("LDP_DASK_CLUSTER_OPTIONS", "[1, 2]", "LDP_DASK_CLUSTER_OPTIONS"),
                               ("LDP_DASK_CLUSTER_WORKERS", "-3", "LDP_DASK_CLUSTER_WORKERS")]:
        with monkeypatch.context() as m:
            m.setenv(var, value)
            with pytest.raises(LdpDaskError, match=needle):
                with connect():
                    pass


def _malloc_env() -> tuple[str | None, str | None]:
    return os.environ.get("MALLOC_TRIM_THRESHOLD_"), os.environ.get("MALLOC_MMAP_THRESHOLD_")


@pytest.mark.slow  # seconds of real processes: in make test, not test-fast
def test_own_local_cluster_workers_keep_their_heap(monkeypatch):
    """The LocalCluster connect() starts gives its workers WORKER_MALLOC (unless the environment sets a variable
    already), and leaves this process's environment as it was."""
    from ldp_dask.clusters import WORKER_MALLOC, connect

    for var in ("DASK_SCHEDULER_ADDRESS", "LDP_DASK_CLUSTER", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"):
        monkeypatch.delenv(var, raising=False)  # as in a fresh process (an earlier cluster's nanny sets the first)
    with connect(n_workers=1) as c:
        seen = list(c.run(_malloc_env).values())
    assert seen == [(WORKER_MALLOC["MALLOC_TRIM_THRESHOLD_"], WORKER_MALLOC["MALLOC_MMAP_THRESHOLD_"])]
    assert _malloc_env() == (None, None)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "262144")  # an operator's own choice stands
    with connect(n_workers=1) as c:
        seen = list(c.run(_malloc_env).values())
    assert seen == [(WORKER_MALLOC["MALLOC_TRIM_THRESHOLD_"], "262144")]
    assert _malloc_env() == (None, "262144")


def test_secret_from_a_mounted_file(tmp_path, monkeypatch):
    from ldp_dask.noise import resolve_secret

    key = tmp_path / "secret"
    key.write_bytes(b"0123456789abcdef0123456789abcdef\n")
    direct = resolve_secret(secret_file=key)
    monkeypatch.setenv("LDP_DASK_SECRET_FILE", str(key))
    env = resolve_secret()
    assert (env.source, env.key_id, env.reproducible) == ("file", direct.key_id, True)
    monkeypatch.setenv("LDP_DASK_SECRET", "fedcba9876543210fedcba9876543210")  # the key itself wins
    assert resolve_secret().source == "env"
    monkeypatch.delenv("LDP_DASK_SECRET")
    monkeypatch.setenv("LDP_DASK_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(LdpDaskError, match="secret_file"):
        resolve_secret()
