"""The edges of the input, through the command line: each ends before any work with one line naming the parameter,
the value and what is allowed — exit 2, nothing in the ledger, nothing written — or works."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask.cli import main
from ldp_dask.ledger import open_ledger


@pytest.fixture()
def table(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    rng = np.random.default_rng(0)
    pq.write_table(pa.table({"x": rng.uniform(-5e5, 5e5, 4_000),
                             "c": pa.array(["a", "b", None, "z"] * 1_000)}), d / "part-0.parquet")
    return d


def _refused(capsys, args, *said):
    with pytest.raises(SystemExit) as exc:
        rc = main(args)
        raise SystemExit(rc)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2, err
    assert len(err.splitlines()) == 1, err
    for words in said:
        assert words in err, err
    return err


def _nothing_charged(ledger, out):
    assert open_ledger(str(ledger)).entries() == []
    assert not out.exists()


RELEASE = ["privatize", "--column", "x", "--channel", "mean", "--local", "--seed", "1"]


def test_a_negative_domain_in_any_notation_works(table, tmp_path, capsys):
    led = tmp_path / "l.sqlite"
    assert main([*RELEASE, str(table), "--epsilon", "1", "--domain", "-1e6", "1e6", "--out",
                 str(tmp_path / "s.parquet"), "--ledger", str(led)]) == 0
    assert "ε 1 per row spent" in capsys.readouterr().err
    assert main(["estimate", str(tmp_path / "s.parquet"), "--seed", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["domain"] == [-1e6, 1e6]


@pytest.mark.parametrize("flags,said", [
    (["--epsilon", "1", "--domain", "0", "1.7e308"], ("'domain'", "2^53", "1.7e+308")),
    (["--epsilon", "1e-12", "--domain", "-1e6", "1e6"], ("'epsilon'", "at least 1e-06", "1e-12")),
])
def test_an_impossible_domain_or_epsilon_is_refused_before_any_work(table, tmp_path, capsys, flags, said):
    led, out = tmp_path / "l.sqlite", tmp_path / "s.parquet"
    _refused(capsys, [*RELEASE, str(table), *flags, "--out", str(out), "--ledger", str(led)], *said)
    _nothing_charged(led, out)


def test_an_output_that_vanishes_with_the_process_is_refused_for_a_charged_release(table, tmp_path, capsys):
    led = tmp_path / "l.sqlite"
    _refused(capsys, [*RELEASE, str(table), "--epsilon", "1", "--domain", "-1e6", "1e6", "--out",
                      "memory://somewhere/s.parquet", "--ledger", str(led)], "memory://", "charged")
    assert open_ledger(str(led)).entries() == []


def test_ledger_paths_are_absolute_and_an_empty_home_is_refused(table, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LDP_DASK_LEDGER", "relative.sqlite")
    assert main([*RELEASE, str(table), "--epsilon", "1", "--domain", "-1e6", "1e6", "--out", "s.parquet"]) == 0
    assert f"({tmp_path / 'relative.sqlite'})" in capsys.readouterr().err  # the receipt names it whole
    monkeypatch.delenv("LDP_DASK_LEDGER")
    monkeypatch.setenv("HOME", "")
    _refused(capsys, [*RELEASE, str(table), "--epsilon", "1", "--domain", "-1e6", "1e6", "--out", "t.parquet"],
             "HOME is ''", "LDP_DASK_LEDGER")
    assert not (tmp_path / "t.parquet").exists()


@pytest.mark.parametrize("content,said", [
    (b"\xff\xfe[[statistic]]\n", "is not UTF-8 text"),
    (b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "nests its tables or arrays too deeply"),
])
def test_a_plan_that_is_not_a_plan_is_one_line(table, tmp_path, capsys, content, said):
    plan = tmp_path / "plan.toml"
    plan.write_bytes(content)
    err = _refused(capsys, ["plan", "check", str(plan), str(table), "--epsilon", "1"], said)
    assert str(plan) in err


def test_plan_check_does_not_read_an_endless_file(table, capsys):
    _refused(capsys, ["plan", "check", "/dev/zero", str(table), "--epsilon", "1"], "larger than 16 MiB")


def test_nulls_as_a_plan_spells_them_and_a_null_category_is_other(table, tmp_path, capsys):
    """`--nulls 0` as a plan's `nulls = 0` (it was refused on the command line); with --other a null category
    counts as "other" (it was refused), and the summary records the policy."""
    d = tmp_path / "with-nulls"
    d.mkdir()
    pq.write_table(pa.table({"x": pa.array([0.5, None] * 500)}), d / "p.parquet")
    assert main(["privatize", str(d), "--column", "x", "--channel", "mean", "--domain", "0", "1", "--epsilon", "1",
                 "--local", "--no-ledger", "--seed", "1", "--nulls", "0", "--out", str(tmp_path / "n.parquet")]) == 0
    capsys.readouterr()
    assert main(["privatize", str(table), "--column", "c", "--channel", "rr", "--categories", "a", "b", "--other",
                 "--epsilon", "4", "--local", "--no-ledger", "--seed", "1", "--out", str(tmp_path / "c.parquet")]) == 0
    capsys.readouterr()
    assert main(["estimate", str(tmp_path / "c.parquet"), "--seed", "1", "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert est["summary_integrity"] == "verified"
    meta = ldp_dask.read_summary(tmp_path / "c.parquet", allow_unverified=True).metadata
    assert meta["nulls"] == {"policy": "value", "value": "__other__"}
    shares = dict(zip(est["labels"], est["frequencies"]))
    assert abs(shares["__other__"] - 0.5) < 0.05  # the nulls (1/4) and 'z' (1/4); se ≈ 0.008 at ε 4


def test_estimate_takes_the_key_and_cuts_a_long_table(tmp_path, capsys):
    d = tmp_path / "many"
    d.mkdir()
    cats = [f"k{i}" for i in range(300)]
    pq.write_table(pa.table({"c": np.random.default_rng(1).choice(cats, 30_000)}), d / "p.parquet")
    (tmp_path / "cats.txt").write_text("\n".join(cats))
    key = tmp_path / "release.key"
    key.write_bytes(bytes(range(32)))
    key.chmod(0o600)
    assert main(["privatize", str(d), "--column", "c", "--channel", "rr", "--categories-file",
                 str(tmp_path / "cats.txt"), "--epsilon", "4", "--local", "--no-ledger", "--secret-file", str(key),
                 "--out", str(tmp_path / "s.parquet")]) == 0
    capsys.readouterr()
    assert main(["estimate", str(tmp_path / "s.parquet"), "--secret-file", str(key)]) == 0
    text = capsys.readouterr().out
    assert "verified" in text and "not verified" not in text
    assert sum(line.lstrip().startswith("k") for line in text.splitlines()) < 70 and "--json" in text
    assert main(["estimate", str(tmp_path / "s.parquet"), "--secret-file", str(key), "--all"]) == 0
    assert sum(line.lstrip().startswith("k") for line in capsys.readouterr().out.splitlines()) == 300
    assert main(["report", str(tmp_path / "s.parquet"), "--secret-file", str(key), "--out",
                 str(tmp_path / "s.html")]) == 0  # the page too, verified under the key
    page = (tmp_path / "s.html").read_text()
    assert "integrity</th><td>verified" in page, page[:2000]


# --- the rest of the adversarial sweep ---------------------------------------------------------------------------
def test_an_epsilon_spelled_with_an_underscore_is_not_read_as_ten(table, tmp_path, capsys):
    led, out = tmp_path / "l.sqlite", tmp_path / "s.parquet"
    _refused(capsys, [*RELEASE, str(table), "--epsilon", "1_0", "--domain", "-1e6", "1e6", "--out", str(out),
                      "--ledger", str(led)], "'1_0' is not a plain number")
    _nothing_charged(led, out)


def test_a_key_file_others_can_read_is_said_and_a_key_path_is_not_key_material(table, tmp_path, capsys):
    key = tmp_path / "release.key"
    key.write_text("0123456789abcdef0123456789abcdef\n")
    key.chmod(0o644)
    out = tmp_path / "s.parquet"
    assert main(["privatize", str(table), "--column", "x", "--channel", "mean", "--domain", "-1e6", "1e6",
                 "--epsilon", "1", "--local", "--no-ledger", "--secret-file", str(key), "--out", str(out)]) == 0
    assert "readable or writable by others (mode 0644)" in capsys.readouterr().err
    with pytest.raises(ldp_dask.LdpDaskError, match="is key material, not a file"):
        ldp_dask.read_summary(out, key=str(key))
    assert ldp_dask.read_summary(out, key=key.read_text().strip().encode()).integrity == "verified"


def test_control_characters_in_labels_are_shown_escaped(tmp_path, capsys):
    d = tmp_path / "ansi"
    d.mkdir()
    label = "\x1b[31mred\x1b[0m"
    pq.write_table(pa.table({"c": [label, "plain"] * 500}), d / "p.parquet")
    assert main(["privatize", str(d), "--column", "c", "--channel", "rr", "--categories", label, "plain",
                 "--epsilon", "2", "--local", "--no-ledger", "--seed", "1", "--out", str(tmp_path / "c.parquet")]) == 0
    capsys.readouterr()
    assert main(["estimate", str(tmp_path / "c.parquet"), "--seed", "1"]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\\x1b[31mred\\x1b[0m" in text


SPLIT = """
[[statistic]]
column = "x"
target = "mean"
domain = [-1e6, 1e6]

