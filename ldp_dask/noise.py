"""Keyed, idempotent noise (docs/privacy.md) and sums of Laplace noise in distribution.

Key hierarchy
-------------
* A :class:`Secret` lives on the driver only. It comes from ``--secret-file``
  / ``secret_file=``, from ``LDP_DASK_SECRET``, from an explicit ``seed``
  (insecure, for simulations and tests), or is drawn fresh for the run
  (``secrets.token_bytes``; the release is then not reproducible).
* For partition ``p`` the driver derives ``base_p = HMAC-SHA256(secret,
  context ‖ p)``, where the context is the canonical JSON of the dataset's
  structural fingerprint, the column, the channel's parameters and the mode.
  Only ``base_p`` is shipped to the worker.
* The worker binds the key to the partition's content:
  ``key_p = HMAC-SHA256(base_p, digest)``, where ``digest`` hashes the exact
  sufficient statistics (summary mode) or the raw values (rows mode) of the
  partition. A retried or duplicated task reproduces the same release; a
  partition whose released statistics would change gets fresh, independent
  noise — so two releases of edited data can never share noise and be
  differenced to reveal the edit.
* ``key_p`` seeds a counter-based ``numpy.random.Philox`` generator.

The secret and the keys are never logged or written; the summary records only
``key_id`` (an HMAC of a fixed label, which identifies but does not reveal it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import secrets as _secrets
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._validation import LdpDaskError

__all__ = [
    "philox_blocks",
    "keyed_uniforms",
    "discrete_laplace",
    "discrete_laplace_sum",
    "discrete_laplace_variance",
    "Secret",
    "resolve_secret",
    "partition_base_keys",
    "named_base_keys",
    "keyed_digest",
    "bind_key",
    "generator",
    "laplace_sum",
    "digest_arrays",
    "content_tag",
    "TAG_MODULUS",
    "SECRET_ENV",
    "hidden_from_children",
]

SECRET_ENV = "LDP_DASK_SECRET"
SECRET_FILE_ENV = "LDP_DASK_SECRET_FILE"
_KEY_ENV = (SECRET_ENV, SECRET_FILE_ENV)
#: the key's environment variables while child processes are being started (see hidden_from_children)
_HIDDEN: dict[str, str] = {}
_HIDERS = 0
_HIDE_LOCK = threading.Lock()


@contextmanager
def hidden_from_children() -> Iterator[None]:
    """Take the key's environment variables out of ``os.environ`` for the block, so that processes started
    meanwhile (Dask workers, and the workers a nanny restarts) cannot read them; this process still can
    (:func:`resolve_secret` looks here too). Nested and concurrent blocks share one hiding."""
    global _HIDERS
    with _HIDE_LOCK:
        if _HIDERS == 0:
            _HIDDEN.update({k: os.environ.pop(k) for k in _KEY_ENV if k in os.environ})
        _HIDERS += 1
    try:
        yield
    finally:
        with _HIDE_LOCK:
            _HIDERS -= 1
            if _HIDERS == 0:
                for k, v in _HIDDEN.items():
                    os.environ.setdefault(k, v)
                _HIDDEN.clear()


def _env(name: str) -> str | None:
    return os.environ.get(name) or _HIDDEN.get(name)


def key_material() -> bytes | None:
    """The environment's key bytes (``$LDP_DASK_SECRET``, else the file ``$LDP_DASK_SECRET_FILE`` names), or None:
    for refusing configuration that would copy the key somewhere (it is never logged)."""
    env = _env(SECRET_ENV)
    if env:
        return env.strip().encode()
    name = _env(SECRET_FILE_ENV)
    try:
        key = Path(name).read_bytes().strip() if name else b""
    except OSError:
        return None
    return key if len(key) >= 16 else None


@dataclass(frozen=True)
class Secret:
    """The run's secret key. ``repr`` never shows the key material.

    Attributes
    ----------
    source : str
        ``"file"``, ``"env"``, ``"explicit"``, ``"seed"`` (insecure) or ``"random"``.
    reproducible : bool
        False for a fresh random secret: nobody can reproduce the release.
    insecure : bool
        True for an integer seed: anyone who guesses it can remove the noise.
    """

    key: bytes
    source: str
    reproducible: bool
    insecure: bool

    def __repr__(self) -> str:  # never leak the key
        return f"Secret(source={self.source!r}, key_id={self.key_id!r})"

    __str__ = __repr__

    @property
    def key_id(self) -> str:
        """A public identifier of the key (HMAC of a fixed label), 16 hex digits."""
        return hmac.new(self.key, b"ldp_dask/key-id/v1", hashlib.sha256).hexdigest()[:16]


def resolve_secret(
    secret: Secret | bytes | str | None = None,
    seed: int | None = None,
    secret_file: str | os.PathLike[str] | None = None,
) -> Secret:
    """Pick the run's secret: explicit secret, seed, file, environment, else random.

    Parameters
    ----------
    secret : bytes or str, optional
        Key material given directly (at least 16 bytes).
    seed : int, optional
        An integer for simulations and tests; recorded as insecure.
    secret_file : path, optional
        A file whose bytes (surrounding whitespace stripped) are the secret.

    Without any of these, ``$LDP_DASK_SECRET`` (the key itself), then
    ``$LDP_DASK_SECRET_FILE`` (a file holding it), else a fresh random key.

    Returns
    -------
    Secret
    """
    if isinstance(secret, Secret):  # already resolved (CLI, flows: the key id is needed before the run)
        return secret
    given = [x is not None for x in (secret, seed, secret_file)]
    if sum(given) > 1:
        raise LdpDaskError("Give at most one of 'secret', 'seed' and 'secret_file'.")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise LdpDaskError(f"The 'seed' parameter must be a non-negative integer. Got {seed!r} instead.")
        key = hashlib.sha256(b"ldp_dask/seed/v1:" + str(int(seed)).encode()).digest()
        return Secret(key, "seed", reproducible=True, insecure=True)
    if secret is not None:
        if isinstance(secret, (str, os.PathLike)) and len(os.fspath(secret)) < 4096 and os.path.isfile(secret):
            raise LdpDaskError(f"The 'secret' parameter is key material, not a file: {os.fspath(secret)!r} names a "
                               "file; pass secret_file= (or the key's bytes)")
        return Secret(_check_key(_as_bytes(secret), "secret"), "explicit", True, False)
    if secret_file is None and not _env(SECRET_ENV) and _env(SECRET_FILE_ENV):
        secret_file = _env(SECRET_FILE_ENV)  # e.g. a Docker or Kubernetes secret mounted as a file
    if secret_file is not None:
        path = Path(secret_file)
        if not path.is_file():
            raise LdpDaskError(f"The 'secret_file' parameter must name a readable file. Got {str(path)!r}.")
        mode = path.stat().st_mode & 0o077
        if mode:
            from .policy import warn

            warn(f"the key file {str(path)!r} is readable or writable by others (mode {path.stat().st_mode & 0o777:04o})"
                 f": whoever reads it can test guesses about the data; chmod 600 it")
        return Secret(_check_key(path.read_bytes().strip(), "secret_file"), "file", True, False)
    env = _env(SECRET_ENV)
    if env:
        return Secret(_check_key(env.strip().encode(), SECRET_ENV), "env", True, False)
    return Secret(_secrets.token_bytes(32), "random", reproducible=False, insecure=False)


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _check_key(key: bytes, name: str) -> bytes:
    if len(key) < 16:
        raise LdpDaskError(
            f"The {name!r} secret must hold at least 16 bytes of key material. Got {len(key)} bytes."
        )
    return key


def _canonical(context: Mapping[str, Any]) -> bytes:
    return json.dumps(context, sort_keys=True, separators=(",", ":"), default=str).encode()


def partition_base_keys(secret: Secret, context: Mapping[str, Any], count: int) -> list[bytes]:
    """Per-partition base keys ``HMAC(secret, context ‖ index)`` (driver side)."""
    return named_base_keys(secret, context, [str(i) for i in range(count)])


def named_base_keys(secret: Secret, context: Mapping[str, Any], names: list[str]) -> list[bytes]:
    """Base keys ``HMAC(secret, context ‖ name)`` of partitions named by their place in the data (a file's
    relative name and task number, for a partitioned release) rather than their index in one plan (driver side)."""
    ctx = _canonical(context)
    return [hmac.new(secret.key, ctx + b"|partition:" + name.encode(), hashlib.sha256).digest() for name in names]


def keyed_digest(secret: Secret, label: str, *parts: bytes) -> str:
    """``HMAC(secret, label ‖ parts)`` in hex (driver side): a digest of exact facts (a file's footer, say)
    that only the key's holder can test guesses against."""
    h = hmac.new(secret.key, b"ldp_dask/" + label.encode(), hashlib.sha256)
    for p in parts:
        h.update(len(p).to_bytes(8, "little") + p)
    return h.hexdigest()


def digest_arrays(*arrays: np.ndarray) -> bytes:
    """A BLAKE2b digest of arrays' dtypes, shapes and bytes (worker side)."""
    h = hashlib.blake2b(digest_size=32)
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.data.cast("B") if a.size else b"")
    return h.digest()


