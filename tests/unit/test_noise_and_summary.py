"""Keyed noise, secrets, and the summary file format."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

import ldp_dask
from ldp_dask import LaplaceHistogram, noise
from ldp_dask.summary import METADATA_KEY


def test_laplace_sum_has_the_law_of_a_sum_of_laplaces():
    # KS at 1e-3 false-failure rate
    rng = np.random.default_rng(0)
    fast = noise.laplace_sum(rng, 4, 2.0, 20_000)
    slow = rng.laplace(0, 2.0, size=(20_000, 4)).sum(axis=1)
    assert stats.ks_2samp(fast, slow).pvalue > 1e-3
    assert np.all(noise.laplace_sum(rng, 0, 2.0, 5) == 0)


def test_keys_depend_on_secret_context_partition_and_content():
    s1 = noise.resolve_secret(secret=b"x" * 32)
    s2 = noise.resolve_secret(secret=b"y" * 32)
    ctx = {"fingerprint": "f", "mode": "summary"}
    k1 = noise.partition_base_keys(s1, ctx, 3)
    assert k1 == noise.partition_base_keys(s1, ctx, 3)  # deterministic
    assert len(set(k1)) == 3
    assert k1 != noise.partition_base_keys(s2, ctx, 3)
    assert k1 != noise.partition_base_keys(s1, {**ctx, "mode": "rows"}, 3)
    d1 = noise.digest_arrays(np.array([1.0, 2.0]))
    d2 = noise.digest_arrays(np.array([1.0, 2.5]))
    assert noise.bind_key(k1[0], d1) != noise.bind_key(k1[0], d2)


def test_edited_data_never_reuses_noise():
    # same secret, one value moved to another bin: the two releases must not share noise,
    # otherwise their difference would reveal the edit exactly
    ch = LaplaceHistogram(1.0, 4, (0.0, 1.0))
    x = np.random.default_rng(1).uniform(0, 1, 1000)
    y = x.copy()
    y[0] = 0.1 if x[0] > 0.5 else 0.9
    a = ldp_dask.privatize(x, channel=ch, secret=b"s" * 32)
    b = ldp_dask.privatize(y, channel=ch, secret=b"s" * 32)
    diff = b.sums["sum"] - a.sums["sum"]
    # not the exact ±1 pattern of the edit (outputs are integers on the lattice, so compare the pattern)
    assert np.abs(diff).sum() > 2
    # while an unchanged dataset reproduces its release exactly
    assert ldp_dask.privatize(x, channel=ch, secret=b"s" * 32).same_release(a)


def test_secret_sources(tmp_path, monkeypatch):
    f = tmp_path / "key"
    f.write_bytes(b"0123456789abcdef0123456789abcdef\n")
    assert noise.resolve_secret(secret_file=f).source == "file"
    monkeypatch.setenv(noise.SECRET_ENV, "an-environment-secret-123")
    assert noise.resolve_secret().source == "env"
    monkeypatch.delenv(noise.SECRET_ENV)
    r = noise.resolve_secret()
    assert r.source == "random" and not r.reproducible
    s = noise.resolve_secret(seed=3)
    assert s.insecure and s.source == "seed"
    with pytest.raises(ldp_dask.LdpDaskError, match="16 bytes"):
        noise.resolve_secret(secret=b"short")
    with pytest.raises(ldp_dask.LdpDaskError, match="at most one"):
        noise.resolve_secret(secret=b"x" * 32, seed=1)


def test_summary_round_trip_and_metadata(tmp_path):
    ch = LaplaceHistogram(0.8, 6, (-1.0, 1.0))
    x = np.random.default_rng(2).uniform(-1, 1, 5000)
    s = ldp_dask.privatize(x, channel=ch, secret=b"t" * 32)
    path = tmp_path / "s.parquet"
    s.to_parquet(path)
    back = ldp_dask.read_summary(path)
    assert back.same_release(s) and back.channel == ch
    meta = json.loads(pq.read_schema(path).metadata[METADATA_KEY])
    for key in ("format_version", "channel", "channel_params", "epsilon", "n", "domain", "fingerprint",
                "mode", "created_at", "package_version", "key_id", "key_source"):
        assert key in meta, key
    assert b"t" * 32 not in path.read_bytes()  # the secret is not in the file
    with pytest.raises(ldp_dask.LdpDaskError, match="already exists"):
        s.to_parquet(path)
    s.to_parquet(path, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["s.parquet"]  # no temp files left


def test_read_summary_rejects_other_files(tmp_path):
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), plain)
    with pytest.raises(ldp_dask.InputDataError, match="not an ldp_dask summary"):
        ldp_dask.read_summary(plain)
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet at all")
    with pytest.raises(ldp_dask.InputDataError, match="not a readable Parquet"):
        ldp_dask.read_summary(junk)
    with pytest.raises(ldp_dask.InputDataError, match="no such summary"):
        ldp_dask.read_summary(tmp_path / "missing.parquet")


def test_philox_blocks_are_numpys_philox_at_chosen_counters():
    # the vectorised Philox4x64-10 reproduces numpy's bit generator word for word, at counters that exercise the
    # carries of every limb (numpy increments its counter before a block, hence c + 1), and its uniforms are
    # Generator.random's
    from ldp_dask.noise import keyed_uniforms, philox_blocks

    mask = (1 << 64) - 1
    rng = np.random.default_rng(9)
    for key in (0, 1, (1 << 128) - 1, int(rng.integers(1 << 62)) << 64 | int(rng.integers(1 << 62))):
        counters = [0, 5, mask, 12345678901234567, (1 << 200) + 3, (1 << 256) - 2]
        words = np.array([[((c + 1) >> (64 * i)) & mask for i in range(4)] for c in counters], dtype=np.uint64)
        blocks = philox_blocks(key, words)
        uniforms = keyed_uniforms(key, words)
        for c, block, u in zip(counters, blocks, uniforms):
            bit_generator = np.random.Philox(key=key, counter=c)
            assert list(block) == list(bit_generator.random_raw(4)), (key, c)
            assert np.array_equal(u, np.random.Generator(np.random.Philox(key=key, counter=c)).random(4)), (key, c)
    with pytest.raises(ValueError, match="shape"):
        philox_blocks(1, np.zeros((3, 2), dtype=np.uint64))
