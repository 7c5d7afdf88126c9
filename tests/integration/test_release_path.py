"""Every entry point releases through the one release path, so the rules about releases hold everywhere.

Three releasing jobs (privatize, goodness of fit on raw data, central quantiles), each through three
interfaces (Python, the CLI, the Prefect flow), face the same two failures:

* a budget that would be exceeded: refused before any work, nothing written, the ledger unchanged;
* an output write that fails (a filesystem whose writes all fail): nothing published, no temporary
  file left behind, and no charge in the ledger.
"""

from __future__ import annotations

import json

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from flaky_fs import FailingWritesFileSystem

import ldp_dask
from ldp_dask import gof
from ldp_dask.central import quantiles
from ldp_dask.cli import main
from ldp_dask.ledger import BudgetExceeded, Ledger
from ldp_dask.source import open_source

fsspec.register_implementation("failwrite", FailingWritesFileSystem, clobber=True)

JOBS = {"privatize": "local", "gof": "local", "quantiles": "central"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("release-path") / "data"
    d.mkdir()
    pq.write_table(pa.table({"x": np.random.default_rng(0).random(20_000)}), d / "a.parquet")
    return d


def _python(job, data, out, led):
    common = dict(client="local", seed=1, ledger=str(led))
    if job == "privatize":
        ldp_dask.privatize(str(data), column="x", channel=ldp_dask.LaplaceHistogram(1.0, 8, (0, 1)), out=out,
                           **common)
    elif job == "gof":
        gof.run(str(data), "uniform", column="x", domain=(0, 1), epsilon=1.0, J=3, B=99, rng=1, out=out, **common)
    else:
        quantiles(str(data), column="x", epsilon=1.0, bounds=(0, 1), out=out, **common)


def _cli(job, data, out, led):
    tail = ["--local", "--seed", "1", "--ledger", str(led), "--out", out]
    argv = {
        "privatize": ["privatize", str(data), "--column", "x", "--channel", "histogram", "--bins", "8",
                      "--domain", "0", "1", "--epsilon", "1"],
        "gof": ["gof", str(data), "--null", "uniform", "--column", "x", "--domain", "0", "1", "--epsilon", "1",
                "--J", "3", "--B", "99"],
        "quantiles": ["quantiles", str(data), "--column", "x", "--bounds", "0", "1", "--epsilon", "1"],
    }[job]
    return main(argv + tail)


def _flow(job, data, out, led, scheduler):
    from ldp_dask.flows import gof_flow, privatize_flow, quantile_flow

    common = dict(source=str(data), column="x", scheduler=scheduler, seed=1, ledger=str(led), out=out)
    if job == "privatize":
        privatize_flow(domain=[0.0, 1.0], channel="histogram", epsilon=1.0, bins=8, **common)
    elif job == "gof":
        gof_flow(null="uniform", domain=[0.0, 1.0], epsilon=1.0, J=3, B=99, calibration_seed=1, **common)
    else:
        quantile_flow(bounds=[0.0, 1.0], epsilon=1.0, **common)


def _out(job, directory, protocol=""):
    return f"{protocol}{directory / ('out.summary.parquet' if job == 'privatize' else 'out.json')}"


def _run(interface, job, data, out, led, request):
    """Run one job through one interface; returns the exception it raised, or the CLI's exit status and stderr."""
    if interface == "cli":
        capsys = request.getfixturevalue("capsys")
        code = _cli(job, data, out, led)
        return code, capsys.readouterr().err.strip().splitlines()
    try:
        if interface == "python":
            _python(job, data, out, led)
        else:
            request.getfixturevalue("prefect_harness")
            _flow(job, data, out, led, request.getfixturevalue("cluster").scheduler.address)
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return exc, None
    return None, None


INTERFACES = ["python", "cli", pytest.param("flow", marks=[pytest.mark.prefect, pytest.mark.cluster,
                                                            pytest.mark.slow])]


@pytest.mark.parametrize("interface", INTERFACES)
@pytest.mark.parametrize("job", sorted(JOBS))
def test_budget_refusal_is_the_same_everywhere(job, interface, data, tmp_path, request):
    led = tmp_path / "ledger.sqlite"
    Ledger(led).declare("survey", open_source(str(data), "x").root, 0.5)
    outdir = tmp_path / "out"
    outcome, err = _run(interface, job, data, _out(job, outdir), led, request)
    if interface == "cli":
        assert outcome == 2 and len(err) == 1 and "budget 0.5" in err[0] and "nothing was run" in err[0], err
    else:
        assert isinstance(outcome, BudgetExceeded), outcome
    assert not outdir.exists() or list(outdir.iterdir()) == []  # no output, no temporary file
    assert Ledger(led).entries() == []


@pytest.mark.parametrize("interface", INTERFACES)
@pytest.mark.parametrize("job", sorted(JOBS))
def test_failed_write_publishes_nothing_and_charges_nothing(job, interface, data, tmp_path, request):
    led = tmp_path / "ledger.sqlite"
    outdir = tmp_path / "out"
    outcome, err = _run(interface, job, data, _out(job, outdir, "failwrite://"), led, request)
    if interface == "cli":
        assert outcome == 1 and len(err) == 1, err
        assert err[0].startswith("ldp-dask: error: OSError: injected write failure") and "charged" in err[0], err
    else:
        assert isinstance(outcome, OSError) and "injected write failure" in str(outcome), outcome
    assert not outdir.exists() or list(outdir.iterdir()) == []
    assert Ledger(led).entries() == []


@pytest.mark.parametrize("job", sorted(JOBS))
def test_a_successful_release_is_charged_once_and_a_rerun_is_free(job, data, tmp_path):
    led = tmp_path / "ledger.sqlite"
    for name in ("a", "b"):
        _python(job, data, _out(job, tmp_path / name), led)
    entries = Ledger(led).entries()
    assert [e["status"] for e in entries] == ["committed"] * 2 and entries[0]["scope"] == JOBS[job]
    assert [e["epsilon"] for e in entries] == [1.0, 0.0] and "identical to #1" in entries[1]["note"]
    # the first output is recorded with the charge
    assert json.loads(entries[0]["outputs"])[0].endswith(str(_out(job, tmp_path / "a")))
    assert Ledger(led).spent(entries[0]["root"]) == 1.0
