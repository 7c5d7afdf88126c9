"""The ledger's composition of central guarantees (ldp_dask.ledger.central), against an exact computation.

An (ε, δ)-DP mechanism is dominated by the pair whose privacy loss is +ε with probability (1 − δ)e^ε/(1 + e^ε),
−ε with probability (1 − δ)/(1 + e^ε) and +∞ with probability δ (Kairouz, Oh and Viswanath 2015); the adaptive
composition of such mechanisms is dominated by the sum of independent losses, whose hockey-stick divergence
δ(ε) = P(L = ∞) + E[(1 − e^{ε − L})₊ ; L < ∞] is computed here exactly by enumerating the sums (a dictionary
convolution, no grid). The accountant's ε must be valid (exact δ at it ≤ the target) and close to the smallest
valid ε (within 2% + one grid step: its pessimistic rounding is the only loss). Deterministic: no randomness, no
false-failure rate.
"""

from __future__ import annotations

import json
import math

import pytest

from ldp_dask.ledger.central import LONGITUDINAL, compose, dataset_events, encode_events, report_delta


def _exact_delta(events, eps):
    losses = {0.0: 1.0}
    inf_mass = 0.0
    for e, d in events:
        up, down = (1 - d) * math.exp(e) / (1 + math.exp(e)), (1 - d) / (1 + math.exp(e))
        nxt: dict[float, float] = {}
        for loss, p in losses.items():
            for step, q in ((e, up), (-e, down)):
                key = round(loss + step, 12)
                nxt[key] = nxt.get(key, 0.0) + p * q
        inf_mass += (1 - inf_mass) * d
        losses = nxt
    return inf_mass + sum(p * (1 - math.exp(eps - loss)) for loss, p in losses.items() if loss > eps)


def _exact_epsilon(events, delta):
    lo, hi = 0.0, sum(e for e, _ in events)
    if _exact_delta(events, hi) > delta:
        return math.inf
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _exact_delta(events, mid) <= delta else (mid, hi)
    return hi


CASES = [
    [(0.3, 1e-9)],                                   # one release: stated at its own ε
    [(0.1, 1e-9)] * 10,                              # identical nightly summaries
    [(0.5, 0.0)] * 6,                                # pure ε (rows mode, central releases)
    [(0.02, 1e-9)] * 8 + [(1.0, 0.0)] * 2,           # amplified summaries beside two rows-mode releases
    [(0.3, 1e-8), (0.05, 1e-9), (0.7, 0.0), (0.01, 1e-10), (0.2, 1e-9)],
]


@pytest.mark.parametrize("events", CASES)
@pytest.mark.parametrize("delta", [1e-6, 1e-3])
def test_the_composed_epsilon_is_valid_and_close_to_the_exact_one(events, delta):
    got = compose(events, delta)
    exact = _exact_epsilon(events, delta)
    assert _exact_delta(events, got) <= delta * (1 + 1e-9)  # valid: never below the truth
    assert got <= exact * 1.02 + 1e-4  # and tight
    assert got <= sum(e for e, _ in events) + 1e-12  # never worse than adding the ε up


def test_negative_controls_fail_the_exact_check():
    """A composition that forgot a release, or counted the ε at half, states an ε the exact δ rejects."""
    events = [(0.1, 1e-9)] * 10
    assert _exact_delta(events, compose(events[:-1], 1e-6)) > 1e-6
    assert _exact_delta(events, compose([(e / 2, d) for e, d in events], 1e-6)) > 1e-6


def test_deltas_add_up_and_the_report_delta_follows_them():
    assert compose([(0.1, 4e-7)] * 3, 1e-6) == math.inf  # 1.2e-6 of sure failure is more than δ = 1e-6
    assert compose([], 1e-6) == 0.0
    assert report_delta([(0.1, 1e-9)] * 5) == 1e-6
    assert report_delta([(0.1, 1e-6)] * 5) == pytest.approx(5e-5)
    assert report_delta([(0.1, 1e-6)] * 5, declared=1e-3) == 1e-3


def _release(rid, epsilon, central=None, root="file:///d", parts=None, unit="row"):
    return {"id": rid, "root": root, "epsilon": epsilon, "privacy_unit": unit, "files": None, "key_id": "k",
            "parts": None if parts is None else json.dumps(parts), "central": central}


def test_which_releases_a_dataset_composes():
    amplified = encode_events([(0.01, 1e-9)])
    rows = [
        _release(1, 1.0, amplified),                         # a summary: its statement
        _release(2, 0.0, amplified),                         # a free re-run: nothing new
        _release(3, 2.0),                                    # no statement (rows mode, central): its charge, pure
        _release(4, 0.5, json.dumps(LONGITUDINAL)),          # two nights of a longitudinal series: one pure event
        _release(5, 0.25, json.dumps(LONGITUDINAL)),
        _release(6, 1.0, encode_events([(0.02, 1e-9), (0.03, 1e-9)])),  # a plan splitting ε: two mechanisms
        _release(7, 1.0, amplified, root="file:///elsewhere"),           # another dataset
        # a privacy-unit release over files: each file released anew is one more copy (a person may be in all)
        _release(8, 1.0, amplified, parts=[{"root": "file:///d/a", "epsilon": 1.0},
                                           {"root": "file:///d/b", "epsilon": 1.0},
                                           {"root": "file:///d/c", "epsilon": 0.0}], unit="user"),
    ]
    got = sorted(dataset_events(rows, "file:///d"))
    assert got == sorted([(0.01, 1e-9), (2.0, 0.0), (0.75, 0.0), (0.02, 1e-9), (0.03, 1e-9), (0.01, 1e-9),
                          (0.01, 1e-9)])
    # per row, a release over files is one mechanism: a row lies in one file
    rows[-1]["privacy_unit"] = "row"
    assert len(dataset_events(rows, "file:///d")) == 6
    # a file of the dataset sees the releases of the whole dataset and its own
    assert (0.01, 1e-9) in dataset_events(rows, "file:///d/a") and len(dataset_events(rows, "file:///d/b")) == 6


