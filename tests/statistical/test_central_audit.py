"""An empirical audit of the central guarantee a summary states (ldp_dask.audit.audit_summary).

Two neighbouring tables of n rows (one row differs) are released 200,000 times each by the release path's own
summary step, under fresh random keys; a threshold event on the published sums, chosen on half the samples, bounds
the realised ε from below on the other half (Clopper–Pearson at α = 10⁻³, the stated δ subtracted). A correct
statement is contradicted with probability at most α = 10⁻³ per case: that is the false-failure rate of the
"no violation" checks.

The same audit must contradict a wrong statement — the one computed for 20 times the rows — or it could not
catch anything. Over seeds 1, 2, 3 and 7 the lattice histogram's bound ranged 0.94–1.07 against the wrong 0.63
(stated 2.04); over seeds 1, 2, 3, 4 and 7 randomized response's ranged 2.23–2.33 against the wrong 1.12 (stated
3.0). Deterministic under the fixed seed (7).
"""

from __future__ import annotations

import numpy as np
import pytest

import ldp_dask
from ldp_dask.amplification import central_statement
from ldp_dask.audit import audit_summary

CASES = [
    # the summed discrete Laplace noise: ε₀ = 3 among 10 rows states ε 2.04 at δ 10⁻⁹
    (ldp_dask.LaplaceHistogram(3.0, 2, (0, 1)), 10, 0.25, 0.75, 0.25),
    # shuffling: ε₀ = 3 among 100 rows, every other row on the same value as the audited one (the worst case of
    # the clones argument: "nobody reported the other value" is an event of probability 10⁻³ that one row moves)
    (ldp_dask.RandomizedResponse(3.0, ["a", "b"]), 100, "a", "b", "a"),
]


@pytest.mark.slow
@pytest.mark.parametrize("channel,n,x,x_prime,others", CASES, ids=["noise-sum", "shuffle"])
def test_an_audit_finds_no_violation_of_the_stated_central_guarantee(channel, n, x, x_prime, others):
    r = audit_summary(channel, n, x, x_prime, others, samples=200_000, rng=np.random.default_rng(7), alpha=1e-3)
    stated = central_statement(channel, n)
    assert r.epsilon_nominal == stated["epsilon"] < channel.epsilon_spent() * 1.0001
    assert r.passed, f"audit bound {r.epsilon_lower:.3f} > stated ε {stated['epsilon']:.3f} (hits {r.hits})"
    # the negative control: the statement for 20 × the rows is contradicted by the same samples' bound
    wrong = central_statement(channel, 20 * n)["epsilon"]
    assert r.epsilon_lower > wrong, f"audit bound {r.epsilon_lower:.3f} does not reach the wrong ε {wrong:.3f}"
