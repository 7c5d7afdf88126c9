"""The budget rules' one tolerance: a spend passes its budget only beyond its rounding, and a budget spent to within
that rounding is shown as spent (no '1.6e-09 remaining'), in the receipt as in the rules."""

from __future__ import annotations

from ldp_dask.ledger.budget import BUDGET_RTOL, nights_left, over_budget, remaining
from ldp_dask.receipts import Receipt


def test_a_budget_spent_to_its_rounding_is_spent():
    # the audit's case: split ε nudged below nominal, a budget of 1 "remaining 1.60134e-09"
    assert remaining(1.0, 1.0 - 1.60134e-9) == 0.0 and not over_budget(1.0 - 1.60134e-9, 1.0)
    assert remaining(3.0, 2.0) == 1.0 and remaining(1.0, 1.5) == 0.0
    assert over_budget(1.0 + 10 * BUDGET_RTOL, 1.0) and not over_budget(1.0 + BUDGET_RTOL / 2, 1.0)
    assert nights_left(remaining(3.0, 1.0), 1.0) == 2 and nights_left(0.999999999, 1.0) == 1


def test_the_receipt_says_remaining_0_and_three_digits():
    common = dict(ledger="/l.sqlite", scope="local", reused=False, limit=1.0, key_id="k", key_source="seed",
                  dataset="d")
    r = Receipt(epsilon=0.5, total=1.0 - 1.60134e-9, **common)
    assert r.remaining == 0.0 and "remaining 0" in r.line() and "e-09" not in r.line()
    r = Receipt(epsilon=0.5, total=1.0 / 3.0, **common)
    assert "remaining 0.667" in r.line()
