"""Longitudinal releases end to end: 30 nights of a snapshot table on a real LocalCluster, real Parquet, the real
ledger (SQLite, and PostgreSQL), the command line — a person whose value stays in its cell pays once."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import ldp_dask
from ldp_dask import BudgetExceeded, LdpDaskError
from ldp_dask.channels import MemoFrequencies, MemoMean
from ldp_dask.cli import main
from ldp_dask.estimators import frequencies, mean
from ldp_dask.ledger import Ledger

pytestmark = pytest.mark.cluster

PERSONS, NIGHTS, CELLS = 20_000, 30, 10


def _night(directory, values):
    directory.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"id": np.arange(PERSONS), "x": values}).to_parquet(directory / "snapshot.parquet")


def _within_cells(rng, values, share):
    """``share`` of the persons move their value inside their cell (a counter that ticks, a balance that drifts)."""
    out = values.copy()
    move = rng.random(PERSONS) < share
    cell = np.floor(out[move] / CELLS)
    out[move] = cell * CELLS + rng.uniform(0.5, 9.5, move.sum())
    return out


@pytest.mark.slow  # seconds of real processes: in make test, not test-fast
def test_thirty_nights_cost_the_series_cap_once_whatever_changes(tmp_path, cluster):
    """A capped series (the default: each person's cell hashed into 2 values, the hash memoized): the first night
    is charged the cap, ε 1 per person, and the other 29 nothing — with 10% of persons moving inside their cells
    every night and 50 changing cell on night 15 — and the ledger holds no row per person."""
    rng = np.random.default_rng(11)
    root, ledger = tmp_path / "table", tmp_path / "ledger.sqlite"
    Ledger(ledger).declare("customers", f"file://{root}", limit=3.0, privacy_unit="id")
    values = np.floor(rng.beta(2, 5, PERSONS) * 100 / CELLS) * CELLS + 5.0
    charged, spread, fresh = [], None, 0
    for night in range(NIGHTS):
        if night:
            values = _within_cells(rng, values, 0.1)
        if night == 15:  # 50 persons change cell
            values[:50] = (values[:50] + 30) % 100
        _night(root, values)
        s = ldp_dask.privatize(str(root), "x", ldp_dask.LaplaceHistogram(1.0, CELLS, (0, 100)),
                               longitudinal=True, privacy_unit="id", seed=5, ledger=str(ledger),
                               client=cluster.scheduler.address, night=f"2026-01-{night + 1:02d}")
        charged.append(s.receipt.epsilon)
        spread = s.receipt.spend
        assert not s.receipt.reused and spread is not None and spread["capped"]
        fresh += 1
        est = frequencies(s)
        truth = np.bincount((values // CELLS).astype(int), minlength=CELLS) / PERSONS
        assert (np.abs(est.frequencies - truth) <= 4.5 * est.se).all()  # 10 cells × 30 nights at 4.5 SE: ≤ 2·10⁻³
    assert s.channel.name == "capped-histogram" and s.channel.g == 2
    cap = s.channel.epsilon_spent()
    assert cap == pytest.approx(1.0, abs=1e-6) and cap <= 1.0
    assert charged[0] == pytest.approx(cap) and charged[1:] == [0.0] * (NIGHTS - 1)
    assert spread["max"] == pytest.approx(cap) and spread["nights"] == NIGHTS and "persons" not in spread
    (item,) = [i for i in Ledger(ledger).summary() if i["dataset"] == "customers"]
    assert item["spent"] == pytest.approx(cap)
    (series,) = item["longitudinal"]
    assert series["nights"] == fresh == NIGHTS and series["max"] == pytest.approx(cap)
    import sqlite3

    with sqlite3.connect(ledger) as db:  # nothing per person: the state is the number of nights
        assert set(db.execute("SELECT length(state), persons FROM memo_states").fetchall()) == {(0, 0)}
    with pytest.raises(BudgetExceeded):  # one ordinary night at ε 2.5 would pass the budget of 3
        ldp_dask.privatize(str(root), "x", ldp_dask.LaplaceHistogram(2.5, CELLS, (0, 100)), privacy_unit="id",
                           seed=5, ledger=str(ledger), client=cluster.scheduler.address)


def test_an_uncapped_series_is_charged_by_each_persons_changes(tmp_path, cluster):
    """``MemoHistogram`` (uncapped, ε per distinct report): nights whose persons keep their cells cost nothing,
    a night on which 50 persons change cell costs ε_memo again, and the ledger shows the spend over persons."""
    rng = np.random.default_rng(11)
    root, ledger = tmp_path / "table", tmp_path / "ledger.sqlite"
    values = np.floor(rng.beta(2, 5, PERSONS) * 100 / CELLS) * CELLS + 5.0
    charged = []
    for night in range(4):
        if night:
            values = _within_cells(rng, values, 0.1)
        if night == 2:
            values[:50] = (values[:50] + 30) % 100
        _night(root, values)
        s = ldp_dask.privatize(str(root), "x", ldp_dask.channels.MemoHistogram(1.0, CELLS, (0, 100)),
                               privacy_unit="id", seed=5, ledger=str(ledger), client=cluster.scheduler.address,
                               night=f"2026-01-{night + 1:02d}")
        charged.append(s.receipt.epsilon)
    eps = s.channel.epsilon_spent()
    assert charged == pytest.approx([eps, 0.0, eps, 0.0])
    spread = s.receipt.spend
    assert spread["persons"] == PERSONS and spread["p50"] == pytest.approx(eps) and spread["max"] == pytest.approx(2 * eps)
    (item,) = Ledger(ledger).summary()
    # centrally, the series' nights are one mechanism (the memoized reports), ε-DP at the spend it grew by
    assert item["central"]["events"] == 1 and item["central"]["epsilon"] == pytest.approx(2 * eps, rel=1e-3)


def test_a_longitudinal_summary_reads_back_and_reruns_free(tmp_path, cluster):
    rng = np.random.default_rng(12)
    root, ledger, out = tmp_path / "t", tmp_path / "l.sqlite", tmp_path / "m.summary.parquet"
    values = rng.uniform(0, 100, PERSONS)
    _night(root, values)
    common = dict(privacy_unit="id", seed=9, ledger=str(ledger), client=cluster.scheduler.address)
    s = ldp_dask.privatize(str(root), "x", MemoMean(1.0, (0, 100), levels=4, instant=2.0), out=out, **common)
    back = ldp_dask.read_summary(out, allow_unverified=True)
    assert back.channel == MemoMean(1.0, (0, 100), levels=4, instant=2.0)
    assert back.metadata["longitudinal"]["epsilon_bits"] == pytest.approx(2.0, rel=1e-8)
    est = mean(back)
    assert abs(est.value - values.mean()) <= 4.5 * est.se
    again = ldp_dask.privatize(str(root), "x", MemoMean(1.0, (0, 100), levels=4, instant=2.0), out=out,
                               overwrite=True, **common)
    assert again.receipt.reused and again.receipt.epsilon == 0 and again.sums == s.sums


def test_a_quiet_night_draws_a_fresh_layer_and_counts_as_a_night(tmp_path):
    """With the instantaneous layer, a night on which nobody changes is a night of its own: not bit-identical to the
    last (that repeat would tell that nobody changed), and counted in every person's N·ε_bits; only a re-run of
    the same night is the same release, free."""
    rng = np.random.default_rng(15)
    root, ledger = tmp_path / "t", tmp_path / "l.sqlite"
    _night(root, rng.integers(0, 100, PERSONS))
    ch = MemoFrequencies(2.0, list(range(100)), encoding="kary", instant=0.5)
    common = dict(longitudinal=True, privacy_unit="id", seed=3, ledger=str(ledger), client="local")
    first = ldp_dask.privatize(str(root), "x", ch, night="2026-01-01", **common)
    quiet = ldp_dask.privatize(str(root), "x", ch, night="2026-01-02", **common)
    assert not np.array_equal(first.sums["sum"], quiet.sums["sum"])
    assert not quiet.receipt.reused and quiet.metadata["longitudinal"]["night"] == "2026-01-02"
    again = ldp_dask.privatize(str(root), "x", ch, night="2026-01-02", **common)
    assert again.receipt.reused and again.receipt.epsilon == 0 and np.array_equal(again.sums["sum"],
                                                                                  quiet.sums["sum"])
    (item,) = [i for i in Ledger(ledger).summary() if i["longitudinal"]]
    (series,) = item["longitudinal"]
    assert series["nights"] == 2  # two nights of ε_bits each: the person's bound is min(ε_memo, 2·0.5) = 1.0
    assert quiet.receipt.spend["max"] == pytest.approx(1.0)
    with pytest.raises(LdpDaskError, match="'night' option"):  # a night means nothing to another release
        ldp_dask.privatize(str(root), "x", ldp_dask.LaplaceHistogram(1.0, CELLS, (0, 100)), night="2026-01-02",
                           seed=3, ledger=False, client="local")
    with pytest.raises(LdpDaskError, match="ISO date"):
        ldp_dask.privatize(str(root), "x", ch, night="Jan 2", **common)


def test_what_a_longitudinal_release_cannot_be_is_refused(tmp_path):
    root = tmp_path / "t"
    _night(root, np.zeros(PERSONS))
    hist = ldp_dask.LaplaceHistogram(1.0, CELLS, (0, 100))
    common = dict(ledger=False, client="local")
    with pytest.raises(LdpDaskError, match="needs a privacy unit"):
        ldp_dask.privatize(str(root), "x", hist, longitudinal=True, seed=1, **common)
    with pytest.raises(LdpDaskError, match="max_contributions"):
        ldp_dask.privatize(str(root), "x", hist, longitudinal=True, seed=1, privacy_unit="id", max_contributions=2,
                           **common)
    with pytest.raises(LdpDaskError, match="kept from night to night"):
        ldp_dask.privatize(str(root), "x", hist, longitudinal=True, privacy_unit="id", **common)
    with pytest.raises(LdpDaskError, match="not partitioned"):
        ldp_dask.privatize(str(root), "x", hist, longitudinal=True, privacy_unit="id", seed=1, incremental=True,
                           **common)
    with pytest.raises(LdpDaskError, match="no memoized form"):
        ldp_dask.privatize(str(root), "x", ldp_dask.WaveletLaplace(1.0, (0, 100), j0=2, j1=4), longitudinal=True,
                           privacy_unit="id", seed=1, **common)


def test_the_command_line_releases_nights_and_prints_the_spend(tmp_path, capsys, cluster):
    rng = np.random.default_rng(13)
    root, ledger = tmp_path / "t", tmp_path / "l.sqlite"
    values = rng.uniform(0, 100, PERSONS)
    args = ["privatize", str(root), "--column", "x", "--channel", "mean", "--domain", "0", "100", "--epsilon", "1",
            "--privacy-unit", "id", "--longitudinal", "--memo-levels", "2", "--seed", "4", "--ledger", str(ledger),
            "--scheduler", cluster.scheduler.address, "--json", "--overwrite"]
    spends = []
    for night in range(3):
        values[:100] = rng.uniform(0, 100, 100)  # 100 persons change value
        _night(root, values)
        assert main([*args, "--out", str(tmp_path / f"n{night}.parquet"), "--night", f"2026-02-0{night + 1}"]) == 0
        info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        # capped: levels 2 gives 3 grid points, each memoized at ε/3; the series' cost is ε 1, charged once
        assert info["channel"] == "capped-mean" and info["longitudinal"]["epsilon_memo"] <= 1.0 / 3
        assert info["longitudinal"]["cap"] == pytest.approx(1.0, abs=1e-6)
        spends.append((info["epsilon_charged"], info["spend"]))
    assert [c for c, _ in spends] == pytest.approx([1.0, 0.0, 0.0], abs=1e-6)
    assert spends[-1][1]["capped"] and spends[-1][1]["nights"] == 3
    assert main(["budget", "--ledger", str(ledger)]) == 0  # the series' nights and cap, nothing per person
    listed = capsys.readouterr().out
    assert ": capped series, 3 night(s): ε 1 per id in all, its cap ε 1 reached" in listed
    assert "longitudinal series of x (capped-mean, series " in listed  # named by its column and channel
    # uncapped: ε per distinct report, spread over persons
    assert main([*args, "--uncapped", "--out", str(tmp_path / "u.parquet")]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["channel"] == "memo-mean" and info["spend"]["persons"] == PERSONS
    assert main(["privatize", str(root), "--column", "x", "--channel", "mean", "--domain", "0", "100",
                 "--epsilon", "1", "--memo-levels", "2", "--out", str(tmp_path / "z.parquet"), "--seed", "4",
                 "--no-ledger"]) == 2
    assert "--longitudinal only" in capsys.readouterr().err


@pytest.mark.postgres
def test_a_postgresql_ledger_keeps_the_series(tmp_path, postgres, cluster):
    from pg_server import fresh_database

    ledger = fresh_database(postgres, "ledger_longitudinal")
    rng = np.random.default_rng(14)
    root = tmp_path / "t"
    values = rng.uniform(0, 100, PERSONS)
    hist = ldp_dask.channels.MemoHistogram(0.5, CELLS, (0, 100))  # uncapped: the per-person table in PostgreSQL
    charged = []
    for night in range(3):
        if night == 2:
            values[:10] = (values[:10] + 50) % 100
        _night(root, values)
        s = ldp_dask.privatize(str(root), "x", hist, longitudinal=True, privacy_unit="id", seed=6,
                               ledger=ledger, client=cluster.scheduler.address)
        charged.append(s.receipt.epsilon)
    eps = s.channel.epsilon_spent()
    assert charged == pytest.approx([eps, 0.0, eps])
    assert s.receipt.spend["persons"] == PERSONS and s.receipt.spend["max"] == pytest.approx(2 * eps)


PLAN = {"statistic": [
    {"column": "x", "target": "distribution", "domain": [0, 100], "bins": CELLS},
    {"column": "x", "target": "mean", "domain": [0, 100], "name": "x.mean"},
    {"column": "c", "target": "frequencies", "categories": ["a", "b", "c"]}]}


def _snapshot(directory, x, c):
    directory.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"id": np.arange(PERSONS), "x": x, "c": c}).to_parquet(directory / "snapshot.parquet")


@pytest.mark.slow
def test_a_longitudinal_plan_charges_its_statistics_caps_once(tmp_path, cluster):
    rng = np.random.default_rng(15)
    root, ledger = tmp_path / "t", str(tmp_path / "l.sqlite")
    x, c = rng.uniform(0, 100, PERSONS), rng.choice(["a", "b", "c"], PERSONS)
    plan = ldp_dask.Plan.from_dict(PLAN)
    charged = []
    for night in range(3):
        if night == 2:
            c[:300] = np.where(c[:300] == "a", "b", "a")  # 300 persons change category; x holds
        _snapshot(root, x, c)
        r = ldp_dask.release_plan(plan, str(root), 1.0, longitudinal=True, privacy_unit="id", seed=8, ledger=ledger,
                                  client=cluster.scheduler.address, out=tmp_path / f"night{night}",
                                  night=f"2026-03-0{night + 1}")
        charged.append(r.receipt.epsilon)
        truth = {"x.distribution": np.bincount((x // CELLS).astype(int), minlength=CELLS) / PERSONS,
                 "c.frequencies": np.array([np.mean(c == k) for k in "abc"])}
        for st in r.statistics:
            if st.statistic.label in truth:
                assert (np.abs(st.result.frequencies - truth[st.statistic.label]) <= 4.5 * st.result.se).all()
            else:
                assert abs(st.result.value - x.mean()) <= 4.5 * st.result.se
            assert st.summaries[0][1].channel.name.startswith("capped-")
    eps = {k: v["epsilon"] for k, v in json.loads(Ledger(ledger).entries()[0]["params"]).items()}
    assert sum(eps.values()) == pytest.approx(1.0, abs=1e-6)  # ε split among the three, each a series' cap
    # the caps at the first night, then nothing: the change of category costs nothing more
    assert charged[0] == pytest.approx(1.0, abs=1e-6) and charged[1:] == [0.0, 0.0]
    spend = r.receipt.spend
    assert len(spend["series"]) == 3 and all(p["capped"] and p["nights"] == 3 for p in spend["series"])
    assert spend["max"] == pytest.approx(1.0, abs=1e-6)
    assert (tmp_path / "night2" / "index.html").exists()


def test_what_a_longitudinal_plan_cannot_be_is_refused(tmp_path):
    root = tmp_path / "t"
    _snapshot(root, np.zeros(PERSONS), np.full(PERSONS, "a"))
    common = dict(privacy_unit="id", seed=1, ledger=False, client="local")
    for statistic, why in (({"column": "x", "target": "quantiles", "domain": [0, 100]}, "no memoized form"),
                           ({"column": "x", "target": "mean", "domain": [0, 100], "group_by": "c",
                             "groups": ["a"]}, "no memoized form")):
        with pytest.raises(LdpDaskError, match=why):
            ldp_dask.release_plan(ldp_dask.Plan.from_dict({"statistic": [statistic]}), str(root), 1.0,
                                  longitudinal=True, **common)
    twins = {"statistic": [{"column": "x", "target": "mean", "domain": [0, 100], "name": "a"},
                           {"column": "x", "target": "mean", "domain": [0, 100], "name": "b"}]}
    with pytest.raises(LdpDaskError, match="the same memoized reports"):
        ldp_dask.release_plan(ldp_dask.Plan.from_dict(twins), str(root), 1.0, longitudinal=True, **common)
    plan = ldp_dask.Plan.from_dict(PLAN)
    with pytest.raises(LdpDaskError, match="not incremental"):
        ldp_dask.release_plan(plan, str(root), 1.0, longitudinal=True, incremental=True, **common)
    per_person = ldp_dask.release_plan(plan, str(root), 1.0, **common)  # not longitudinal: one night, per person
    assert per_person.unit == "id" and per_person.charged == pytest.approx(1.0)
    with pytest.raises(LdpDaskError, match="design='split-rows'"):
        ldp_dask.release_plan(plan, str(root), 1.0, longitudinal=True, design="split-rows", **common)


def test_the_command_line_releases_a_longitudinal_plan(tmp_path, capsys):
    rng = np.random.default_rng(16)
    root = tmp_path / "t"
    _snapshot(root, rng.uniform(0, 100, PERSONS), rng.choice(["a", "b", "c"], PERSONS))
    toml = tmp_path / "plan.toml"
    toml.write_text('[[statistic]]\ncolumn = "x"\ntarget = "mean"\ndomain = [0, 100]\n\n'
                    '[[statistic]]\ncolumn = "c"\ntarget = "frequencies"\ncategories = ["a", "b", "c"]\n')
    assert main(["release", str(toml), str(root), "--epsilon", "1", "--privacy-unit", "id", "--longitudinal",
                 "--seed", "2", "--ledger", str(tmp_path / "l.sqlite"), "--local", "--json",
                 "--out", str(tmp_path / "out")]) == 0
    body = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [s["channel"] for s in body["statistics"]] == ["capped-mean", "capped-rr"]


def test_five_date_partitions_of_one_dataset_continue_one_series(tmp_path):
    """A snapshot written each night as a partition of one declared table (table/date=…/) and released partition
    by partition continues one series, keyed by the declared dataset and the unit: five unchanged nights cost what
    the first cost (each partition started a series of its own, 5ε). An undeclared table's partitions still key
    their own series."""
    rng = np.random.default_rng(16)
    table, ledger = tmp_path / "table", tmp_path / "l.sqlite"
    Ledger(ledger).declare("customers", f"file://{table}", limit=10.0, privacy_unit="id")
    values = rng.uniform(0, 100, PERSONS)
    hist = ldp_dask.LaplaceHistogram(1.0, CELLS, (0, 100))
    charged = []
    for night in range(1, 6):
        _night(table / f"date=2026-01-0{night}", values)
        s = ldp_dask.privatize(str(table / f"date=2026-01-0{night}"), "x", hist, longitudinal=True,
                               privacy_unit="id", seed=8, ledger=str(ledger), client="local",
                               night=f"2026-01-0{night}")
        charged.append(s.receipt.epsilon)
    eps = s.channel.epsilon_spent()
    assert charged == pytest.approx([eps, 0, 0, 0, 0])
    (item,) = [i for i in Ledger(ledger).summary() if i["dataset"] == "customers"]
    assert item["spent"] == pytest.approx(eps) and item["longitudinal"][0]["nights"] == 5
    other = tmp_path / "undeclared"
    for night in (1, 2):
        _night(other / f"date=2026-01-0{night}", values)
        s = ldp_dask.privatize(str(other / f"date=2026-01-0{night}"), "x", hist, longitudinal=True,
                               privacy_unit="id", seed=8, ledger=str(ledger), client="local",
                               night=f"2026-01-0{night}")
        assert s.receipt.epsilon == pytest.approx(eps)  # a series of its own each: nothing declared holds them


@pytest.mark.parametrize("layer", [None, 0.3])
def test_a_capped_nights_charge_depends_on_nobodys_history(tmp_path, layer):
    """Two tables that differ in one person's history — person 0 keeps one cell in one, changes cell every night in
    the other — are charged the same every night: the cap at the first night; with the instantaneous layer at
    ε_bits = 0.3, ε_bits a night until the nights' sum reaches the cap. The budget decision reads no data."""
    from ldp_dask.channels import CappedHistogram

    rng = np.random.default_rng(17)
    values = rng.uniform(0, 100, 2_000)
    channel = CappedHistogram(1.0, CELLS, (0, 100), instant=layer)
    charges = {}
    for name in ("still", "moving"):
        root, ledger = tmp_path / name, tmp_path / f"{name}.sqlite"
        x = values.copy()
        charges[name] = []
        for night in range(4):
            if name == "moving":
                x[0] = (x[0] + 10 * (night + 1)) % 100
            root.mkdir(exist_ok=True)
            pd.DataFrame({"id": np.arange(2_000), "x": x}).to_parquet(root / "snapshot.parquet")
            s = ldp_dask.privatize(str(root), "x", channel, privacy_unit="id", seed=9, ledger=str(ledger),
                                   client="local", night=f"2026-04-0{night + 1}")
            charges[name].append(s.receipt.epsilon)
    cap, bits = channel.epsilon_spent(), channel.epsilon_bits()
    expected = [cap, 0.0, 0.0, 0.0] if layer is None else [bits, bits, bits, cap - 3 * bits]
    assert charges["still"] == charges["moving"] == pytest.approx(expected)
