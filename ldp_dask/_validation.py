"""Argument validation at the public boundary.

Every check raises :class:`LdpDaskError` (a ``ValueError``) whose message
names the parameter, the value received and the allowed range, in the form
``The 'epsilon' parameter must be a finite float in (0, inf). Got -1.0 instead.``
NaN is rejected explicitly (comparisons alone let it through).
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "LdpDaskError",
    "InputDataError",
    "error_value",
    "TaskError",
    "check_epsilon",
    "check_domain",
    "check_int",
    "check_probability",
    "check_q",
    "DECILES",
]


class LdpDaskError(ValueError):
    """Bad input or configuration, detected before any output is written."""


class InputDataError(LdpDaskError):
    """The data itself is unusable: NaN, out of domain, wrong type, empty, corrupt."""


#: Set to see, on the operator's own terminal, the messages of unexpected errors that are withheld otherwise.
DEBUG_ENV = "LDP_DASK_DEBUG"


#: Modules of object-storage clients: their errors are about credentials, buckets and endpoints, never about the
#: data's values, so their messages are shown.
STORAGE_MODULES = ("botocore", "aiobotocore", "s3fs", "gcsfs", "google.auth", "google.api_core", "adlfs", "azure")


@dataclass(frozen=True)
class TaskError:
    """A deterministic error met by a task (bad data, a corrupt file), carried to the driver as a value.

    A value, not an exception: Dask does not retry it, a combine passes it on
    (:func:`ldp_dask.engine.run`), and the driver raises it once as
    :class:`InputDataError`. ``message`` names the file or partition and never quotes the data.
    """

    message: str

    def __str__(self) -> str:
        return self.message


def error_value(where: str, exc: BaseException) -> TaskError:
    """An error met while reading or privatizing a partition, as a value for the driver (never retried).

    Our own :class:`InputDataError` messages describe the problem without quoting
    the data, and so do object-storage clients (:data:`STORAGE_MODULES`: a
    worker without credentials, say). Any other exception's message is withheld, since libraries quote
    the offending value (e.g. Arrow's "Integer value … not in range"); its type
    is kept, and ``LDP_DASK_DEBUG=1`` shows the message.
    """
    if isinstance(exc, InputDataError):  # named once: a read error names its file already
        return TaskError(str(exc) if repr(where) in str(exc) else f"{where}: {exc}")
    if type(exc).__module__.startswith(STORAGE_MODULES):  # credentials, buckets, endpoints: not the data
        text = " ".join(str(exc).split())[:300]
        return TaskError(f"{where}: the storage refused the read ({type(exc).__name__}: {text}); check the "
                         "credentials and endpoint in the environment of every Dask worker")
    detail = (" ".join(str(exc).split()) if os.environ.get(DEBUG_ENV)
              else f"its message is withheld because it may quote the data; set {DEBUG_ENV}=1 to see it")
    return TaskError(f"{where}: {type(exc).__name__} while reading or privatizing this partition ({detail})")


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


#: The smallest ε a channel takes: below it a release is noise whatever the table (a histogram's standard error is
#: about 3·10^6/sqrt(n) of a share), and the exact noise samplers' tables would not fit in memory.
MIN_EPSILON = 1e-6
#: The largest magnitude of a domain's end: 2^53, beyond which a double no longer holds every integer, and the
#: exact sums of a mean's reports (each within the domain plus noise) would leave their exact range.
MAX_DOMAIN = 2.0**53


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """Return ``value`` as a float if it is finite and at least :data:`MIN_EPSILON`, else raise."""
    if not _is_real(value) or not math.isfinite(float(value)) or float(value) <= 0:
        raise LdpDaskError(
            f"The {name!r} parameter must be a finite float in (0, inf). Got {value!r} instead."
        )
    if float(value) < MIN_EPSILON:
        raise LdpDaskError(
            f"The {name!r} parameter must be at least {MIN_EPSILON:g}: below it every estimate is noise whatever "
            f"the table's size. Got {float(value):g} instead."
        )
    return float(value)


def check_domain(lo: Any, hi: Any, name: str = "domain") -> tuple[float, float]:
    """Return ``(lo, hi)`` as floats if both are finite and ``lo < hi``."""
    for v in (lo, hi):
        if not _is_real(v) or not math.isfinite(float(v)):
            raise LdpDaskError(
                f"The {name!r} parameter must be two finite numbers lo < hi. Got ({lo!r}, {hi!r}) instead."
            )
    lo_f, hi_f = float(lo), float(hi)
    if not lo_f < hi_f:
        raise LdpDaskError(
            f"The {name!r} parameter must satisfy lo < hi. Got lo={lo_f!r}, hi={hi_f!r} instead."
        )
    if max(abs(lo_f), abs(hi_f)) > MAX_DOMAIN:
        raise LdpDaskError(
            f"The {name!r} parameter's ends must lie within ±2^53 = ±{MAX_DOMAIN:.4g} (beyond it a double no longer "
            f"holds every integer, and the reports' exact sums would overflow). Got ({lo_f:g}, {hi_f:g}); rescale "
            "the column (e.g. to thousands)."
        )
    return lo_f, hi_f


def check_int(value: Any, name: str, lo: int, hi: int | None = None) -> int:
    """Return ``value`` as an int if it is an integer in ``[lo, hi]``."""
    upper = "inf" if hi is None else str(hi)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise LdpDaskError(
            f"The {name!r} parameter must be an integer in [{lo}, {upper}]. Got {value!r} instead."
        )
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        raise LdpDaskError(
            f"The {name!r} parameter must be an integer in [{lo}, {upper}]. Got {v!r} instead."
        )
    return v


def check_probability(value: Any, name: str) -> float:
    """Return ``value`` as a float strictly inside (0, 1)."""
    if not _is_real(value) or not (0.0 < float(value) < 1.0):
        raise LdpDaskError(
            f"The {name!r} parameter must be a float in (0, 1). Got {value!r} instead."
        )
    return float(value)


#: The nine deciles, the default probabilities of every quantile release.
#: The most random values a Monte-Carlo calibration or a bootstrap may draw (replicates × cells per replicate):
#: about half a minute of work on one core (measured: 270 ns a value for a gof calibration, 350 ns for a
#: histogram bootstrap, projection included). Larger requests are refused up front, naming the limit.
MAX_DRAWS = 1 << 27


def check_draws(replicates: int, per_replicate: int, what: str, remedy: str) -> None:
    """Refuse ``replicates × per_replicate`` random values over :data:`MAX_DRAWS`, in one line naming the limit."""
    total = replicates * per_replicate
    if total > MAX_DRAWS:
        raise LdpDaskError(f"{what} would draw {replicates:,} replicates × {per_replicate:,} values = {total:.3g} "
                           f"random values; the limit is 2^{MAX_DRAWS.bit_length() - 1} ({MAX_DRAWS:.3g}): {remedy}.")


DECILES = tuple(round(0.1 * i, 1) for i in range(1, 10))


def check_q(q: Any) -> np.ndarray:
    """Probabilities strictly inside (0, 1), strictly increasing."""
    try:
        arr = np.atleast_1d(np.asarray(q, dtype=np.float64))
    except (TypeError, ValueError):
        raise LdpDaskError(f"The 'q' parameter must be a list of probabilities. Got {q!r} instead.") from None
    if arr.ndim != 1 or len(arr) == 0 or not np.all(np.isfinite(arr)):
        raise LdpDaskError(f"The 'q' parameter must be a non-empty list of probabilities. Got {q!r} instead.")
    if np.any((arr <= 0) | (arr >= 1)):
        raise LdpDaskError(f"The 'q' parameter must lie strictly inside (0, 1). Got {arr.tolist()} instead.")
    if np.any(np.diff(arr) <= 0):
        raise LdpDaskError(f"The 'q' parameter must be sorted without duplicates. Got {arr.tolist()} instead.")
    return arr
