"""Means and shares per private group, with Fieller's intervals (docs/estimators.md, "Groups").

Means come from a ``group-mean`` summary (:func:`group_means`), shares — of a distribution's bins or of categories,
within each group — from a ``group-histogram`` summary (:func:`group_shares`).

The summary holds, per group g, S_g = Σ t_i 1[g_i = g] + noise and C_g = #{g_i = g} + noise (t the value rescaled
to [−1, 1]; :class:`~ldp_dask.channels.GroupMean`), each noise a sum of n rows' of variance v. The estimate is
μ̂_g = S_g / C_g (clipped to [−1, 1]), unbiased to first order.

**Interval.** For the group's true mean μ, S_g − μ C_g = Σ_i (t_i − μ) 1[g_i = g] + N_S − μ N_C has mean 0 and
variance n p_g σ_g² + n v (1 + μ²), where n p_g is the group's rows and σ_g² the variance of t in it. Bounding
σ_g² ≤ 1 − μ² (Bhatia–Davis on [−1, 1]) and n p_g by max(C_g, 0), the interval is every μ ∈ [−1, 1] with

    (S_g − μ C_g)² ≤ z² [max(C_g, 0)(1 − μ²) + n v (1 + μ²)]

(Fieller 1954): a quadratic inequality in μ, solved exactly. It stays valid where the delta method fails — a small
group whose noisy count is near zero gets a wide interval, or the whole domain when its count cannot be told from
noise, never a falsely narrow one. Coverage is checked on 50 groups in ``tests/statistical/test_groups.py``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm

from .._validation import LdpDaskError, check_probability
from ..channels import GroupHistogram, GroupMean
from ..outputs import (
    Described,
    Description,
    Table,
    fmt,
    fmt_interval,
    fmt_se,
    interval_scale,
    jsonable,
    save_json,
    summary_facts,
    summary_info,
    tidy_table,
)
from ..summary import Summary, read_summary
from .histogram import project_simplex

__all__ = ["group_means", "GroupMeansEstimate", "group_shares", "GroupSharesEstimate", "fieller", "fieller_share"]


def _solve(a: Any, b: Any, k: Any, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where a x² + b x + k ≤ 0, elementwise: the roots' interval intersected with [lo, hi] where a > 0 (the
    parabola opens upwards: one bounded interval), else all of [lo, hi]; and which elements were bounded."""
    a, b, k = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a, b, k)))
    disc = b * b - 4 * a * k
    bounded = (a > 0) & (disc >= 0)  # disc ≥ 0 whenever a > 0: the set holds the ratio itself
    r = np.sqrt(np.where(bounded, disc, 0.0))
    two_a = np.where(bounded, 2 * a, 1.0)
    low = np.where(bounded, np.maximum((-b - r) / two_a, lo), lo)
    high = np.where(bounded, np.minimum((-b + r) / two_a, hi), hi)
    return low, high, bounded


