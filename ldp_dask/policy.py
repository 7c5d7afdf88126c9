"""What the package refuses and warns about before a release, the same from Python, the CLI and every flow.

* **ε above 50 is refused** (:data:`MAX_EPSILON`): the odds of an output could
  differ e^50-fold between neighbouring data sets, which protects nobody. A
  simulation that means it passes ``allow_large_epsilon=True`` (a run option,
  ``--allow-large-epsilon`` on the command line).
* **Warnings** (:class:`LdpDaskWarning`, through :func:`warnings.warn`, so a
  Python caller can filter or escalate them, the CLI prints them on stderr and a
  flow's log shows them): ε above 10 per unit; more bins or cells than rows;
  a channel whose parameters follow n in a series of partitioned releases.
  Results computed from released values carry their own (a density whose mass
  sits in one bin, a mean dominated by noise) in ``result.warnings``.

The release path (:func:`ldp_dask.release.release`) calls :func:`check_epsilon_spent`
with the ε a release charges per unit, before the ledger or any data is touched.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from ._validation import LdpDaskError

__all__ = ["MAX_EPSILON", "WARN_EPSILON", "LdpDaskWarning", "check_epsilon_spent", "warn_cells", "warn"]

#: Above this ε per unit a release is refused (unless ``allow_large_epsilon``).
MAX_EPSILON = 50.0
#: Above this ε per unit a release is warned about.
WARN_EPSILON = 10.0


class LdpDaskWarning(UserWarning):
    """A release that runs but deserves a second look (little protection, mostly noise)."""


def warn(message: str) -> None:
    """Warn with :class:`LdpDaskWarning`, attributed to the caller of the public function."""
    warnings.warn(message, LdpDaskWarning, stacklevel=3)


def check_epsilon_spent(epsilon: float, unit: str, allow_large: bool = False) -> None:
    """Refuse ε per unit above :data:`MAX_EPSILON` (unless ``allow_large``); warn above :data:`WARN_EPSILON`."""
    if epsilon > MAX_EPSILON and not allow_large:
        raise LdpDaskError(f"The 'epsilon' parameter must be at most {MAX_EPSILON:g} per {unit}. Got {epsilon:g}: "
                           f"the odds of an output could differ e^{epsilon:g}-fold between neighbours, which protects "
                           "nobody (allow_large_epsilon=True, or --allow-large-epsilon, for a simulation that means "
                           "it).")
    if epsilon > WARN_EPSILON:
        odds = f"{math.exp(epsilon):,.0f}" if epsilon < 700 else f"e^{epsilon:g}"
        warn(f"ε = {epsilon:g} per {unit} lets the odds of an output differ up to {odds}-fold between neighbouring "
             "data sets: little protection")


def warn_cells(channel: Any, n: int) -> None:
    """Warn when a channel has more bins (or cells) than the release has rows."""
    cells = getattr(channel, "bins", None) or getattr(channel, "cells", None)
    if isinstance(cells, int) and cells > n:
        what = "bins" if hasattr(channel, "bins") else "cells"
        warn(f"{cells:,} {what} for {n:,} rows: most will hold no row and only noise; the default ('auto') is "
             "sized from n and ε")