[[statistic]]
column = "x"
target = "distribution"
domain = [-1e6, 1e6]
bins = {bins}
"""


def test_a_row_split_that_could_leave_a_statistic_no_rows_is_not_chosen(tmp_path, capsys):
    d = tmp_path / "small"
    d.mkdir()
    pq.write_table(pa.table({"x": np.linspace(-1e5, 1e5, 40)}), d / "p.parquet")
    (tmp_path / "p.toml").write_text(SPLIT.format(bins=4))
    _refused(capsys, ["plan", "check", str(tmp_path / "p.toml"), str(d), "--epsilon", "4", "--design", "split-rows"],
             "fewer than 30", "split ε instead")
    assert main(["plan", "check", str(tmp_path / "p.toml"), str(d), "--epsilon", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["design"] == "split-epsilon"


def test_a_plan_edited_between_nights_starts_a_new_series(tmp_path, capsys):
    d = tmp_path / "nights"
    d.mkdir()
    pq.write_table(pa.table({"x": np.linspace(-1e5, 1e5, 4_000)}), d / "day-1.parquet")
    (tmp_path / "p.toml").write_text(SPLIT.format(bins=8))
    common = ["--epsilon", "2", "--local", "--no-ledger", "--seed", "1", "--design", "split-epsilon"]
    assert main(["release", str(tmp_path / "p.toml"), str(d), "--incremental", "--out", str(tmp_path / "n1"),
                 *common]) == 0
    capsys.readouterr()
    pq.write_table(pa.table({"x": np.linspace(-1e5, 1e5, 4_000)}), d / "day-2.parquet")
    (tmp_path / "p.toml").write_text(SPLIT.format(bins=16))
    _refused(capsys, ["release", str(tmp_path / "p.toml"), str(d), "--since", str(tmp_path / "n1"), "--out",
                      str(tmp_path / "n2"), *common], "now declares bins = 16", "released bins = 8")
    assert not (tmp_path / "n2").exists()


def test_a_refused_release_leaves_no_empty_output_directory(table, tmp_path, capsys):
    """The output's parent is made when the output is staged, not when it is checked: a release refused for its
    budget leaves no directory behind (it left an empty one); one that runs makes it."""
    led = tmp_path / "l.sqlite"
    assert main(["budget", "set", "t", "--source", str(table), "--limit", "0.5", "--ledger", str(led)]) == 0
    out = tmp_path / "new" / "deeper" / "s.parquet"
    _refused(capsys, [*RELEASE, str(table), "--epsilon", "1", "--domain", "-1e6", "1e6", "--out", str(out),
                      "--ledger", str(led)], "budget 0.5")
    _nothing_charged(led, tmp_path / "new")
    assert main([*RELEASE, str(table), "--epsilon", "0.5", "--domain", "-1e6", "1e6", "--out", str(out),
                 "--ledger", str(led)]) == 0
    assert out.is_file()


def test_a_file_output_over_a_directory_is_refused_before_any_work(table, tmp_path, capsys):
    """``--out DIR --overwrite`` ended in IsADirectoryError after the work: refused first, the directory kept."""
    led, folder = tmp_path / "l.sqlite", tmp_path / "folder"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    _refused(capsys, [*RELEASE, str(table), "--epsilon", "1", "--domain", "-1e6", "1e6", "--out", str(folder),
                      "--overwrite", "--ledger", str(led)], "is a directory", "name a file")
    assert open_ledger(str(led)).entries() == [] and (folder / "keep.txt").read_text() == "mine"


def test_a_categories_file_that_is_not_utf8_is_one_line(table, tmp_path, capsys):
    led, cats = tmp_path / "l.sqlite", tmp_path / "cats.txt"
    cats.write_bytes(b"a\n\xff\xfeb\n")
    out = tmp_path / "c.parquet"
    _refused(capsys, ["privatize", str(table), "--column", "c", "--channel", "rr", "--categories-file", str(cats),
                      "--epsilon", "1", "--out", str(out), "--ledger", str(led), "--local"],
             "--categories-file", "not UTF-8", "byte 2")
    _nothing_charged(led, out)


@pytest.mark.parametrize("flip,said", [(1, "deserialize thrift"), (8, "snappy")])
def test_a_corrupt_page_names_its_file_in_one_line(tmp_path, capsys, flip, said):
    """A page header or a snappy page that does not decode: Arrow's OSError ('OSError: Couldn't deserialize
    thrift', no file named, retried as if transient) is one line naming the file, exit 2, nothing charged."""
    import io

    data, led, out = tmp_path / "data", tmp_path / "l.sqlite", tmp_path / "s.parquet"
    data.mkdir()
    buf = io.BytesIO()
    pq.write_table(pa.table({"x": np.random.default_rng(0).random(1_000)}), buf, compression="snappy",
                   use_dictionary=False)
    raw = bytearray(buf.getvalue())
    raw[pq.ParquetFile(io.BytesIO(bytes(raw))).metadata.row_group(0).column(0).data_page_offset + flip] ^= 0xFF
    (data / "p.parquet").write_bytes(bytes(raw))
    err = _refused(capsys, ["privatize", str(data), "--column", "x", "--channel", "histogram", "--bins", "8",
                            "--domain", "0", "1", "--epsilon", "1", "--out", str(out), "--ledger", str(led),
                            "--local", "--seed", "1"], "p.parquet", "could not be read as Parquet", said)
    assert err.count("p.parquet") == 1, err
    _nothing_charged(led, out)