def bind_key(base_key: bytes, digest: bytes) -> int:
    """Bind a partition's base key to its content digest; a 128-bit Philox key."""
    k = hmac.new(base_key, b"content:" + digest, hashlib.sha256).digest()
    return int.from_bytes(k[:16], "little")


#: Partition tags add up modulo 2^256, so the tag of a release does not depend on the reduction's shape.
TAG_MODULUS = 1 << 256


def content_tag(base_key: bytes, digest: bytes) -> int:
    """A partition's keyed content tag ``HMAC(base_p, "tag:" ‖ digest)`` as an integer (worker side).

    The ledger records the sum of a release's tags (never published): a re-run
    is free only if every partition's content is the same. Keyed, so the
    ledger cannot be used to test guesses about the data without the key.
    """
    return int.from_bytes(hmac.new(base_key, b"tag:" + digest, hashlib.sha256).digest(), "big")


_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64 values: a bijection that spreads every input bit over the output (the
    mixing step of the bucket, rank, pair and sketch hashes)."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def generator(key: int) -> np.random.Generator:
    """A counter-based generator for a 128-bit key (numpy ``Philox``)."""
    return np.random.Generator(np.random.Philox(key=key))


# Philox4x64-10 (Salmon, Moraes, Dror and Shaw 2011), the bit generator behind :func:`generator`, evaluated on many
# counters at once: a keyed, reproducible draw per (person, value) without one generator object each.
_PHILOX_M = (np.uint64(0xD2E7470EE14C6C93), np.uint64(0xCA5A826395121157))
_PHILOX_W = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBB67AE8584CAA73B))
_LOW32, _SHIFT32 = np.uint64(0xFFFFFFFF), np.uint64(32)