@pytest.mark.slow  # a coverage/law check of seconds: in make test, not test-fast
@pytest.mark.parametrize("eps,delta_each,k", [(0.0023, 1e-9, 365), (0.05, 1e-9, 400), (1.0, 0.0, 40)])
def test_copies_of_one_mechanism_agree_with_the_accountant(eps, delta_each, k):
    """Copies of one mechanism are composed exactly (a binomial), not by the accountant: dp_accounting's own
    self-composition (pessimistic, on a grid of at most 10⁻⁵) is never below it beyond the bisection's 10⁻¹⁰, and
    above it by at most one grid step per copy."""
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld

    grid = min(1e-5, eps / 100)
    one = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, delta_each),
                                      value_discretization_interval=grid)
    theirs = one.self_compose(k).get_epsilon_for_delta(1e-6)
    ours = compose([(eps, delta_each)] * k, 1e-6)
    assert ours <= theirs * (1 + 1e-8) and theirs <= ours + k * grid


def _kinds(events):
    from collections import Counter

    return Counter(events)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_several_kinds_compose_validly_within_the_grid_step(seed):
    """Random histories of 2–4 kinds of mechanism (1–9 copies each, ε in [0.01, 1.5], δ 0 or up to 10⁻⁸): the
    composed ε is valid against the exact enumeration, and above the exact ε by at most the number of kinds × the
    grid step (the accountant's only rounding: each kind's losses rounded up once)."""
    import numpy as np

    from ldp_dask.ledger.accountant import grid_distribution

    rng = np.random.default_rng(seed)
    # ε in thousandths: four significant digits at most, so compose's grouping (rounded up to four) keeps them
    kinds = {(int(rng.integers(10, 1501)) / 1000, float(rng.choice([0.0, 1e-10, 1e-9, 1e-8]))):
             int(rng.integers(1, 10)) for _ in range(int(rng.integers(2, 5)))}
    events = [ev for ev, c in kinds.items() for _ in range(c)]
    for delta in (1e-6, 1e-3):
        got = compose(events, delta)
        exact = _exact_epsilon(events, delta)
        step = grid_distribution(kinds)[2]
        assert _exact_delta(events, got) <= delta * (1 + 1e-9), (kinds, delta, got, exact)
        assert got <= exact + len(kinds) * step + 1e-9, (kinds, delta, got, exact, step)


def test_a_long_history_of_two_kinds_is_valid_and_tight():
    """A dataset of a 10^5-release ledger's size (1,666 copies of ε 0.1 and 1,667 of (0.05, 10⁻¹²)): the composed ε
    holds under the exact hockey-stick divergence of the two binomials (2.8·10^6 sums, no grid), and ε less two
    grid steps does not; the composition that drops ten copies of each kind states an ε the exact δ rejects."""
    import numpy as np
    from scipy.stats import binom

    from ldp_dask.ledger.accountant import grid_distribution

    kinds = {(0.1, 0.0): 1666, (0.05, 1e-12): 1667}

    def exact_delta(eps):
        parts = []
        for (e, d), c in kinds.items():
            b = np.arange(c + 1)
            parts.append((e * (2.0 * b - c), binom.pmf(b, c, 1 / (1 + math.exp(-e))) * (1 - d) ** c))
        (l1, p1), (l2, p2) = parts
        loss = l1[:, None] + l2[None, :]
        mass = p1[:, None] * p2[None, :]
        above = loss > eps
        sure = 1 - math.prod((1 - d) ** c for (_, d), c in kinds.items())
        return sure + float(np.sum(mass[above] * -np.expm1(eps - loss[above])))

    delta = 1e-6
    got = compose(kinds, delta)
    step = grid_distribution(kinds)[2]
    assert exact_delta(got) <= delta * (1 + 1e-9)
    assert exact_delta(got - 2 * step) > delta  # tight: within the two kinds' grid steps
    # one copy fewer moves ε by less than the grid's rounding (about 0.016 here); ten fewer of each, by more
    fewer = compose({(0.1, 0.0): 1656, (0.05, 1e-12): 1657}, delta)
    assert exact_delta(fewer) > delta


def test_the_epsilon_search_agrees_with_dp_accounting_on_the_same_distribution():
    """The closed-form search for ε on the grid distribution against Google's dp-accounting, given that very
    distribution (its rounded probability mass function): equal to 10⁻⁹ relative, at three δ."""
    import numpy as np
    from dp_accounting.pld import privacy_loss_distribution as pld

    from ldp_dask.ledger.accountant import epsilon_for_delta, grid_distribution

    for kinds in ({(0.3, 1e-9): 4, (0.05, 0.0): 30, (1.2, 0.0): 2}, {(0.1, 0.0): 800, (0.02, 1e-10): 900}):
        pmf, base, step, infinity = grid_distribution(kinds)
        nz = np.flatnonzero(pmf)
        theirs = pld.PrivacyLossDistribution.create_from_rounded_probability(
            dict(zip((nz + base).tolist(), pmf[nz].tolist())), infinity, step)
        for delta in (1e-9, 1e-6, 1e-3):
            ours = epsilon_for_delta(pmf, base, step, infinity, delta)
            assert ours == pytest.approx(theirs.get_epsilon_for_delta(delta), rel=1e-9, abs=1e-12), (kinds, delta)
