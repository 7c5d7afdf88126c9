"""The result of a goodness-of-fit test: numbers, ``to_dict()``, a plot of the null law."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..outputs import (
    Described,
    Description,
    Table,
    finish_plot,
    fmt,
    fmt_interval,
    fmt_se,
    interval_scale,
    jsonable,
    new_axes,
    save_json,
)
from ..receipts import Receipted

__all__ = ["TestResult"]


@dataclass(frozen=True)
class TestResult(Described, Receipted):
    """Outcome of :func:`ldp_dask.gof.test` or :func:`ldp_dask.gof.adaptive_test`.

    Attributes
    ----------
    statistic : float
        T'_J or T_J; for the adaptive test max_J (T_J − t_J(1 − u_γ)), compared with 0.
    critical_value : float
        The (1 − γ) Monte-Carlo quantile of the statistic under H0 (0 for the adaptive test).
    critical_value_ci : (float, float)
        95% interval for the exact critical value, from the Monte-Carlo order statistics.
    p_value : float
        (1 + #{T_sim ≥ T_obs})/(B + 1) (adaptive: combined over levels).
    p_value_se : float
        Monte-Carlo standard error √(p(1 − p)/B).
    reject : bool
        ``p_value <= level``: exact level γ for any B with (B + 1)γ an integer.
    details : list of dict
        Per level: J, n, statistic, threshold, p-value.
    seed : int or None
        Seed of the calibration generator when it was created by the test (reproduce with ``rng=seed``).
    privacy_unit : str
        What the summary's ε is counted per (``"row"`` or the column naming a person).
    """

    __test__ = False  # not a pytest class

    statistic: float
    critical_value: float
    critical_value_ci: tuple[float, float]
    p_value: float
    p_value_se: float
    reject: bool
    level: float
    B: int
    n: int
    epsilon: float
    method: str
    null: str
    J: int | list[int]
    details: list[dict[str, Any]] = field(default_factory=list)
    seed: int | None = None
    privacy_unit: str = "row"
    null_sample: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return jsonable({
            "kind": "gof", "method": self.method, "null": self.null, "J": self.J, "n": self.n,
            "epsilon": self.epsilon, "level": self.level, "B": self.B, "statistic": self.statistic,
            "critical_value": self.critical_value, "critical_value_ci": list(self.critical_value_ci),
            "p_value": self.p_value, "p_value_se": self.p_value_se, "reject": self.reject,
            "details": self.details, "seed": self.seed, "privacy_unit": self.privacy_unit,
        })

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> str:
        return save_json(self.to_dict(), path, overwrite)

    def describe(self) -> Description:
        lo, hi = self.critical_value_ci
        decision = "REJECT H0" if self.reject else "do not reject H0"
        rows = tuple((str(d["J"]), f"{d['n']:,}", fmt(d["statistic"], 4), fmt(d["threshold"], 4), fmt(d["p_value"], 4))
                     for d in self.details)
        return Description(
            title=f"Goodness-of-fit test of H0: f = {self.null}",
            headline=f"{decision} at level {self.level:g} (p-value {self.p_value:.4g})",
            facts=(("decision", f"{decision} at level {self.level:g}"), ("method", self.method),
                   ("n, ε per row", f"{self.n:,}, {self.epsilon:g}"), ("privacy unit", self.privacy_unit),
                   ("J", str(self.J)),
                   ("statistic", fmt(self.statistic, 4)),
                   ("critical value", f"{fmt_se(self.critical_value, interval_scale(lo, hi))} (95% Monte-Carlo "
                                      f"interval {fmt_interval(lo, hi, interval_scale(lo, hi))})"),
                   ("p-value", f"{self.p_value:.4g} (Monte-Carlo se {self.p_value_se:.2g}), B = {self.B:,}")),
            table=Table(("J", "rows", "statistic", "threshold", "p-value"), rows) if len(rows) > 1 else None)

    def plot(self, path: str | os.PathLike[str] | None = None, ax: Any = None, overwrite: bool = False) -> Any:
        """Histogram of the simulated null statistic with the observed value and the critical value."""
        ax, own = new_axes(ax, (8, 4.5))
        if self.null_sample is not None:
            ax.hist(self.null_sample, bins=80, color="tab:grey", alpha=0.6, density=True,
                    label=f"null law ({self.B:,} Monte-Carlo replicates)")
        ax.axvline(self.critical_value, color="tab:orange", lw=1.5,
                   label=f"critical value, level {self.level:g}")
        ax.axvline(self.statistic, color="tab:red" if self.reject else "tab:blue", lw=2,
                   label=f"observed (p = {self.p_value:.3g})")
        ax.set_xlabel("statistic" if not isinstance(self.J, list) else "max_J (T_J − threshold_J)")
        ax.set_title(f"LDP goodness of fit: H0 f = {self.null}, n = {self.n:,}, ε = {self.epsilon:g}",
                     parse_math=False)
        ax.legend(fontsize=8)
        return finish_plot(ax, path, own, overwrite)