def _mulhilo(a: np.uint64, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The high and low 64-bit words of a·b, from 32-bit limbs (no overflow in any partial sum)."""
    a0, a1, b0, b1 = a & _LOW32, a >> _SHIFT32, b & _LOW32, b >> _SHIFT32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _SHIFT32) + (p01 & _LOW32) + (p10 & _LOW32)
    return p11 + (p01 >> _SHIFT32) + (p10 >> _SHIFT32) + (mid >> _SHIFT32), a * b


def philox_blocks(key: int, counters: np.ndarray) -> np.ndarray:
    """Philox4x64-10 of each 256-bit counter under a 128-bit ``key``: ``counters`` of shape (n, 4) (uint64 words,
    least significant first) → n blocks of 4 uint64 words. The block of counter c is exactly what numpy's
    ``Philox(key=key, counter=c - 1).random_raw(4)`` returns (numpy increments the counter first), so draws made
    here are those of :func:`generator`'s bit generator at chosen counters — e.g. one counter per (person, value)."""
    c = np.asarray(counters, dtype=np.uint64)
    if c.ndim != 2 or c.shape[1] != 4:
        raise ValueError(f"counters must have shape (n, 4); got {c.shape}")
    c0, c1, c2, c3 = (c[:, i] for i in range(4))
    k0, k1 = np.uint64(key & 0xFFFFFFFFFFFFFFFF), np.uint64((key >> 64) & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        for r in range(10):
            if r:
                k0, k1 = k0 + _PHILOX_W[0], k1 + _PHILOX_W[1]
            hi0, lo0 = _mulhilo(_PHILOX_M[0], c0)
            hi1, lo1 = _mulhilo(_PHILOX_M[1], c2)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return np.stack([c0, c1, c2, c3], axis=1)


def keyed_uniforms(key: int, counters: np.ndarray) -> np.ndarray:
    """Four uniforms in [0, 1) per counter, from :func:`philox_blocks` as numpy's ``Generator.random`` makes
    them (the top 53 bits of each word)."""
    return (philox_blocks(key, counters) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def laplace_sum(rng: np.random.Generator, m: int, scale: float | np.ndarray, size: int) -> np.ndarray:
    """``size`` independent draws of the sum of ``m`` iid Lap(``scale``) variables.

    A Lap(1) variable is the difference of two Exp(1) variables, so the sum of
    ``m`` of them is ``Gamma(m, 1) - Gamma(m, 1)`` (docs/privacy.md): O(size), not O(m·size).
    """
    if m < 0:
        raise ValueError(f"m must be >= 0, got {m}")
    if m == 0:
        return np.zeros(size)
    return scale * (rng.standard_gamma(m, size) - rng.standard_gamma(m, size))


def discrete_laplace(rng: np.random.Generator, t: float, size: Any) -> np.ndarray:
    """Discrete Laplace draws on ℤ, P(k) ∝ exp(−|k|/t): a difference of two geometric variables (docs/privacy.md)."""
    p = -math.expm1(-1.0 / t)  # 1 − e^{−1/t}, accurate for large t
    return (rng.geometric(p, size) - rng.geometric(p, size)).astype(np.float64)


def discrete_laplace_sum(rng: np.random.Generator, m: int, t: float, size: int) -> np.ndarray:
    """``size`` draws of the sum of ``m`` iid discrete Laplace(t): NB(m, p) − NB(m, p), p = 1 − e^{−1/t} (docs/privacy.md)."""
    if m < 0:
        raise ValueError(f"m must be >= 0, got {m}")
    if m == 0:
        return np.zeros(size)
    p = -math.expm1(-1.0 / t)
    return (rng.negative_binomial(m, p, size) - rng.negative_binomial(m, p, size)).astype(np.float64)


def discrete_laplace_variance(t: float) -> float:
    """Var of discrete Laplace(t): 2r/(1 − r)², r = e^{−1/t} (slightly below the continuous 2t²)."""
    r = math.exp(-1.0 / t)
    return 2.0 * r / (1.0 - r) ** 2