def test_quantiles_of_a_summary_refuse_the_central_options_they_would_ignore(table, tmp_path, capsys):
    """``quantiles SUMMARY --bounds … --epsilon …`` printed the summary's quantiles and ignored both: refused,
    naming them; without them it works."""
    s = tmp_path / "s.parquet"
    assert main(["privatize", str(table), "--column", "x", "--channel", "histogram", "--bins", "16", "--local",
                 "--seed", "1", "--epsilon", "1", "--domain", "-1e6", "1e6", "--out", str(s), "--no-ledger"]) == 0
    capsys.readouterr()
    _refused(capsys, ["quantiles", str(s), "--bounds", "0", "1", "--epsilon", "1", "--seed", "1"],
             "--bounds, --epsilon apply to central quantiles", "leave them out")
    _refused(capsys, ["quantiles", str(s), "--method", "laplace", "--seed", "1"], "--method")
    assert main(["quantiles", str(s), "--seed", "1", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["values"]) == 9


def test_an_incremental_night_refuses_a_ledger_that_forgot_the_night_before(tmp_path, capsys):
    """Night 2's summary records the ledger entry that charged it; restoring the copy taken after night 1, or
    deleting the ledger, makes night 3 refuse in one line: exit 2, nothing charged, nothing written."""
    import shutil

    data, spare = tmp_path / "t", tmp_path / "later"
    data.mkdir()
    spare.mkdir()
    for day in range(3):
        pq.write_table(pa.table({"x": np.random.default_rng(day).random(2_000)}),
                       (data if day == 0 else spare) / f"day{day}.parquet")
    led = tmp_path / "l.sqlite"
    night = ["privatize", str(data), "--column", "x", "--channel", "histogram", "--bins", "8", "--domain", "0", "1",
             "--epsilon", "1", "--seed", "3", "--local", "--incremental", "--ledger", str(led)]
    assert main([*night, "--out", str(tmp_path / "n1.parquet")]) == 0
    shutil.copy(led, tmp_path / "copy.sqlite")
    (spare / "day1.parquet").rename(data / "day1.parquet")
    assert main([*night, "--out", str(tmp_path / "n2.parquet"), "--since", str(tmp_path / "n2.parquet")
                 .replace("n2", "n1")]) == 0
    (spare / "day2.parquet").rename(data / "day2.parquet")
    shutil.copy(tmp_path / "copy.sqlite", led)
    capsys.readouterr()
    third = [*night, "--out", str(tmp_path / "n3.parquet"), "--since", str(tmp_path / "n2.parquet")]
    _refused(capsys, third, "n2.parquet", "entry #2", "newest entry is #1", "restored from an older copy")
    assert len(open_ledger(str(led)).entries()) == 1 and not (tmp_path / "n3.parquet").exists()
    led.unlink()
    _refused(capsys, third, "recorded by another ledger")
    _nothing_charged(led, tmp_path / "n3.parquet")


def test_a_future_date_directory_is_refused_for_a_window(tmp_path, capsys):
    """A stray date=2099-01-01/ was the newest day of --window 3d, so the window held it alone (every real day
    left out, without a word): refused in one line naming it, nothing charged; removed, the window works."""
    data, led = tmp_path / "t", tmp_path / "l.sqlite"
    for day in ("2026-11-20", "2026-11-21", "2099-01-01"):
        (data / f"date={day}").mkdir(parents=True)
        pq.write_table(pa.table({"x": np.random.default_rng(1).random(500)}), data / f"date={day}" / "p.parquet")
    args = ["privatize", str(data), "--column", "x", "--channel", "histogram", "--bins", "8", "--domain", "0", "1",
            "--epsilon", "1", "--window", "3d", "--seed", "1", "--local", "--ledger", str(led),
            "--out", str(tmp_path / "w.parquet")]
    _refused(capsys, args, "date=2099-01-01", "in the future", "remove or rename it")
    _nothing_charged(led, tmp_path / "w.parquet")
    import shutil

    shutil.rmtree(data / "date=2099-01-01")
    assert main(args) == 0
    assert ldp_dask.read_summary(tmp_path / "w.parquet", key=ldp_dask.noise.resolve_secret(seed=1)).n == 1_000


def test_strings_in_arrows_view_layout_are_strings(tmp_path):
    """delta-rs writes the files a DELETE or UPDATE rewrites with ``string_view`` columns (and the Arrow schema
    saying so): frequencies with a privacy unit over such a file are released as over the same values stored as
    ``string`` (the same rows and persons; the noise differs, keyed by another file's footer)."""
    rng = np.random.default_rng(1)
    values, persons = rng.choice(["a", "b", "c"], 2_000), rng.choice([f"p{i}" for i in range(400)], 2_000)
    for name, kind in (("plain", pa.string()), ("views", pa.string_view())):
        (tmp_path / name).mkdir()
        pq.write_table(pa.table({"c": pa.array(values, kind), "who": pa.array(persons, kind)}),
                       tmp_path / name / "part-0.parquet")
    assert pq.read_schema(tmp_path / "views" / "part-0.parquet").field("c").type == pa.string_view()
    channel = ldp_dask.HadamardResponse(1.0, ["a", "b", "c"])
    kw = dict(seed=2, client="local", ledger=False, privacy_unit="who", max_contributions=3)
    plain, views = (ldp_dask.privatize(str(tmp_path / n), "c", channel, **kw) for n in ("plain", "views"))
    assert views.n == plain.n == 3 * len(np.unique(persons))  # each person padded to exactly k = 3 reports
