"""The non-interactive channel contract (docs/channels.md).

A channel maps each row ``x_i`` to a private view ``Z_i`` that depends on
``x_i`` alone (docs/privacy.md), so rows can be privatized anywhere, in any order.
Channels are pure numpy: they know nothing of Dask, files or keys.

Every channel provides

* ``epsilon`` (requested) and :meth:`epsilon_spent`, computed from the
  channel's own sensitivity and noise scale; construction refuses a
  configuration that would spend more than requested;
* ``dim`` (coordinates of the released sums) and :meth:`privatize` ``(x, rng) -> (rows, view_dim)`` — rows
  mode (``view_dim`` is ``dim`` unless a row's view is more compact than the sums);
* :meth:`exact_stats` / :meth:`add_noise` and their composition :meth:`stats`
  — summary mode: the sums of the rows' views drawn exactly in distribution
  without materialising any row's view (docs/privacy.md). The exact statistics never
  leave the worker; only :meth:`add_noise`'s output does.
"""

from __future__ import annotations

import math
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._validation import InputDataError, LdpDaskError, check_domain

__all__ = ["Channel", "NumericChannel", "Option", "NOISE_OPTION", "noise_scale_for", "check_values", "NOISE_MODES",
           "check_noise", "require_n", "nudge", "grid_index", "grid_counts", "use_fused", "chunk_sum"]

#: ``continuous``: Laplace noise on doubles; ``lattice``: every released value on a public
#: lattice g·ℤ with discrete Laplace noise (docs/privacy.md, floating-point safe).
NOISE_MODES = ("continuous", "lattice")


@dataclass(frozen=True)
class Option:
    """One parameter of a channel, declared once in the channel's module.

    :func:`~ldp_dask.channels.build_channel`, the CLI (one ``--name`` flag per
    option), the flows (``options={...}``) and the HTML report read the
    declarations; the channel's constructor validates the values.

    Attributes
    ----------
    name : str
        The keyword of :meth:`Channel.build` and of the constructor.
    help : str
        One line for ``--help`` and the report.
    type : callable
        Turns one command-line word into a value (``int``, ``float``, ``str``).
    default : Any
        The default, as shown to users (None: required, or derived from n and ε as ``help`` says).
    choices : tuple, optional
        The allowed values.
    many : bool
        A list of values (one or more words on the command line).
    switch : bool
        A boolean switch (``--other``).
    cli : bool
        Offered on the command line.
    cli_name : str, optional
        The flag's name when ``name`` alone would be ambiguous on the command
        line (the Haar ``level`` is ``--haar-level``: ``--level`` once meant
        three things).
    """

    name: str
    help: str
    type: Callable[[str], Any] = str
    default: Any = None
    choices: tuple[Any, ...] | None = None
    many: bool = False
    switch: bool = False
    cli: bool = True
    cli_name: str | None = None

    @property
    def flag(self) -> str:
        """The command-line flag, ``--name`` (or ``--cli_name``) with dashes."""
        return "--" + (self.cli_name or self.name).replace("_", "-")


NOISE_OPTION = Option("noise", "lattice outputs with discrete Laplace noise (floating-point safe) or Laplace noise "
                               "on doubles", default="lattice", choices=NOISE_MODES)


def require_n(n: int | None, what: str) -> int:
    """The public row count ``n``, needed for ``what`` (a default derived from n and ε)."""
    if n is None:
        raise LdpDaskError(f"The number of rows n is needed for {what}; give n, or the option explicitly.")
    return n


def check_noise(noise: Any) -> str:
    if noise not in NOISE_MODES:
        raise LdpDaskError(f"The 'noise' parameter must be one of {', '.join(NOISE_MODES)}. Got {noise!r} instead.")
    return str(noise)


def nudge(p: float, spent: Any, epsilon: float, toward: float = 0.0) -> float:
    """The float nearest ``p`` (moving toward ``toward``) with ``spent(p) <= epsilon``: float rounding of a response
    probability must not make the channel's likelihood ratio exceed e^ε.

    ``p`` is a positive probability and ``spent`` falls toward ``toward``. The search gallops (1, 2, 4, … ulps, on
    the float's bits) to a float that holds, then bisects the bits back to the one nearest ``p``: the float a
    one-ulp-at-a-time walk would stop at, in O(log) evaluations (at a small ε that walk took ~10⁴ steps, 4 ms a
    channel). Whatever it returns holds."""
    if spent(p) <= epsilon:
        return p
    sign = -1 if toward < p else 1
    start = _bits(p)
    bad, step = start, 1
    while True:
        good = start + sign * step
        q = _float(good)
        if not (0.0 < q < 1.0) or (q - toward) * sign >= 0:  # pragma: no cover - a probability with no room
            raise LdpDaskError(f"no response probability near {p!r} keeps ε ≤ {epsilon!r}")
        if spent(q) <= epsilon:
            break
        bad, step = good, step * 2
    while abs(good - bad) > 1:  # spent(bad) > epsilon >= spent(good): bisect the floats between them
        mid = (bad + good) // 2
        bad, good = (bad, mid) if spent(_float(mid)) <= epsilon else (mid, good)
    return _float(good)