def _mean_band(s: Any, c: Any, noise: float, z: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The μ ∈ [−1, 1] with (s − μc)² ≤ z²[max(c, 0)(1 − μ²) + noise(1 + μ²)], elementwise (:func:`_solve`)."""
    cp = np.maximum(c, 0.0)
    return _solve(c * c + z * z * (cp - noise), -2.0 * s * c, s * s - z * z * (cp + noise), -1.0, 1.0)


def _share_band(s: Any, c: Any, noise: float, cells: int, z: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The θ ∈ [0, 1] with (s − θc)² ≤ z²[max(c, 0) θ(1 − θ) + noise((1 − θ)² + (cells − 1) θ²)], elementwise."""
    cp = np.maximum(c, 0.0)
    return _solve(c * c + z * z * (cp - noise * cells), -2.0 * s * c - z * z * (cp - 2.0 * noise),
                  s * s - z * z * noise, 0.0, 1.0)


def _one(band: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[float, float] | None:
    low, high, bounded = band
    return (float(low), float(high)) if bool(bounded) else None


def fieller(s: float, c: float, noise: float, z: float) -> tuple[float, float] | None:
    """The μ ∈ [−1, 1] with (s − μc)² ≤ z²[max(c, 0)(1 − μ²) + noise(1 + μ²)], as an interval; None when that set
    is not one bounded interval inside [−1, 1] (the count cannot be told from noise: the whole domain)."""
    return _one(_mean_band(s, c, noise, z))


@dataclass(frozen=True)
class GroupMeansEstimate(Described):
    """Means per private group, each with its interval; the estimated rows per group are noisy (never exact).

    Attributes
    ----------
    labels : list
        The declared keys and ``"other"``.
    means, se : ndarray
        μ̂_g in the column's units (NaN where the group's noisy count is not positive) and its delta-method
        standard error (shown; the interval is Fieller's).
    ci_low, ci_high : ndarray
        Fieller's interval at ``level``, intersected with the domain and holding the mean (the whole domain where
        the group has no estimate).
    rows : ndarray
        The group's estimated rows: the noisy count C_g, at least 0.
    raw, raw_rows : ndarray
        S_g / C_g in the column's units (unclipped; NaN where C_g is not positive) and C_g itself (may be
        negative), for those who combine releases.
    """

    labels: list[Any]
    means: np.ndarray
    se: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    rows: np.ndarray
    level: float
    n: int
    epsilon: float
    domain: tuple[float, float]
    info: dict[str, Any] = field(default_factory=dict)
    raw: np.ndarray | None = None
    raw_rows: np.ndarray | None = None

    def to_table(self) -> Any:
        """One row per group, tidy: ``statistic`` (the column), ``group``, ``value`` (the mean; null where the
        group's noisy count is not positive), ``se``, ``ci_low``, ``ci_high`` (Fieller's), ``estimated_rows``,
        with ``confidence``, ``n``, ``epsilon`` and the domain as columns."""
        column = self.info.get("column", "value")
        return tidy_table({"statistic": [column] * len(self.labels), "group": [str(g) for g in self.labels],
                           "value": _nulls(self.means), "se": _nulls(self.se), "ci_low": self.ci_low,
                           "ci_high": self.ci_high, "estimated_rows": self.rows, "raw": _nulls(_or(self.raw)),
                           "raw_rows": _nulls(_or(self.raw_rows))},
                          {"group_by": self.info.get("group", {}).get("column", "group"), "confidence": self.level,
                           "n": self.n, "epsilon": self.epsilon, "domain_low": self.domain[0],
                           "domain_high": self.domain[1]})

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"kind": "group-means", "groups": self.labels, "means": self.means, "se": self.se,
                         "ci_low": self.ci_low, "ci_high": self.ci_high, "estimated_rows": self.rows,
                         "raw": self.raw, "raw_rows": self.raw_rows,
                         "level": self.level, "n": self.n, "epsilon": self.epsilon, "domain": list(self.domain),
                         **self.info})

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> str:
        return save_json(self.to_dict(), path, overwrite)

    def describe(self) -> Description:
        column = self.info.get("column", "value")
        by = self.info.get("group", {}).get("column", "group")
        rows = tuple((str(g), fmt_se(m, s) if np.isfinite(m) else NO_ESTIMATE, fmt(s, 2) if np.isfinite(s) else "—",
                      fmt_interval(lo, hi, s), f"{r:,.0f}")
                     for g, m, s, lo, hi, r in zip(self.labels, self.means, self.se, self.ci_low, self.ci_high,
                                                   self.rows))
        widest = int(np.nanargmax(self.ci_high - self.ci_low)) if len(self.labels) else 0
        return Description(
            f"Locally private mean of {column} per {by} (private group)",
            f"{len(self.labels)} groups; widest {self.level:.0%} interval: {self.labels[widest]} "
            f"{fmt_interval(self.ci_low[widest], self.ci_high[widest], self.se[widest])}",
            (("groups", f"{len(self.labels)} ({by}: the declared keys and 'other')"),
             ("group sizes", "not released exactly: each group's rows are estimated from noisy counts"),
             ("n, ε per row", f"{self.n:,}, {self.epsilon:g}"),
             ("public domain", f"[{fmt(self.domain[0])}, {fmt(self.domain[1])}]"),
             *summary_facts(self.info)),
            Table((by, "mean", "se", f"{self.level:.0%} interval (Fieller)", "estimated rows"), rows))

    def plot(self, path: str | os.PathLike[str] | None = None, ax: Any = None) -> Any:
        """Each group's mean and interval, one row per group."""
        from ..outputs import finish_plot, new_axes

        ax, own = new_axes(ax, (7.0, max(2.5, 0.28 * len(self.labels) + 1)))
        y = np.arange(len(self.labels))
        ax.errorbar(self.means, y, xerr=[self.means - self.ci_low, self.ci_high - self.means], fmt="o", ms=3,
                    capsize=2)
        ax.set_yticks(y, [str(g) for g in self.labels])
        ax.invert_yaxis()
        ax.set_xlim(*self.domain)
        ax.set_xlabel(f"mean of {self.info.get('column', 'value')} ({self.level:.0%} intervals)")
        return finish_plot(ax, path, own, False)


