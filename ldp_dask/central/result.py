"""What a central quantile release publishes: values, the method and how ε was spent."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..outputs import Described, Description, Table, finish_plot, fmt, jsonable, new_axes, save_json
from ..receipts import Receipted

__all__ = ["QuantileRelease"]


@dataclass(frozen=True)
class QuantileRelease(Described, Receipted):
    """Central-DP quantiles.

    Attributes
    ----------
    q, values : ndarray
        Requested probabilities and the released quantiles (nondecreasing).
    method : str
        The mechanism that produced them ("best" resolves to one of the others).
    epsilon : float
        Total ε spent (ε-DP, one record replaced, n public).
    epsilon_split : dict
        How ε was spent: ``{"joint": ε}`` or ``{"per_quantile": [ε/k, ...]}``.
    n, bounds : int, (float, float)
    details : dict
        Public parameters of the mechanism (steps, ρ, grid, intervals) and timings.
    n_clipped : int or None
        Operator-only exact count of clipped values; not in :meth:`to_dict`.
    """

    q: np.ndarray
    values: np.ndarray
    method: str
    epsilon: float
    epsilon_split: dict[str, Any]
    n: int
    bounds: tuple[float, float]
    column: str = "value"
    details: dict[str, Any] = field(default_factory=dict)
    n_clipped: int | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return jsonable({
            "kind": "central-quantiles", "q": self.q, "values": self.values, "method": self.method,
            "epsilon": self.epsilon, "epsilon_split": self.epsilon_split, "n": self.n,
            "bounds": list(self.bounds), "column": self.column, **self.details,
        })

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> str:
        return save_json(self.to_dict(), path, overwrite)

    def describe(self) -> Description:
        split = ", ".join(f"{k}: {v}" for k, v in self.epsilon_split.items())
        return Description(
            title=f"Central-DP quantiles of {self.column}",
            headline=f"{len(self.q)} quantiles released with {self.method}, ε = {self.epsilon:g} in total",
            facts=(("method", self.method), ("ε", f"{self.epsilon:g} in total ({split})"), ("n", f"{self.n:,}"),
                   ("bounds", f"[{self.bounds[0]:g}, {self.bounds[1]:g}]"),
                   ("neighbours", str(self.details.get("neighbours", "one record replaced, n public"))),
                   ("privacy unit", str(self.details.get("privacy_unit", "row"))),
                   ("population estimated", str(self.details.get("population", "rows"))),
                   *self._accuracy_fact()),
            table=Table(("q", "released value"), tuple((f"{q:g}", fmt(v)) for q, v in zip(self.q, self.values))))

    def _accuracy_fact(self) -> tuple[tuple[str, str], ...]:
        acc = self.details.get("accuracy")
        if not acc:
            return ()
        level = f"{100 * acc['confidence']:g}%"
        return ((f"a-priori accuracy ({level}, all {acc['simultaneous']} at once)", str(acc["statement"])),)

    def plot(self, path: str | os.PathLike[str] | None = None, ax: Any = None, overwrite: bool = False) -> Any:
        """The released quantile function against public information only (no data histogram)."""
        ax, own = new_axes(ax, (7, 4.5))
        lo, hi = self.bounds
        ax.plot(np.concatenate([[0], self.q, [1]]), np.concatenate([[lo], self.values, [hi]]), "o-",
                color="tab:blue", label="released quantiles (bounds at 0 and 1)")
        ax.set_xlabel("probability q")
        ax.set_ylabel(self.column, parse_math=False)
        ax.set_ylim(lo, hi)
        ax.set_title(f"Central-DP quantiles ({self.method}), ε = {self.epsilon:g}, n = {self.n:,}")
        ax.legend(fontsize=8)
        return finish_plot(ax, path, own, overwrite)