def _bits(x: float) -> int:
    """A positive float's bits as an integer: adjacent floats are adjacent integers, in order."""
    return int(struct.unpack("<q", struct.pack("<d", x))[0])


def _float(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


def grid_index(x: np.ndarray, domain: tuple[float, float], cells: int) -> np.ndarray:
    """Cell of each value of ``x`` (already inside ``domain``) among ``cells`` equal cells; ``hi`` goes to the last."""
    lo, hi = domain
    t = np.subtract(x, lo, dtype=np.float64)
    np.multiply(t, cells / (hi - lo), out=t)
    idx = t.astype(np.intp)  # t >= 0, so truncation is floor
    np.minimum(idx, cells - 1, out=idx)
    return idx


#: Below this many values the numpy reference is as fast as a fused kernel's call.
KERNEL_MIN = 4096
#: A process's first fused kernel costs about 0.3 s (numba loads its compiled code and starts LLVM: measured
#: 0.29-0.31 s), and the counting kernels save about 3-4 ns a value. A process therefore counts in numpy until it
#: has counted this many values, then switches: a one-shot command on a small source never pays the load, a
#: long-lived worker pays it once it has shown it will recover it. Either way the numbers are the same.
FUSED_AFTER = 1 << 24
_counted = 0


def use_fused(n: int) -> bool:
    """Whether a block of ``n`` values should go through a fused kernel in this process (see :data:`FUSED_AFTER`)."""
    global _counted
    if n < KERNEL_MIN:
        return False
    if _counted >= FUSED_AFTER:
        return True
    _counted += n
    return False


#: The numpy paths work through a block in chunks of this many values, so their temporaries stay in cache.
CHUNK = 1 << 17


def chunk_sum(x: np.ndarray, fn: Callable[[np.ndarray], Any], start: Any) -> Any:
    """``start`` + Σ ``fn(c)`` over the consecutive chunks c of ``x`` (:data:`CHUNK` values each): the numpy
    paths of the counting steps, whose temporaries then stay in cache."""
    total = start
    for s in range(0, len(x), CHUNK):
        total = total + fn(x[s:s + CHUNK])
    return total


def grid_counts(x: np.ndarray, domain: tuple[float, float], cells: int) -> np.ndarray:
    """How many values of ``x`` (already inside ``domain``) fall in each of ``cells`` equal cells (int64).

    ``np.bincount(grid_index(x, domain, cells), minlength=cells)``: in one fused pass
    (:func:`ldp_dask._kernels.grid_counts`, the same float operations, so the same cells) once
    :func:`use_fused` says so, else the same steps in numpy chunk by chunk (8.4·10^6 values, 256 cells: 36 ms at
    once, 20 ms in chunks, 6 ms fused).
    """
    if use_fused(len(x)):
        from .._kernels import grid_counts as fused

        lo, hi = domain
        out = np.zeros(cells, dtype=np.int64)
        fused(np.ascontiguousarray(x, dtype=np.float64), float(lo), cells / (hi - lo), int(cells), out)
        return out
    return chunk_sum(x, lambda c: np.bincount(grid_index(c, domain, cells), minlength=cells),
                     np.zeros(cells, dtype=np.int64))


def noise_scale_for(sensitivity: float, epsilon: float) -> float:
    """Smallest float ``b`` with ``sensitivity / b <= epsilon`` (Laplace mechanism).

    ``sensitivity / epsilon`` can round down by an ulp, which would overspend;
    the scale is nudged up until the float division honours the budget.
    """
    b = sensitivity / epsilon
    while sensitivity / b > epsilon:
        b = math.nextafter(b, math.inf)
    return b


class Channel(ABC):
    """Base class of all local channels."""

    name: ClassVar[str]
    #: what the column holds: "numeric" or "categorical" (see ldp_dask.source.open_source)
    value_kind: ClassVar[str] = "numeric"
    #: the channel's own parameters besides ε and the domain (see :class:`Option`)
    options: ClassVar[tuple[Option, ...]] = ()
    epsilon: float
    dim: int

    @classmethod
    def build(cls, epsilon: float, domain: Any = None, n: int | None = None, **options: Any) -> Channel:
        """Build from ε, the public domain, the public row count ``n`` and declared options.

        Options left out take their defaults; defaults that depend on the
        data's size are derived from ``n`` (public) and ε here.
        """
        return cls(epsilon=epsilon, domain=domain, **options)  # type: ignore[call-arg]

    # --- privacy accounting -------------------------------------------------
    @abstractmethod
    def epsilon_spent(self) -> float:
        """The ε this channel spends per row, from its sensitivities."""

    # --- parameters -----------------------------------------------------------
    @abstractmethod
    def params(self) -> dict[str, Any]:
        """JSON-serialisable parameters; ``type(self)(**params)`` rebuilds it."""

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Channel:
        return cls(**params)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.params() == self.params()

    def __hash__(self) -> int:
        return hash((self.name, repr(sorted(self.params().items()))))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"

    # --- data ---------------------------------------------------------------------
    @abstractmethod
    def prepare(self, x: np.ndarray, clip: bool = False) -> tuple[np.ndarray, int]:
        """Validate one block of raw values; return ``(values, n_clipped)``."""

    @abstractmethod
    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each row's private view, shape ``(len(x), view_dim)`` (rows mode)."""

    @abstractmethod
    def exact_stats(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Exact sufficient statistics of a block. Never released as such."""

    @abstractmethod
    def add_noise(
        self, exact: dict[str, np.ndarray], m: int, rng: np.random.Generator
    ) -> dict[str, np.ndarray]:
        """Noisy statistics distributed as the sums of ``m`` rows' views."""

    def stats(self, x: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Summary mode for one block: ``add_noise(exact_stats(x), len(x), rng)``."""
        return self.add_noise(self.exact_stats(x), len(x), rng)

    def counted(self, x: Any, clip: bool = False) -> tuple[int, int, dict[str, np.ndarray]]:
        """A piece's rows, values clipped and exact statistics: ``prepare`` then :meth:`exact_stats` (a channel may
        fuse the two, as the heavy-hitters channel does, when they are integer sums)."""
        prepared, clipped = self.prepare(x, clip=clip)
        return len(prepared), clipped, self.exact_stats(prepared)

    @property
    def integer_sums(self) -> bool:
        """True when :meth:`exact_stats` are integers (below 2^53): partial sums of a partition's blocks then add
        exactly to the statistics of the whole, so a task may sum its pieces as it reads them. Default False."""
        return False

    @property
    def view_dim(self) -> int:
        """Columns of one row's released view (rows mode); ``dim`` unless the view is more compact than the sums
        (Hadamard response releases one index, summed into K counts)."""
        return self.dim

    def row_sums(self, z: np.ndarray) -> dict[str, np.ndarray]:
        """The same statistics computed from released views ``z`` (rows mode)."""
        return {"sum": np.asarray(z, dtype=np.float64).sum(axis=0)}

    def index_columns(self) -> dict[str, dict[str, list[Any]]]:
        """What each index of a statistic stands for, from public parameters only: ``{statistic: {column:
        values}}`` with ``bin_low``/``bin_high`` (bins) or ``label`` (categories). The summary file carries them
        as columns, so a reader without ldp_dask sees which bin or category a sum belongs to. Default: none."""
        return {}


class NumericChannel(Channel):
    """A channel on a numeric column with a public domain ``[lo, hi]``."""

    domain: tuple[float, float]

    @classmethod
    def build(cls, epsilon: float, domain: Any = None, n: int | None = None, **options: Any) -> Channel:
        if domain is None:
            raise LdpDaskError(f"The {cls.name!r} channel needs a public 'domain' (lo, hi).")
        return cls._build(epsilon, tuple(domain), n, **options)

    @classmethod
    def _build(cls, epsilon: float, domain: tuple[float, float], n: int | None, **options: Any) -> Channel:
        return cls(epsilon=epsilon, domain=domain, **options)  # type: ignore[call-arg]

    def _set_domain(self, domain: Any) -> None:
        try:
            lo, hi = domain
        except (TypeError, ValueError):
            raise InputDataError(
                f"The 'domain' parameter must be a pair (lo, hi). Got {domain!r} instead."
            ) from None
        self.domain = check_domain(lo, hi)

    def prepare(self, x: np.ndarray, clip: bool = False) -> tuple[np.ndarray, int]:
        """Check that ``x`` is numeric, finite and inside the domain (:func:`check_values`)."""
        return check_values(x, self.domain, clip)


def check_values(x: np.ndarray, domain: tuple[float, float], clip: bool = False) -> tuple[np.ndarray, int]:
    """Validate one block of raw values against a public domain; return ``(values, n_clipped)``.

    Out-of-domain values raise unless ``clip``; then they are clamped to the
    domain and counted. Messages never quote data values.
    """
    x = np.asarray(x)
    if x.dtype.kind not in "iuf":
        raise InputDataError(f"values must be numeric; got an array of dtype {x.dtype}")
    x = x.astype(np.float64, copy=False).ravel()
    lo, hi = domain
    if len(x) == 0:
        return x, 0
    # fast path: min and max propagate NaN, so two reductions clear a clean block
    mn, mx = x.min(), x.max()
    if lo <= mn and mx <= hi:
        return x, 0
    if np.isnan(mn) or np.isnan(mx):
        raise InputDataError(
            "the column contains NaN values; ldp_dask does not impute: drop or fill them first"
        )
    if np.isinf(mn) or np.isinf(mx):
        raise InputDataError(
            "the column contains infinite values; ldp_dask does not impute: drop or fill them first"
        )
    if not clip:
        raise InputDataError(
            f"the column contains values outside the declared domain [{lo:g}, {hi:g}]; "
            "widen the domain or pass clip=True (--clip) to clamp them"
        )
    n_out = int(np.count_nonzero(x < lo) + np.count_nonzero(x > hi))
    return np.clip(x, lo, hi), n_out