def group_means(summary: Summary | str, level: float = 0.95) -> GroupMeansEstimate:
    """Each private group's mean with Fieller's interval at ``level`` (module docstring)."""
    s = read_summary(summary)
    ch = s.channel
    if not isinstance(ch, GroupMean):
        raise LdpDaskError(f"group_means needs a 'group-mean' summary; got {ch.name!r}.")
    level = check_probability(level, "level")
    z = float(norm.ppf(0.5 + level / 2))
    g = ch.groups
    sums, counts = s.sums["sum"][:g], s.sums["sum"][g:]
    noise = s.n * ch.noise_variance
    with np.errstate(divide="ignore", invalid="ignore"):
        positive = counts > 0
        mu = np.where(positive, np.clip(sums / np.where(positive, counts, 1.0), -1.0, 1.0), np.nan)
        se = np.sqrt(np.maximum(counts, 0.0) * (1 - mu * mu) + noise * (1 + mu * mu)) / np.where(positive, counts, np.nan)
        raw = np.where(positive, sums / np.where(positive, counts, 1.0), np.nan)
    lo, hi, _ = _mean_band(sums, counts, noise, z)
    lo, hi = _holding(lo, hi, mu, -1.0, 1.0)
    info = summary_info(s)
    labels = list((s.metadata.get("group") or {}).get("labels") or range(g))
    info["group"] = s.metadata.get("group") or {}
    to = lambda t: ch.mid + ch.half * t  # noqa: E731 - t ∈ [−1, 1] back to the column's units
    return GroupMeansEstimate(labels, to(mu), ch.half * se, to(lo), to(hi), np.maximum(counts, 0.0), level, s.n,
                              ch.epsilon, ch.domain, info, raw=to(raw), raw_rows=counts.astype(float))


#: What a table shows for a group with no estimate (its noisy count is not positive: it cannot be told from noise).
NO_ESTIMATE = "no estimate (count ≤ 0)"


