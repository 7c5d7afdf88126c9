"""The libraries users would otherwise pick, wrapped for benchmarks/quantiles.py (benchmark-only extra).

Same privacy relation for all: one record replaced, ε in total for the k quantiles.
* diffprivlib ``tools.quantile``: exponential mechanism, ε split over the quantiles by the library.
* OpenDP ``make_private_quantile``: ε/k each; replace-one is symmetric distance 2, the
  sized domain (n public) gives the tighter sensitivity; candidates: 1024 equal steps
  over the bounds (the library needs candidates; no default exists).
* OpenDP b-ary tree: histogram on 1024 bins → b-ary tree (b from choose_branching_factor)
  → Laplace noise calibrated for d_in = 2 → consistency → quantiles from counts (linear).
* python-dp ``QuantileTree`` (library defaults: height 4, branching 16): add/remove
  neighbours, so ε/2 gives replace-one parity (docs/central-quantiles.md).
"""

from __future__ import annotations

import numpy as np

CANDIDATES = 1024


def diffprivlib_quantiles(x: np.ndarray, q: np.ndarray, eps: float, bounds: tuple[float, float]) -> np.ndarray:
    import warnings

    from diffprivlib.tools import quantile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(quantile(x, quant=list(q), epsilon=eps, bounds=bounds), dtype=float)


_MEASUREMENTS: dict = {}


def _opendp_measurement(n: int, a: float, eps: float, bounds: tuple[float, float]):
    """The calibrated measurement depends only on public parameters: built once, reused."""
    import opendp.prelude as dp

    key = (n, a, eps, bounds)
    if key not in _MEASUREMENTS:
        dp.enable_features("contrib")
        cands = list(np.linspace(bounds[0], bounds[1], CANDIDATES))
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=n), dp.symmetric_distance()
        _MEASUREMENTS[key] = dp.binary_search_chain(
            lambda s: dp.m.make_private_quantile(*space, dp.max_divergence(), cands, a, s), d_in=2, d_out=eps)
    return _MEASUREMENTS[key]


def opendp_quantiles(x: np.ndarray, q: np.ndarray, eps: float, bounds: tuple[float, float]) -> np.ndarray:
    data = list(map(float, x))
    out = [_opendp_measurement(len(x), float(a), eps / len(q), tuple(bounds))(data) for a in q]
    return np.sort(np.array(out, dtype=float))


def opendp_tree_quantiles(x: np.ndarray, q: np.ndarray, eps: float, bounds: tuple[float, float],
                          bins: int = CANDIDATES) -> np.ndarray:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    lo, hi = bounds
    edges = list(np.linspace(lo, hi, bins + 1))
    b = dp.t.choose_branching_factor(size_guess=bins)
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance()
    t_hist = (space >> dp.t.then_find_bin(edges=edges[1:-1])
              >> dp.t.then_count_by_categories(categories=list(range(bins - 1)), null_category=True)
              >> dp.t.then_b_ary_tree(leaf_count=bins, branching_factor=b))
    meas = dp.binary_search_chain(lambda s: t_hist >> dp.m.then_laplace(s), d_in=2, d_out=eps)
    tree = meas(list(map(float, np.clip(x, lo, hi))))
    leaves = dp.t.make_consistent_b_ary_tree(branching_factor=b)(tree)
    post = dp.t.make_quantiles_from_counts(edges, alphas=list(map(float, q)), interpolation="linear")
    return np.sort(np.array(post(leaves), dtype=float))


def pydp_quantiles(x: np.ndarray, q: np.ndarray, eps: float, bounds: tuple[float, float]) -> np.ndarray:
    from pydp.algorithms.quantile_tree import QuantileTree

    lo, hi = bounds
    tree = QuantileTree(float(lo), float(hi), 4, 16)
    for v in x:
        tree.add_entry(float(v))
    return np.sort(np.array(tree.compute_quantiles(eps / 2, 0.0, 1, 1, list(map(float, q)), "laplace"), dtype=float))


LIBRARIES = {
    "diffprivlib tools.quantile": diffprivlib_quantiles,
    "OpenDP make_private_quantile": opendp_quantiles,
    "OpenDP b-ary tree": opendp_tree_quantiles,
    "python-dp QuantileTree": pydp_quantiles,
}
