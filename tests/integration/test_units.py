"""Privacy units: exactly k reports per person, from rows chosen uniformly and independently of the values, each
at ε/k — and the whole person, however many rows it owns, is what the audit treats as the unit."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

import ldp_dask
from ldp_dask import LdpDaskError
from ldp_dask.audit import audit_person
from ldp_dask.channels import build_channel
from ldp_dask.cli import main
from ldp_dask.units import keep_contributions, kept_index, pad_index, person_ids, plan_cells, ranks, unit_keys


def _people(rng, persons=3_000, n=30_000):
    """Repeated ids: a heavy-tailed number of rows per person (some have hundreds)."""
    weights = rng.pareto(1.2, persons) + 1
    u = rng.choice(persons, n, p=weights / weights.sum())
    return pd.DataFrame({"user": u.astype(np.int64), "name": [f"p{i}" for i in u], "x": rng.beta(2, 5, n),
                         "c": rng.choice(["a", "b", "c"], n)})


def test_each_person_keeps_min_k_rows_in_a_deterministic_order():
    rng = np.random.default_rng(0)
    person = rng.integers(0, 500, 20_000).astype(np.uint64)
    keys = unit_keys(b"k" * 32, b"ctx")
    r = ranks(person, np.arange(len(person)), keys)
    keep = keep_contributions(person, r, 3)
    counts = np.bincount(person[keep].astype(np.int64), minlength=500)
    assert np.array_equal(counts, np.minimum(np.bincount(person.astype(np.int64), minlength=500), 3))
    shuffled = rng.permutation(len(person))  # the rows arrive in another order: the same rows, same order
    keep2 = shuffled[keep_contributions(person[shuffled], r[shuffled], 3)]
    assert np.array_equal(keep, keep2)


def test_the_kept_rows_are_a_uniform_choice():
    # one person with 10 rows keeps 2: over 20,000 keys each position is kept with probability 1/5;
    # chi-square on 10 cells (9 df) at the 1e-3 level (false-failure rate 1e-3)
    person = np.zeros(10, dtype=np.uint64)
    hits = np.zeros(10)
    for i in range(20_000):
        keys = unit_keys(i.to_bytes(8, "little") * 4, b"ctx")
        hits[keep_contributions(person, ranks(person, np.arange(10), keys), 2)] += 1
    assert hits.sum() == 40_000
    assert stats.chisquare(hits).pvalue > 1e-3


def _reports(person, k, keys):
    """The persons of the reports the release path makes of these rows (bounding, then padding)."""
    rank = ranks(person, np.arange(len(person)), keys)
    cells = plan_cells(keys.bucket, 1, len(person))
    _, keep, starts = kept_index([{"person": person, "rank": rank, "value": np.zeros(len(person))}], k, cells, 0,
                                 cells.count)
    index, _ = pad_index(person[keep], starts, k)
    return keep if index is None else keep[index]


@pytest.mark.parametrize("k", [1, 2, 5, 20])  # 20: above the kernels' KERNEL_MAX_K, the sorting path
def test_every_person_makes_exactly_k_reports_from_its_own_rows(k):
    rng = np.random.default_rng(k)
    person = rng.integers(0, 700, 6_000).astype(np.uint64)  # 1 to ~20 rows each
    keys = unit_keys(b"p" * 32, b"ctx")
    kept = _reports(person, k, keys)
    persons, owned = np.unique(person, return_counts=True)
    assert len(kept) == k * len(persons)
    assert np.array_equal(np.bincount(person[kept].astype(np.int64), minlength=700)[persons.astype(np.int64)],
                          np.full(len(persons), k))
    # a person with r < k rows reports each of them ⌊k/r⌋ or ⌈k/r⌉ times; with r ≥ k, k distinct rows
    uses = np.bincount(kept, minlength=len(person))
    for p, r in zip(persons[:200], owned[:200]):
        mine = uses[person == p]
        if r >= k:
            assert sorted(mine) == [0] * (r - k) + [1] * k
        else:
            assert set(mine) <= {k // r, -(-k // r)} and mine.sum() == k


@pytest.mark.slow  # a coverage/law check of seconds: in make test, not test-fast
def test_padding_weighs_a_persons_rows_equally():
    # one person with 3 rows and k = 4: each row fills one slot and a uniformly chosen row a second, so over
    # 30,000 keys each row fills 4/3 of a slot on average. Chi-square on the extra slot's 3 cells (2 df) at the
    # 1e-3 level (false-failure rate 1e-3).
    person = np.zeros(3, dtype=np.uint64)
    extra = np.zeros(3)
    for i in range(30_000):
        uses = np.bincount(_reports(person, 4, unit_keys(i.to_bytes(8, "little") * 4, b"ctx")), minlength=3)
        assert sorted(uses) == [1, 1, 2]
        extra += uses - 1
    assert stats.chisquare(extra).pvalue > 1e-3


def test_person_ids_agree_across_types_and_refuse_nulls():
    ints = person_ids(np.array([1, 2, 1], dtype=np.int64))
    assert ints[0] == ints[2] != ints[1]
    strs = person_ids(pa.array(["a", "b", "a"]).dictionary_encode())
    assert strs[0] == strs[2] != strs[1]
    with pytest.raises(ldp_dask.InputDataError, match="null"):
        person_ids(pa.array(["a", None]))


@pytest.mark.cluster
def test_a_release_per_person_is_the_same_on_a_cluster_and_in_process(tmp_path, cluster):
    df = _people(np.random.default_rng(1))
    d = tmp_path / "d"
    d.mkdir()
    for i in range(3):  # a person's rows spread over several files
        pq.write_table(pa.Table.from_pandas(df.iloc[i::3], preserve_index=False), d / f"part-{i}.parquet")
    ch = build_channel("histogram", 1.0, (0, 1), bins=16)
    per_file = -(-len(df) // 3)  # one task, so one bucket of persons, per file: a real shuffle
    common = dict(seed=3, privacy_unit="user", max_contributions=2, partition_rows=per_file)
    on_cluster = ldp_dask.privatize(str(d), "x", ch, client=cluster.scheduler.address, **common)
    in_process = ldp_dask.privatize(str(d), "x", ch, client="local", **common)
    assert on_cluster.same_release(in_process)
    # the cluster cuts the rows into one map task per worker, this process into one: a mean of floats, whose sums
    # depend on the order of the kept rows, is still bit-identical
    mean = build_channel("mean", 1.0, (0, 1))
    assert ldp_dask.privatize(str(d), "x", mean, client=cluster.scheduler.address, **common).same_release(
        ldp_dask.privatize(str(d), "x", mean, client="local", **common))
    assert on_cluster.n == 2 * df["user"].nunique() and on_cluster.channel.epsilon == 0.5  # k reports per person
    assert on_cluster.privacy_unit == "user" and on_cluster.epsilon_per_unit == 1.0
    # categories, string ids, rows mode: the same path (another unit on the same rows: not recorded, since a ledger
    # refuses to add ε per "user" and per "name" up)
    rr = build_channel("rr", 1.0, None, categories=["a", "b", "c"])
    a = ldp_dask.privatize(str(d), "c", rr, client=cluster.scheduler.address, seed=3, privacy_unit="name",
                           mode="rows", rows_path=tmp_path / "rows", partition_rows=per_file, ledger=False)
    b = ldp_dask.privatize(str(d), "c", rr, client="local", seed=3, privacy_unit="name", partition_rows=per_file,
                           ledger=False)
    assert a.n == b.n == df["name"].nunique() and len(list((tmp_path / "rows").iterdir())) == 3


@pytest.mark.cluster
def test_central_quantiles_per_person(tmp_path, cluster, capsys):
    df = _people(np.random.default_rng(6), n=40_000)
    d = tmp_path / "d"
    d.mkdir()
    for i in range(2):
        pq.write_table(pa.Table.from_pandas(df.iloc[i::2], preserve_index=False), d / f"part-{i}.parquet")
    from ldp_dask.central import quantiles

    common = dict(column="x", q=[0.25, 0.5, 0.75], epsilon=1.0, bounds=(0, 1), method="inverse-sensitivity",
                  seed=4, privacy_unit="user", max_contributions=3, exact_max=0)
    on_cluster = quantiles(str(d), client=cluster.scheduler.address, **common)
    in_process = quantiles(str(d), client="local", **common)
    assert np.array_equal(on_cluster.values, in_process.values)  # the same kept rows, the same noise
    assert on_cluster.n == 3 * df["user"].nunique()  # k records per person
    assert on_cluster.epsilon == 1.0 and on_cluster.details["epsilon_per_record"] == pytest.approx(1 / 3)
    assert sum(on_cluster.epsilon_split["per_quantile"]) == pytest.approx(1 / 3)  # the mechanism ran at ε/k
    facts = dict(on_cluster.describe().facts)
    assert facts["privacy unit"] == "user" and "3 records each" in facts["neighbours"]
    assert facts["population estimated"] == "each user weighted equally"
    # x is independent of the person, so the kept rows are Beta(2,5): 0.05 is ~20 sampling sd of a quartile
    # on these ~7k rows, and ~700 ranks of the mechanism's error (tail ~e^{-εr/2} = e^{-39} at ε/9)
    truth = stats.beta(2, 5).ppf([0.25, 0.5, 0.75])
    assert np.all(np.abs(on_cluster.values - truth) < 0.05)
    # the exact path (sorted kept values, in process) keeps the same rows
    exact = quantiles(df, **{**common, "exact_max": 10**6})
    assert exact.n == on_cluster.n and exact.details["data_path"] == "exact"
    assert np.all(np.abs(exact.values - truth) < 0.05)


def test_the_estimate_is_of_the_kept_rows():
    # with k = 1, each person's row is one uniformly chosen row: the estimate is of the persons' rows, not
    # of all rows. Persons here hold 1 row at 0.1 or 50 rows at 0.9; rows: 98% at 0.9, persons: 50/50.
    rng = np.random.default_rng(4)
    few = pd.DataFrame({"user": np.arange(20_000), "x": 0.1})
    many = pd.DataFrame({"user": np.repeat(np.arange(20_000, 20_400), 50), "x": 0.9})
    df = pd.concat([few, many], ignore_index=True).sample(frac=1, random_state=rng)
    s = ldp_dask.privatize(df, "x", build_channel("mean", 2.0, (0, 1)), seed=5, privacy_unit="user")
    est = ldp_dask.estimate(s)
    assert s.n == 20_400
    truth = (20_000 * 0.1 + 400 * 0.9) / 20_400
    # the estimator's own interval; 6 standard errors keeps the false-failure rate below 1e-8
    assert abs(est.value - truth) < 6 * est.se


@pytest.mark.slow
@pytest.mark.parametrize("name, k", [("histogram", 2), ("mean", 3), ("rr", 2)])
def test_the_audit_of_a_whole_person_stays_within_the_claim(name, k):
    # a person with 7 rows; the release keeps k of them at ε/k. The audit is a 1 − α lower confidence
    # bound on the ε realised about the person, with α = 1e-3: a correct release exceeds its claim with
    # probability ≤ 1e-3. The negative control keeps all 7 rows: realised ε = 7/k × 1, which the same
    # audit must detect. Measured with these seeds: the correct releases bound 0.93 (histogram), 0.95 (mean),
    # 0.97 (rr) against the claim 1; the controls 2.36, 1.96, 2.67 against their true 3.5, 2.33, 3.5.
    ch = (build_channel("rr", 1.0, None, categories=["a", "b", "c"]) if name == "rr"
          else build_channel(name, 1.0, (0, 1), bins=4) if name == "histogram" else build_channel(name, 1.0, (0, 1)))
    good = audit_person(ch, k, 7, samples=200_000, rng=np.random.default_rng(7), alpha=1e-3)
    assert good.epsilon_lower <= ch.epsilon, good.to_dict()
    bad = audit_person(ch, k, 7, samples=200_000, rng=np.random.default_rng(8), alpha=1e-3,
                       bound_contributions=False)
    assert bad.epsilon_lower > ch.epsilon, bad.to_dict()


@pytest.mark.parametrize("name", ["histogram", "mean", "rr"])
def test_the_audit_of_a_persons_row_count_stays_within_the_claim(name):
    # neighbouring datasets: the person owns 1 row at x, or 3 rows at x' (k = 2). What is seen of it is the
    # number of its reports and their values; the audit's statistic separates the two counts whenever they
    # differ. 1 − α lower confidence bound with α = 1e-3 (a correct release exceeds its claim with probability
    # ≤ 1e-3). Measured with these seeds: 0.90 (histogram), 0.94 (mean), 0.95 (rr) against the claim 1. The
    # negative control bounds without padding (min(k, rows) reports, as releases did before): 8.8-9.3, the most
    # 200,000 samples can show of an unbounded ε.
    ch = (build_channel("rr", 1.0, None, categories=["a", "b", "c"]) if name == "rr"
          else build_channel(name, 1.0, (0, 1), bins=4) if name == "histogram" else build_channel(name, 1.0, (0, 1)))
    good = audit_person(ch, 2, 1, rows_prime=3, samples=200_000, rng=np.random.default_rng(9), alpha=1e-3)
    assert good.epsilon_lower <= ch.epsilon, good.to_dict()
    bad = audit_person(ch, 2, 1, rows_prime=3, samples=200_000, rng=np.random.default_rng(9), alpha=1e-3, pad=False)
    assert bad.epsilon_lower > 3 * ch.epsilon, bad.to_dict()


def test_neighbouring_row_counts_publish_the_same_count_and_metadata(tmp_path):
    # one person owns 1 row or 3 (k = 2): every published number but the noisy sums is the same, for every key,
    # local and central; the sums' law is the audit's above
    base = _people(np.random.default_rng(11), persons=400, n=3_000)
    extra = pd.DataFrame({"user": [10**6] * 3, "name": ["z"] * 3, "x": [0.5, 0.6, 0.7], "c": ["a"] * 3})
    one, three = pd.concat([base, extra.iloc[:1]]), pd.concat([base, extra])
    persons = base["user"].nunique() + 1
    from ldp_dask.central import quantiles

    for seed in range(3):
        common = dict(seed=seed, privacy_unit="user", max_contributions=2, ledger=False)
        a, b = (ldp_dask.privatize(d, "x", build_channel("histogram", 1.0, (0, 1), bins=8), **common)
                for d in (one, three))
        assert a.n == b.n == 2 * persons
        ma, mb = a.file_metadata(), b.file_metadata()
        assert {k: v for k, v in ma.items() if k not in ("content_tag", "mac", "created")} == \
            {k: v for k, v in mb.items() if k not in ("content_tag", "mac", "created")}
        qa, qb = (quantiles(d, column="x", q=[0.5], epsilon=1.0, bounds=(0, 1), **common) for d in (one, three))
        assert qa.n == qb.n == 2 * persons


def test_without_a_unit_every_output_says_privacy_unit_row(tmp_path, capsys):
    df = _people(np.random.default_rng(2), n=5_000)
    path = tmp_path / "d.parquet"
    df.to_parquet(path)
    base = ["privatize", str(path), "--column", "x", "--channel", "histogram", "--bins", "8", "--domain", "0", "1",
            "--epsilon", "1", "--local", "--seed", "1", "--no-ledger"]
    assert main([*base, "--out", str(tmp_path / "a.parquet")]) == 0
    assert "privacy unit: row, ε 1 per row" in capsys.readouterr().out
    assert main([*base, "--out", str(tmp_path / "b.parquet"), "--privacy-unit", "user", "--max-contributions",
                 "4"]) == 0
    assert ("privacy unit: user, ε 1 per user (4 reports each, ε 0.25 per report; estimates weigh each user "
            "equally)") in capsys.readouterr().out
    a, b = (ldp_dask.read_summary(tmp_path / f"{n}.parquet") for n in "ab")
    assert a.file_metadata()["privacy_unit"] == "row" and b.file_metadata()["privacy_unit"] == "user"
    assert dict(a.describe().facts)["privacy unit"] == "row"
    facts = dict(b.describe().facts)
    assert facts["privacy unit"].startswith("user") and facts["ε per user"] == "1"
    assert facts["population estimated"] == "each user weighted equally"
    assert dict(a.describe().facts)["population estimated"] == "rows"
    assert main(["privatize", str(path), "--column", "x", "--channel", "mean", "--domain", "0", "1", "--epsilon", "1",
                 "--local", "--seed", "1", "--no-ledger", "--out", str(tmp_path / "c.parquet"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["privacy_unit"] == "row" and info["epsilon_per_unit"] == 1.0


@pytest.mark.parametrize("source, unit, match", [
    ("array", "user", "DataFrame or a pyarrow Table"),
    ("frame", "nope", "not found"),
    ("frame", "x", "cannot be the released column"),
    ("frame", "f", "integer or string id"),
])
def test_bad_privacy_units_are_refused(source, unit, match):
    df = _people(np.random.default_rng(3), n=1_000).assign(f=0.5)
    src = df["x"].to_numpy() if source == "array" else df
    with pytest.raises(LdpDaskError, match=match):
        ldp_dask.privatize(src, "x", build_channel("mean", 1.0, (0, 1)), seed=1, privacy_unit=unit)
    with pytest.raises(LdpDaskError, match="needs 'privacy_unit'"):
        ldp_dask.privatize(df, "x", build_channel("mean", 1.0, (0, 1)), seed=1, max_contributions=2)


@pytest.mark.slow
@pytest.mark.cluster
def test_the_large_shuffle_releases_what_the_direct_one_does(cluster, tmp_path, monkeypatch):
    """Above SHUFFLE_DIRECT_ROWS rows a unit release moves its rows with Dask's DataFrame shuffle, one bucket per
    partition: the same persons keep the same rows in the same order, so a count release and a release whose
    sums depend on the rows' order (a mean of floats) are bit-identical to the direct shuffle's."""
    import ldp_dask.engine

    rng = np.random.default_rng(9)
    d = tmp_path / "people"
    d.mkdir()
    for f in range(4):
        pq.write_table(pa.table({"x": rng.beta(2, 5, 6_000), "user": rng.integers(0, 1_500, 6_000)}),
                       d / f"part-{f}.parquet", row_group_size=2_000)
    hist = ldp_dask.LaplaceHistogram(1.0, 16, (0.0, 1.0))
    mean = ldp_dask.LaplaceMean(1.0, (0.0, 1.0))
    run = {"client": cluster, "seed": 5, "privacy_unit": "user", "max_contributions": 2, "partition_rows": 3_000}
    direct = ldp_dask.privatize(str(d), "x", hist, **run)
    monkeypatch.setattr(ldp_dask.engine, "SHUFFLE_DIRECT_ROWS", 0)
    large = ldp_dask.privatize(str(d), "x", hist, **run)
    assert large.same_release(direct) and large.n == direct.n
    large_mean = ldp_dask.privatize(str(d), "x", mean, **run)
    monkeypatch.setattr(ldp_dask.engine, "SHUFFLE_DIRECT_ROWS", 1 << 27)
    assert large_mean.same_release(ldp_dask.privatize(str(d), "x", mean, **run))


@pytest.mark.cluster
def test_the_large_shuffle_names_bad_data_in_one_line(cluster, tmp_path, monkeypatch):
    """On the large path a null person (met while tagging) and a NaN value (met when a bucket is released) each
    reach the driver as one InputDataError naming the problem, as on the direct path."""
    import ldp_dask.engine

    monkeypatch.setattr(ldp_dask.engine, "SHUFFLE_DIRECT_ROWS", 0)
    ch = ldp_dask.LaplaceHistogram(1.0, 8, (0.0, 1.0))
    run = {"client": cluster, "seed": 5, "privacy_unit": "user", "partition_rows": 500}
    users = pa.array([1, None, *range(2, 1_000)], pa.int64())
    # no column statistics: the footers cannot refuse it, so the workers meet it
    pq.write_table(pa.table({"x": np.linspace(0, 1, 1_000), "user": users}), tmp_path / "nulls.parquet",
                   write_statistics=False)
    with pytest.raises(ldp_dask.InputDataError, match="privacy unit column contains null values"):
        ldp_dask.privatize(str(tmp_path / "nulls.parquet"), "x", ch, **run)
    x = np.linspace(0, 1, 1_000)
    x[700] = np.nan
    pq.write_table(pa.table({"x": x, "user": np.arange(1_000)}), tmp_path / "nan.parquet", write_statistics=False)
    with pytest.raises(ldp_dask.InputDataError, match="NaN"):
        ldp_dask.privatize(str(tmp_path / "nan.parquet"), "x", ch, **run)


def test_a_parameter_chosen_from_the_row_count_is_refused_with_a_unit(tmp_path, capsys):
    # bins chosen from n would publish a function of the raw row count, which one person's rows move
    path = tmp_path / "d.parquet"
    _people(np.random.default_rng(5), n=2_000).to_parquet(path)
    base = ["privatize", str(path), "--column", "x", "--channel", "histogram", "--domain", "0", "1", "--epsilon", "1",
            "--local", "--seed", "1", "--privacy-unit", "user", "--out", str(tmp_path / "s.parquet")]
    assert main(base) == 2
    assert "bins cannot be chosen from the number of rows" in capsys.readouterr().err
    assert not (tmp_path / "s.parquet").exists()
    assert main([*base, "--bins", "8"]) == 0  # given explicitly: released


def test_rows_whose_unit_is_null_are_refused_or_dropped(tmp_path, capsys):
    # 343 rows of no person (a null unit) beside 300 persons: refused by default, from the footers; dropped with
    # --unit-nulls drop, when nothing released depends on them — two tables that differ only in those rows' values
    # give bit-identical releases, and n = k × the 300 persons
    rng = np.random.default_rng(21)
    user = pa.array([None if i % 7 == 0 else int(i % 300) for i in range(2_400)], pa.int64())
    x = rng.random(2_400)
    for name, fill in (("a", 0.05), ("b", 0.95)):
        xs = np.where(np.arange(2_400) % 7 == 0, fill, x)
        (tmp_path / name).mkdir()  # one file name in two directories: the same plan, the same keys
        pq.write_table(pa.table({"x": xs, "user": user}), tmp_path / name / "d.parquet")
    base = ["privatize", "--column", "x", "--channel", "histogram", "--bins", "8", "--domain", "0", "1",
            "--epsilon", "1", "--local", "--seed", "1", "--privacy-unit", "user", "--max-contributions", "2",
            "--no-ledger"]
    assert main([*base[:1], str(tmp_path / "a"), *base[1:], "--out", str(tmp_path / "r.parquet")]) == 2
    assert "--unit-nulls drop" in capsys.readouterr().err and not (tmp_path / "r.parquet").exists()
    for name in "ab":
        assert main([*base[:1], str(tmp_path / name), *base[1:], "--unit-nulls", "drop", "--out",
                     str(tmp_path / f"{name}-s.parquet")]) == 0
    a, b = (ldp_dask.read_summary(tmp_path / f"{n}-s.parquet") for n in "ab")
    assert a.same_release(b) and a.n == 2 * 300
    # in memory, the same rule
    df = pd.DataFrame({"x": x, "user": pd.array(user.to_pylist(), dtype="Int64")})
    with pytest.raises(ldp_dask.InputDataError, match="unit-nulls drop"):
        ldp_dask.privatize(df, "x", build_channel("mean", 1.0, (0, 1)), seed=1, privacy_unit="user", ledger=False)
    s = ldp_dask.privatize(df, "x", build_channel("mean", 1.0, (0, 1)), seed=1, privacy_unit="user",
                           unit_nulls="drop", ledger=False)
    assert s.n == 300
