"""Category frequencies from a categorical summary (randomized response, Hadamard response, subset selection;
docs/estimators.md), and the cell shares of a memoized histogram (a night of a longitudinal release, whose reports
are a memoized optimized unary encoding with the same (p_in, p_out) algebra).

With T_j the number of reports supporting category j — reports of j (kary, warner), 1-bits at coordinate j
(unary, oue), reports in j's half of the Hadamard indices (hadamard), reported sets holding j (subset) — and
(p_in, p_out) = P(support j | true j), P(support j | true ≠ j), the support rate is π_j = p_out + (p_in − p_out) θ_j, so

    θ̂_j = (S_j/n − p_out) / (p_in − p_out)

is unbiased (for unary, p_in − p_out = 2q − 1 = (e^{α/2} − 1)/(e^{α/2} + 1), the
formula of Duchi, Jordan and Wainwright with its typo fixed), with Var θ̂_j = π_j(1 − π_j)/(n (p_in − p_out)²);
the standard error plugs in π̂_j = T_j/n and the interval is normal at
``level``. By default (``projection="simplex"``) the shares shown are θ̂'s
Euclidean projection onto the probability simplex: a proper distribution,
never farther from the truth in L2 (the truth lies in the simplex), free
post-processing; each interval, θ̂_j ± z·SE, is intersected with [0, 1] and
widened to hold its share (a share lies in [0, 1], so neither loses coverage),
and θ̂ itself stays available as ``raw`` (``unbiased`` in the tables and
JSON) for those who aggregate releases. ``projection="none"`` shows θ̂ and
its plain intervals: unbiased, and possibly below 0 or above 1.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm

from .._validation import LdpDaskError, check_probability
from ..channels import CategoricalChannel, MemoHistogram
from ..outputs import (
    Described,
    Description,
    Table,
    finish_plot,
    jsonable,
    new_axes,
    save_json,
    summary_facts,
    summary_info,
    tidy_table,
)
from ..summary import Summary, read_summary
from .histogram import project_simplex
from .results import MOSTLY_NOISE

__all__ = ["frequencies", "FrequencyEstimate"]


@dataclass(frozen=True)
class FrequencyEstimate(Described):
    """Estimated category frequencies with per-category confidence intervals."""

    labels: list[Any]
    frequencies: np.ndarray
    se: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    raw: np.ndarray
    method: str
    n: int
    epsilon: float
    level: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def warnings(self) -> tuple[str, ...]:
        """When the unbiased estimate of a share fell outside [0, 1]: the share shown is the projection's, and such
        a share is mostly noise (the figure: its standard error)."""
        said: list[str] = []
        out = [i for i, r in enumerate(self.raw) if (r < 0 or r > 1) and self.method.endswith("+simplex")]
        if out:
            worst = max(out, key=lambda i: abs(self.raw[i] - np.clip(self.raw[i], 0, 1)))
            said.append(f"{len(out)} unbiased share(s) fell outside [0, 1] (e.g. {self.labels[worst]!s}: "
                        f"{self.raw[worst]:.4g}, standard error {self.se[worst]:.2g}); the shares shown are "
                        "projected onto the simplex, and those near 0 or 1 are mostly noise")
        if self.mostly_noise:
            said.append(f"mostly noise: each share's standard error is about {float(np.median(self.se)):.2g} "
                        f"(more than {MOSTLY_NOISE:g} of [0, 1]), so its interval spans most of [0, 1] (more rows or "
                        "a larger ε would help)")
        return tuple(said)

    @property
    def mostly_noise(self) -> bool:
        """Whether a typical share is mostly noise: its standard error passes :data:`MOSTLY_NOISE` of [0, 1]."""
        return bool(len(self.se) and float(np.median(self.se)) > MOSTLY_NOISE)

    def to_table(self) -> Any:
        """One row per category: ``category`` (the labels as text), ``frequency``, ``se``, ``ci_low``,
        ``ci_high``, the ``unbiased`` estimate, with ``method``, ``n``, ``epsilon``, ``confidence`` as columns."""
        return tidy_table({"category": [str(c) for c in self.labels], "frequency": self.frequencies, "se": self.se,
                           "ci_low": self.ci_low, "ci_high": self.ci_high, "unbiased": self.raw},
                          {"column": self.info.get("column", "value"), "method": self.method, "n": self.n,
                           "epsilon": self.epsilon, "confidence": self.level})

    def to_dict(self) -> dict[str, Any]:
        return jsonable({
            "kind": "frequencies", "method": self.method, "labels": self.labels, "frequencies": self.frequencies,
            "se": self.se, "ci_low": self.ci_low, "ci_high": self.ci_high, "unbiased": self.raw, "n": self.n,
            "epsilon": self.epsilon, "level": self.level, "mostly_noise": self.mostly_noise, **self.info,
            "warnings": list(self.warnings),
        })

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> str:
        return save_json(self.to_dict(), path, overwrite)

    def describe(self) -> Description:
        top = int(np.argmax(self.frequencies))
        rows = tuple((str(lab), f"{f:.4f}", f"{se:.4f}", f"[{lo:.4f}, {hi:.4f}]")
                     for lab, f, se, lo, hi in zip(self.labels, self.frequencies, self.se, self.ci_low, self.ci_high))
        return Description(
            title=f"Locally private frequencies of {self.info.get('column', 'value')}",
            headline=f"most frequent: {self.labels[top]!s} at {self.frequencies[top]:.4f} "
                     f"[{self.ci_low[top]:.4f}, {self.ci_high[top]:.4f}]"
                     + (f"; mostly noise (se {float(np.median(self.se)):.2g} a share)" if self.mostly_noise else ""),
            facts=(("encoding", self.method), ("categories", f"{len(self.labels):,}"),
                   ("n, ε per row", f"{self.n:,}, {self.epsilon:g}"),
                   ("intervals", f"{self.level:.0%} per category, around the unbiased estimate, privacy noise "
                                 "included" + (", within [0, 1] and holding the share shown"
                                               if self.method.endswith("+simplex") else "")),
                   *summary_facts(self.info), *(("warning", w) for w in self.warnings)),
            table=Table(("category", "frequency", "se", f"{self.level:.0%} interval"), rows))

    def plot(self, path: str | os.PathLike[str] | None = None, ax: Any = None, truth: Any = None,
             overwrite: bool = False, max_bars: int = 60) -> Any:
        """Bar plot with interval whiskers (the ``max_bars`` largest categories when there are more)."""
        order = np.argsort(-self.frequencies)[:max_bars] if len(self.labels) > max_bars else np.arange(len(self.labels))
        ax, own = new_axes(ax, (max(6, 0.35 * len(order) + 2), 4.5))
        xs = np.arange(len(order))
        f = self.frequencies[order]
        ax.bar(xs, f, color="tab:blue", alpha=0.7, label=f"estimate ({self.method})")
        ax.errorbar(xs, f, yerr=[f - self.ci_low[order], self.ci_high[order] - f], fmt="none", ecolor="black",
                    capsize=2, lw=0.8, label=f"{self.level:.0%} interval")
        if truth is not None:
            ax.plot(xs, np.asarray(truth)[order], "o", color="tab:red", ms=4, label="truth")
        ax.set_xticks(xs)
        ax.set_xticklabels([shown(self.labels[i]) for i in order], rotation=60 if len(order) > 8 else 0,
                           ha="right" if len(order) > 8 else "center", fontsize=8,
                           parse_math=False)  # labels are data: '$a^$' is text, not mathtext
        ax.set_ylabel("frequency")
        ax.set_title(f"Locally private frequencies: n = {self.n:,}, ε = {self.epsilon:g}")
        ax.legend(fontsize=8)
        return finish_plot(ax, path, own, overwrite)


def shown(label: Any) -> str:
    """A label as a plot shows it: characters no font draws (controls, unassigned) as their escapes (``\\t``)."""
    text = str(label)
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def frequencies(summary: Summary | str, projection: str = "simplex", level: float = 0.95) -> FrequencyEstimate:
    """Category frequencies with intervals: projected onto the simplex by default (the unbiased estimate kept as
    ``raw``), or the unbiased estimate itself with ``projection="none"`` (module docstring)."""
    s = read_summary(summary)
    ch: Any = s.channel  # a randomized-response channel (its encoding)
    if not isinstance(s.channel, (CategoricalChannel, MemoHistogram)):
        raise LdpDaskError(f"frequencies needs a summary of a categorical channel ('rr', 'hadamard', 'subset', "
                           f"'memo-rr', 'capped-rr') or of a memoized histogram ('memo-histogram', 'capped-histogram'); got "
                           f"{ch.name!r}.")
    if projection not in ("none", "simplex"):
        raise LdpDaskError(f"The 'projection' parameter must be 'none' or 'simplex'. Got {projection!r} instead.")
    level = check_probability(level, "level")
    n = s.n
    p_in, p_out = ch.report_probabilities
    slope = p_in - p_out
    rate = ch.support_counts(s.sums["sum"]) / n
    raw = (rate - p_out) / slope
    pi = np.clip(rate, 0.0, 1.0)
    se = np.sqrt(pi * (1 - pi) / n) / slope
    z = float(norm.ppf(0.5 + level / 2))
    est, low, high = raw, raw - z * se, raw + z * se
    if projection == "simplex":  # a share and its interval in [0, 1], the interval holding the share
        est = project_simplex(raw)
        low, high = np.minimum(np.clip(low, 0.0, 1.0), est), np.maximum(np.clip(high, 0.0, 1.0), est)
    return FrequencyEstimate(
        labels=list(ch.labels), frequencies=est, se=se, ci_low=low, ci_high=high, raw=raw,
        method=ch.encoding + ("+simplex" if projection == "simplex" else ""), n=n, epsilon=ch.epsilon,
        level=level, info={**summary_info(s), "encoding": ch.encoding},
    )
