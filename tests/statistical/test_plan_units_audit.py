"""A plan with a privacy unit, audited through the release path: a person's whole plan costs the ε it is charged.

Neighbouring tables: 40 other persons with one row each, and person 0 owning one row (x = 0, category "a", group
"p") in D, or 40 rows (x = 1, category "b", in every statistic's column, spread over every group of the grouped
statistic, "other" included) in D'. The plan (a mean, a distribution, frequencies and a mean per private group,
ε 2 per person, k = 1) is released 600 times on each table through :func:`ldp_dask.release_plan` —
the real planning, bounding, noise and post-processing, in process — under fresh keys. The adversary's view is the
released count of reports supporting "b", which grows with person 0's rows. A threshold event is chosen on half
the releases and bounded on the other half with Clopper–Pearson intervals at α = 10⁻³
(:func:`ldp_dask.audit._lower_bound`): the realised loss must not pass the charge, 2 (a false failure at most 10⁻³
when the claim holds).

The same audit of the per-row plan (no unit: each of person 0's 40 rows is a unit of its own, charged 2) must find
the person's loss above 2: its 40 reports move the count by about 40 × 0.3 against a noise sd of about 4, so an
event with 0 hits of 300 under D (upper bound 0.025) and about half under D' bounds the loss near 3 — the audit can
fail, and what bounding the person buys is visible. Measured here: the unit plan 0.0 (172 vs 136 of 300 hits), the
per-row plan 2.85 (158 vs 0).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import ldp_dask
from ldp_dask.audit import _lower_bound
from ldp_dask.plans import Plan

pytestmark = pytest.mark.slow

PLAN = Plan.from_dict({"statistic": [
    {"column": "x", "target": "mean", "domain": [0, 1], "name": "m"},
    {"column": "x", "target": "distribution", "domain": [0, 1], "bins": 4, "name": "d"},
    {"column": "c", "target": "frequencies", "categories": ["a", "b"], "name": "f"},
    {"column": "x", "target": "mean", "domain": [0, 1], "group_by": "g", "groups": ["p", "q"], "name": "gm"}]})
EPSILON, N = 2.0, 600


def _tables():
    rng = np.random.default_rng(0)
    others = pd.DataFrame({"id": np.arange(1, 41), "x": rng.uniform(0, 1, 40), "c": rng.choice(["a", "b"], 40),
                           "g": rng.choice(["p", "q", "r"], 40)})
    one = pd.DataFrame({"id": [0], "x": [0.0], "c": ["a"], "g": ["p"]})
    many = pd.DataFrame({"id": np.zeros(40, int), "x": np.ones(40), "c": ["b"] * 40,
                         "g": np.array(["p", "q", "r", None])[np.arange(40) % 4]})  # every group, "other" too
    return pd.concat([others, one], ignore_index=True), pd.concat([others, many], ignore_index=True)


def _views(table, unit):
    out = np.empty(N)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few rows for the cells: said once is enough
        for i in range(N):
            r = ldp_dask.release_plan(PLAN, table, EPSILON, seed=10_000 + i, ledger=False, client="local",
                                      design="split-epsilon", **({"privacy_unit": "id"} if unit else {}))
            f = r["f"].summary
            out[i] = float(f.channel.support_counts(f.sums["sum"])[1])
    return out


def test_a_persons_plan_costs_its_charge():
    d, d_prime = _tables()
    charged = ldp_dask.release_plan(PLAN, d_prime, EPSILON, privacy_unit="id", seed=1, ledger=False,
                                    client="local", design="split-epsilon").charged
    assert charged == pytest.approx(EPSILON)
    bound, _, hits = _lower_bound(_views(d_prime, True), _views(d, True), N, 1e-3)
    assert bound <= EPSILON, (bound, hits)


def test_without_the_unit_the_same_audit_finds_the_person_above_the_charge():
    d, d_prime = _tables()
    bound, _, hits = _lower_bound(_views(d_prime, False), _views(d, False), N, 1e-3)
    assert bound > EPSILON, (bound, hits)
