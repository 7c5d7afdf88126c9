"""The null hypothesis f0 of a goodness-of-fit test, as bin probabilities on the domain.

A null is given as a scipy.stats frozen continuous distribution, a name string
such as ``"beta(2,2)"`` or ``"norm(loc=0.5, scale=0.1)"`` (parsed with
:mod:`ast`, never evaluated), a CDF callable, or bin probabilities. The test
needs p0_k = P_{f0}(bin k) on the 2^J equal bins of the domain (docs/goodness-of-fit.md,
a_k = 2^{J/2} p0_k). A density must put mass 1 on the domain, to within
:data:`MASS_TOLERANCE` (tails outside it, e.g. a normal's beyond 5 sd, are
allowed and the probabilities renormalised).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import LdpDaskError

__all__ = ["Null", "parse_null", "MASS_TOLERANCE"]

MASS_TOLERANCE = 1e-3
_PROB_TOLERANCE = 1e-9


class Null:
    """A parsed null: ``cdf`` (callable on the original scale) or fixed ``probs``."""

    def __init__(self, description: str, cdf: Callable[[np.ndarray], np.ndarray] | None = None,
                 probs: np.ndarray | None = None) -> None:
        self.description, self.cdf, self.probs = description, cdf, probs

    def __repr__(self) -> str:
        return f"Null({self.description})"

    def bin_probabilities(self, domain: tuple[float, float], level: int) -> np.ndarray:
        """p0 on the 2^level equal bins of ``domain``; validated and summing to one."""
        D = 1 << level
        if self.probs is not None:
            p = self.probs
            if len(p) < D or (len(p) & (len(p) - 1)) or len(p) % D:
                raise LdpDaskError(
                    f"The null's bin probabilities must have length 2^J = {D} (or a finer power of two). "
                    f"Got length {len(p)} instead."
                )
            return p.reshape(D, -1).sum(axis=1)
        lo, hi = domain
        edges = np.linspace(lo, hi, D + 1)
        try:
            F = np.asarray(self.cdf(edges), dtype=np.float64)  # type: ignore[misc]
        except Exception as exc:  # a user callable: report, do not guess
            raise LdpDaskError(f"The null CDF failed on the domain's bin edges: {exc}") from None
        if F.shape != edges.shape or not np.all(np.isfinite(F)):
            raise LdpDaskError("The null CDF must return one finite value per point.")
        diffs = np.diff(F)
        if np.any(diffs < -1e-12):
            raise LdpDaskError("The null CDF decreases on the domain: it is not a CDF.")
        mass = float(F[-1] - F[0])
        if abs(mass - 1.0) > MASS_TOLERANCE:
            raise LdpDaskError(
                f"The null {self.description} puts mass {mass:.6g} on the domain [{lo:g}, {hi:g}]; "
                f"a null density must integrate to one there (±{MASS_TOLERANCE:g})."
            )
        return np.maximum(diffs, 0.0) / mass


def _literal(node: ast.AST) -> float:
    v = ast.literal_eval(node)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("not a number")
    return float(v)


def _from_string(spec: str) -> Null:
    from scipy import stats

    try:
        tree = ast.parse(spec.strip(), mode="eval").body
        if isinstance(tree, ast.Name):
            name, args, kwargs = tree.id, [], {}
        elif isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name):
            name = tree.func.id
            args = [_literal(a) for a in tree.args]
            kwargs = {k.arg: _literal(k.value) for k in tree.keywords if k.arg}
        else:
            raise ValueError("not a call")
    except (SyntaxError, ValueError):
        raise LdpDaskError(
            f"The 'null' parameter must look like 'beta(2,2)' or 'norm(loc=0.5, scale=0.1)'. Got {spec!r} instead."
        ) from None
    dist = getattr(stats, name, None)
    if not isinstance(dist, stats.rv_continuous):
        raise LdpDaskError(f"The 'null' parameter names {name!r}, which is not a scipy.stats continuous distribution.")
    try:
        frozen = dist(*args, **kwargs)
        frozen.cdf(0.5)
    except (TypeError, ValueError) as exc:
        raise LdpDaskError(f"The null {spec!r} has invalid parameters: {exc}") from None
    if not np.all(np.isfinite(frozen.cdf(np.array([0.0, 1.0])))):
        raise LdpDaskError(f"The null {spec!r} has invalid parameters.")
    return Null(spec.strip(), cdf=frozen.cdf)


def parse_null(null: Any) -> Null:
    """Turn any accepted form of the null into a :class:`Null`."""
    if isinstance(null, Null):
        return null
    if isinstance(null, str):
        return _from_string(null)
    if hasattr(null, "cdf") and hasattr(null, "dist"):  # scipy frozen distribution
        args = ", ".join(f"{a:g}" for a in getattr(null, "args", ()))
        kw = ", ".join(f"{k}={v:g}" for k, v in getattr(null, "kwds", {}).items())
        return Null(f"{null.dist.name}({', '.join(x for x in (args, kw) if x)})", cdf=null.cdf)
    if callable(null):
        return Null(getattr(null, "__name__", "CDF callable"), cdf=null)
    try:
        p = np.asarray(null, dtype=np.float64)
    except (TypeError, ValueError):
        p = np.array([np.nan])
    if p.ndim != 1 or len(p) == 0 or not np.all(np.isfinite(p)):
        raise LdpDaskError(
            "The 'null' parameter must be a scipy.stats frozen distribution, a name like 'beta(2,2)', "
            f"a CDF callable or a vector of bin probabilities. Got {type(null).__name__} instead."
        )
    if np.any(p < 0) or abs(p.sum() - 1.0) > _PROB_TOLERANCE:
        raise LdpDaskError(
            f"The null's bin probabilities must be nonnegative and sum to one. They sum to {p.sum():.12g}."
        )
    return Null(f"bin probabilities ({len(p)} bins)", probs=p)