def _holding(lo: np.ndarray, hi: np.ndarray, point: np.ndarray, low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """Fieller's intervals made to hold their point (where the set fell wholly outside the domain, the domain's
    nearest end); where there is no point, the whole range [low, high]: no claim rather than a wrong one."""
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    none = ~np.isfinite(point)
    p = np.where(none, low, point)
    return np.where(none, low, np.minimum(lo, p)), np.where(none, high, np.maximum(hi, p))


def _or(values: np.ndarray | None) -> np.ndarray:
    return np.asarray([] if values is None else values, dtype=float)


def fieller_share(s: float, c: float, noise: float, cells: int, z: float) -> tuple[float, float] | None:
    """The θ ∈ [0, 1] with (s − θc)² ≤ z²[max(c, 0) θ(1 − θ) + noise((1 − θ)² + (cells − 1) θ²)], as an interval;
    None when that set is not one bounded interval (the group's count cannot be told from noise: all of [0, 1])."""
    return _one(_share_band(s, c, noise, cells, z))


def _cell_labels(meta: dict[str, Any], k: int) -> list[str]:
    cells = meta.get("cells") or {}
    if cells.get("kind") == "bins":
        lo, hi = cells["domain"]
        edges = np.linspace(lo, hi, k + 1)
        return [f"[{fmt(a)}, {fmt(b)})" for a, b in zip(edges[:-1], edges[1:])]
    if cells.get("kind") == "categories":
        return [str(x) for x in cells["labels"]]
    return [str(i) for i in range(k)]


@dataclass(frozen=True)
class GroupSharesEstimate(Described):
    """Each private group's shares of its cells (a distribution's bins, or categories), each with Fieller's interval;
    the estimated rows per group are noisy (never exact).

    Attributes
    ----------
    groups, cells : list
        The group labels (declared keys and ``"other"``) and the cells' labels (bins or categories).
    shares, ci_low, ci_high : ndarray, shape (groups, cells)
        Each group's shares N_gk / C_g projected onto the simplex (NaN where C_g is not positive), and Fieller's
        interval at ``level``, within [0, 1] and holding the share ([0, 1] where there is no share).
    rows : ndarray
        Each group's estimated rows: C_g, at least 0.
    raw, raw_rows : ndarray
        N_gk / C_g unprojected and C_g itself (may be negative), for those who combine releases.
    """

    groups: list[Any]
    cells: list[str]
    shares: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    rows: np.ndarray
    level: float
    n: int
    epsilon: float
    info: dict[str, Any] = field(default_factory=dict)
    raw: np.ndarray | None = None
    raw_rows: np.ndarray | None = None

    def to_table(self) -> Any:
        """One row per (group, cell), tidy: ``statistic`` (the column), ``group``, ``cell``, ``value`` (the share;
        null where the group's noisy count is not positive), ``se`` (null: a ratio's interval is Fieller's, not a
        multiple of a standard error), ``ci_low``, ``ci_high``, ``estimated_rows`` of the group, with
        ``confidence``, ``n`` and ``epsilon`` as columns."""
        g, k = len(self.groups), len(self.cells)
        return tidy_table({"statistic": [self.info.get("column", "value")] * (g * k),
                           "group": [str(x) for x in self.groups for _ in self.cells],
                           "cell": [str(c) for _ in self.groups for c in self.cells],
                           "value": _nulls(np.asarray(self.shares, dtype=float).ravel()),
                           "se": [None] * (g * k), "ci_low": np.asarray(self.ci_low, dtype=float).ravel(),
                           "ci_high": np.asarray(self.ci_high, dtype=float).ravel(),
                           "estimated_rows": np.repeat(np.asarray(self.rows, dtype=float), k),
                           "raw": _nulls(_or(self.raw).ravel()) if self.raw is not None else [None] * (g * k),
                           "raw_rows": _nulls(np.repeat(_or(self.raw_rows), k)) if self.raw_rows is not None
                           else [None] * (g * k)},
                          {"group_by": self.info.get("group", {}).get("column", "group"), "confidence": self.level,
                           "n": self.n, "epsilon": self.epsilon})

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"kind": "group-shares", "groups": self.groups, "cells": self.cells, "shares": self.shares,
                         "ci_low": self.ci_low, "ci_high": self.ci_high, "estimated_rows": self.rows,
                         "raw": self.raw, "raw_rows": self.raw_rows,
                         "level": self.level, "n": self.n, "epsilon": self.epsilon, **self.info})

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> str:
        return save_json(self.to_dict(), path, overwrite)

    def describe(self) -> Description:
        by = self.info.get("group", {}).get("column", "group")
        scale = [[interval_scale(lo, hi, self.level) for lo, hi in zip(a, b)] for a, b in zip(self.ci_low, self.ci_high)]
        rows = tuple((str(g), c, fmt_se(self.shares[i, k], scale[i][k]) if np.isfinite(self.shares[i, k])
                      else NO_ESTIMATE,
                      fmt_interval(self.ci_low[i, k], self.ci_high[i, k], scale[i][k]), f"{self.rows[i]:,.0f}")
                     for i, g in enumerate(self.groups) for k, c in enumerate(self.cells))
        return Description(
            f"Locally private shares of {self.info.get('column', 'value')} per {by} (private group)",
            f"{len(self.groups)} groups × {len(self.cells)} cells, each share with its {self.level:.0%} interval",
            (("groups", f"{len(self.groups)} ({by}: the declared keys and 'other')"),
             ("group sizes", "not released exactly: each group's rows are estimated from noisy counts"),
             ("n, ε per row", f"{self.n:,}, {self.epsilon:g}"), *summary_facts(self.info)),
            Table((by, "cell", "share", f"{self.level:.0%} interval (Fieller)", "estimated rows"), rows))


def group_shares(summary: Summary | str, level: float = 0.95) -> GroupSharesEstimate:
    """Each private group's share of each cell with Fieller's interval at ``level`` (module docstring)."""
    s = read_summary(summary)
    ch = s.channel
    if not isinstance(ch, GroupHistogram):
        raise LdpDaskError(f"group_shares needs a 'group-histogram' summary; got {ch.name!r}.")
    level = check_probability(level, "level")
    z = float(norm.ppf(0.5 + level / 2))
    counts = s.sums["sum"].reshape(ch.groups, ch.cells)
    rows = counts.sum(axis=1)
    noise = s.n * ch.noise_variance
    column = rows[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = np.where(column > 0, counts / np.where(column > 0, column, 1.0), np.nan)
    # each group's shares on the simplex (they sum to 1 unprojected, but some may be negative)
    shares = np.array([project_simplex(r) if np.all(np.isfinite(r)) else r for r in raw]).reshape(raw.shape)
    lo, hi, _ = _share_band(counts, column, noise, ch.cells, z)
    lo, hi = _holding(lo, hi, shares, 0.0, 1.0)
    info = summary_info(s)
    info["group"] = s.metadata.get("group") or {}
    groups = list(info["group"].get("labels") or range(ch.groups))
    return GroupSharesEstimate(groups, _cell_labels(s.metadata, ch.cells), shares, lo, hi, np.maximum(rows, 0.0),
                               level, s.n, ch.epsilon, info, raw=raw, raw_rows=rows.astype(float))


def _nulls(values: Any) -> list[float | None]:
    """Values as a list with None where they are not finite (a table's null, not a NaN a reader may average)."""
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=float)]
