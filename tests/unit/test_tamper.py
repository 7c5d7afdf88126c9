"""Summaries defend themselves: a tampered file ends in one clear error or a "not verified" mark, never a
silent number."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldp_dask
from ldp_dask.channels import build_channel
from ldp_dask.cli import main
from ldp_dask.summary import METADATA_KEY

KEY = "tamper-test-key-0123456789abcdef"


@pytest.fixture()
def released(tmp_path, monkeypatch):
    """A histogram and an adaptive-Haar summary, released under a key held in a file."""
    (tmp_path / "key").write_text(KEY)
    (tmp_path / "key").chmod(0o600)  # a key file others can read is warned about
    x = np.random.default_rng(0).beta(2, 5, 20_000)
    out = {}
    for name, ch in (("hist", build_channel("histogram", 1.0, (0, 1), bins=8)),
                     ("adaptive", build_channel("haar-adaptive", 1.0, (0, 1), n=len(x)))):
        out[name] = tmp_path / f"{name}.parquet"
        ldp_dask.privatize(x, channel=ch, out=out[name], secret_file=tmp_path / "key")
    monkeypatch.delenv("LDP_DASK_SECRET", raising=False)
    monkeypatch.delenv("LDP_DASK_SECRET_FILE", raising=False)
    return tmp_path, out


def _tamper(path, meta=None, rows=None):
    """Rewrite a summary with changed metadata and/or (statistic, index, value) rows, keeping its MAC."""
    table = pq.read_table(path)
    m = json.loads(table.schema.metadata[METADATA_KEY])
    if meta:
        m.update(meta)
    data = {c: table.column(c).to_pylist() for c in ("statistic", "index", "value")}
    if rows:
        data = rows(data)
    new = pa.table({"statistic": pa.array(data["statistic"], pa.string()), "index": pa.array(data["index"], pa.int32()),
                    "value": pa.array(data["value"], pa.float64())})
    pq.write_table(new.replace_schema_metadata({METADATA_KEY: json.dumps(m).encode()}), path)


def _dup_index(d):
    d["index"][1] = d["index"][0]
    return d


def _drop_bin(d):
    return {k: v[:-1] for k, v in d.items()}


def _huge_group(d):
    i = d["statistic"].index("group_n")
    d["value"][i] = 1e15
    return d


def _nan(d):
    d["value"][2] = float("nan")
    return d


STRUCTURAL = {  # caught by validation alone, with or without a key
    "negative n": ("hist", {"n": -5}, None, "n must be an integer"),
    "float n": ("hist", {"n": 3.5}, None, "n must be an integer"),
    "duplicated index": ("hist", None, _dup_index, "exactly the indices"),
    "bins disagree with values": ("hist", {"channel_params": {"epsilon": 1.0, "bins": 16, "domain": [0.0, 1.0],
                                                               "noise": "lattice"}}, None, "exactly the indices"),
    "a bin missing": ("hist", None, _drop_bin, "exactly the indices"),
    "huge group size": ("adaptive", None, _huge_group, "group sizes"),
    "not finite": ("hist", None, _nan, "not finite"),
    "epsilon disagrees": ("hist", {"epsilon": 0.1}, None, "disagrees"),
    "unknown channel": ("hist", {"channel": "nope"}, None, "unknown channel"),
    "huge max contributions": ("hist", {"max_contributions": 10**12}, None, "max_contributions"),
}


@pytest.mark.parametrize("case", sorted(STRUCTURAL))
def test_a_structurally_broken_summary_is_one_clear_error(released, case, capsys):
    tmp_path, out = released
    which, meta, rows, needle = STRUCTURAL[case]
    _tamper(out[which], meta, rows)
    for argv in (["estimate", str(out[which])], ["report", str(out[which])],
                 ["verify", str(out[which]), "--secret-file", str(tmp_path / "key")]):
        if which == "adaptive" and argv[0] == "estimate":
            argv = ["gof", str(out[which]), "--null", "beta(2,5)"]
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is not a valid summary" in err[0] and needle in err[0], err
    assert not (tmp_path / f"{which}.html").exists()


def test_a_changed_value_fails_verification_and_is_marked_without_the_key(released, capsys, monkeypatch):
    tmp_path, out = released

    def shift(d):  # structurally valid: one count moved by 500
        d["value"][3] += 500.0
        return d

    _tamper(out["hist"], None, shift)
    capsys.readouterr()
    assert main(["verify", str(out["hist"]), "--secret-file", str(tmp_path / "key")]) == 2
    assert "modified after its release" in capsys.readouterr().err
    # without the key, the estimate is computed but says it is not verified
    assert main(["estimate", str(out["hist"])]) == 0
    assert re.search(r"summary integrity\s+not verified: no key at hand", capsys.readouterr().out)
    est = ldp_dask.estimate(str(out["hist"]))  # in Python, the estimate's description and JSON carry the mark
    assert dict(est.describe().facts)["summary integrity"].startswith("not verified")
    assert est.to_dict()["summary_integrity"].startswith("not verified") and "not verified" in est.to_markdown()
    # with the key in the environment, every reader refuses it
    monkeypatch.setenv("LDP_DASK_SECRET_FILE", str(tmp_path / "key"))
    assert main(["estimate", str(out["hist"])]) == 2
    assert "modified after its release" in capsys.readouterr().err
    with pytest.raises(ldp_dask.InputDataError, match="modified"):
        ldp_dask.estimate(str(out["hist"]))


def test_changed_metadata_fails_verification(released, capsys):
    tmp_path, out = released
    _tamper(out["hist"], {"column": "salary", "source": "elsewhere"})
    assert main(["verify", str(out["hist"]), "--secret-file", str(tmp_path / "key")]) == 2
    assert "modified after its release" in capsys.readouterr().err


def test_an_intact_summary_verifies_and_its_estimates_say_so(released, capsys, monkeypatch):
    tmp_path, out = released
    assert main(["verify", str(out["hist"]), "--secret-file", str(tmp_path / "key")]) == 0
    assert capsys.readouterr().out.startswith("verified:")
    assert main(["verify", str(out["hist"]), "--seed", "1"]) == 2  # another key cannot vouch for it
    assert "released under key id" in capsys.readouterr().err
    monkeypatch.setenv("LDP_DASK_SECRET_FILE", str(tmp_path / "key"))
    assert main(["estimate", str(out["hist"])]) == 0
    shown = capsys.readouterr().out
    assert re.search(r"summary integrity\s+verified", shown) and shown.count("summary integrity") == 1  # said once
    assert ldp_dask.read_summary(out["hist"]).verified
    facts = dict(ldp_dask.read_summary(out["hist"]).describe().facts)
    assert facts["integrity"] == "verified"


def test_a_summary_without_a_mac_is_marked_not_verified(tmp_path, capsys):
    s = ldp_dask.privatize(np.random.default_rng(1).random(1000), channel=build_channel("mean", 1.0, (0, 1)), seed=2)
    s.to_parquet(tmp_path / "plain.parquet")  # written without a key: no MAC
    assert not ldp_dask.read_summary(tmp_path / "plain.parquet").verified
    assert main(["verify", str(tmp_path / "plain.parquet"), "--seed", "2"]) == 2
    assert "carries no MAC" in capsys.readouterr().err
    s.to_parquet(tmp_path / "mac.parquet", key=ldp_dask.noise.resolve_secret(seed=2))
    assert main(["verify", str(tmp_path / "mac.parquet"), "--seed", "2"]) == 0


def test_bin_and_label_columns_are_public_and_checked(tmp_path, released):
    """Summary files carry what each sum stands for (bin edges, category labels) as plain columns, derived from the
    channel's public parameters; an edited column is caught on reading, whatever the key."""
    _, out = released
    t = pq.read_table(out["hist"])
    assert t.column_names == ["statistic", "index", "value", "bin_low", "bin_high"]
    assert t.column("bin_low").to_pylist() == pytest.approx(np.linspace(0, 1, 9)[:-1].tolist())
    edited = t.set_column(4, "bin_high", pa.array([0.5] * t.num_rows, pa.float64()))
    pq.write_table(edited, tmp_path / "edited.parquet")
    with pytest.raises(ldp_dask.LdpDaskError, match="bin or label columns disagree"):
        ldp_dask.read_summary(tmp_path / "edited.parquet")
    cats = ["01", "02", "<b>"]
    s = ldp_dask.privatize(np.array(cats * 50, dtype=object),
                           channel=ldp_dask.RandomizedResponse(1.0, categories=cats, other=True), seed=1)
    s.to_parquet(tmp_path / "rr.parquet")
    t = pq.read_table(tmp_path / "rr.parquet")
    assert t.column("label").to_pylist() == ["01", "02", "<b>", "__other__"]
    relabelled = t.set_column(3, "label", pa.array(["02", "01", "<b>", "__other__"]))
    pq.write_table(relabelled, tmp_path / "relabelled.parquet")
    with pytest.raises(ldp_dask.LdpDaskError, match="bin or label columns disagree"):
        ldp_dask.read_summary(tmp_path / "relabelled.parquet")
    assert "label" not in pq.read_table(out["adaptive"]).column_names  # Haar sums are coefficients, not bins


def _strip_mac(path) -> None:
    table = pq.read_table(path)
    m = json.loads(table.schema.metadata[METADATA_KEY])
    del m["mac"]
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(m).encode()}), path)


@pytest.mark.parametrize("how", ["stripped", "another key id"])
def test_with_the_key_at_hand_an_unverifiable_summary_is_refused_unless_allowed(released, capsys, monkeypatch, how):
    """A summary whose MAC was stripped, or whose key id was edited, cannot be checked by the key at hand: every
    reader refuses it in one line naming the way out; --allow-unverified reads it, marked "not verified". Without a
    key at hand nothing can be checked, and it is read, marked."""
    tmp_path, out = released
    if how == "stripped":
        _strip_mac(out["hist"])
        _strip_mac(out["adaptive"])
        why = "the file carries no MAC"
    else:
        _tamper(out["hist"], {"key_id": "0123456789abcdef"})
        _tamper(out["adaptive"], {"key_id": "0123456789abcdef"})
        why = "released under key id 0123456789abcdef"
    merged = tmp_path / "merged.parquet"
    commands = [["estimate", str(out["hist"])], ["report", str(out["hist"]), "--out", str(tmp_path / "r.html")],
                ["gof", str(out["adaptive"]), "--null", "beta(2,5)", "--B", "99"],
                ["merge", str(out["hist"]), "--window", "30d", "--out", str(merged)]]
    monkeypatch.setenv("LDP_DASK_SECRET_FILE", str(tmp_path / "key"))
    for argv in commands:
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and why in err[0] and "--allow-unverified" in err[0], (argv, err)
    assert not (tmp_path / "r.html").exists() and not merged.exists()
    with pytest.raises(ldp_dask.InputDataError, match="cannot be verified with the key at hand"):
        ldp_dask.estimate(str(out["hist"]))
    # the explicit choice: read, and marked wherever the estimate goes
    assert main(["estimate", str(out["hist"]), "--allow-unverified", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary_integrity"].startswith(f"not verified: {why}")
    assert main(["report", str(out["hist"]), "--out", str(tmp_path / "r.html"), "--allow-unverified"]) == 0
    assert "not verified" in (tmp_path / "r.html").read_text()
    assert main(["gof", str(out["adaptive"]), "--null", "beta(2,5)", "--B", "99", "--allow-unverified"]) == 0
    s = ldp_dask.read_summary(out["hist"], allow_unverified=True)
    assert s.integrity.startswith(f"not verified: {why}") and not s.verified
    # no key at hand: nothing to check with, so it is read and marked
    monkeypatch.delenv("LDP_DASK_SECRET_FILE")
    assert not ldp_dask.read_summary(out["hist"]).verified
