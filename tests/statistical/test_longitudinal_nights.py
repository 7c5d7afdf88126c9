"""The instantaneous layer is drawn afresh every night: a quiet night does not repeat the last one bit for bit.

An outside audit's case: 5 persons, k-ary frequencies with the instantaneous layer (instant = 0.5, so ε_bits = 0.5),
two nights, and the adversary's event {the second night's sums equal the first's}. History A: nobody changes;
history B: one person changes category on the second night. Both histories are two nights of ε_bits each against
any other history, so the ledger charges that person min(D·ε_memo, N·ε_bits) = 1.0 (ε_memo = 2), and the realised
privacy loss of every event must stay under it.

Each trial is a fresh key (the layer's and the memoized reports' randomness are keyed), run through the worker's
own handler (:class:`~ldp_dask.tasks.MemoRelease`) under the buckets' keys of each night
(:func:`ldp_dask.longitudinal.night_keys`, what :func:`ldp_dask.pipeline.run_memoized` uses), and the charge comes
from the ledger's own functions on the digest pairs the handler returns. The loss is bounded from below by
Clopper–Pearson intervals (:func:`ldp_dask.audit.event_loss_lower_bound`), both directions, each one-sided at
2.5·10⁻⁴ (a false failure at most 10⁻³ when the
claim holds). The same measurement under the keying the layer had before (the night left out of the keys, so a
quiet night redraws the same layer) must contradict the charge: P(repeat) is then 1 against about 0.03.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldp_dask.audit import event_loss_lower_bound
from ldp_dask.channels import MemoFrequencies
from ldp_dask.ledger.memos import merge, spend_of
from ldp_dask.longitudinal import memo_key, night_keys
from ldp_dask.noise import partition_base_keys, resolve_secret
from ldp_dask.tasks import MemoRelease

pytestmark = pytest.mark.slow  # 14,000 runs of the handler: 15 s

CHANNEL = MemoFrequencies(2.0, ["a", "b", "c", "d"], encoding="kary", instant=0.5)
PERSONS = np.arange(5, dtype=np.uint64)
NIGHTS = ("2026-01-01", "2026-01-02")
QUIET = (np.array(list("abcda"), dtype=object), np.array(list("abcda"), dtype=object))
CHANGE = (np.array(list("abcda"), dtype=object), np.array(list("bbcda"), dtype=object))
CONTEXT = {"v": 1, "audit": "quiet night"}
ALPHA = 2.5e-4


def _old_keys(secret, context, night, count):
    """The layer's keys before the night named them: the same every night of one table."""
    return partition_base_keys(secret, context, count)


def _repeats(history, keys, trials, offset):
    """How many of ``trials`` keys make the second night's sums equal the first's, and the series' charge."""
    repeats, charge = 0, None
    for t in range(trials):
        secret = resolve_secret(seed=offset + t)
        handler = MemoRelease(CHANNEL, memo_key(secret, CONTEXT), False)
        sums, state = [], None
        for night, x in zip(NIGHTS, history):
            out = handler((x, PERSONS), "bucket", 0, keys(secret, CONTEXT, night, 1)[0])
            assert isinstance(out, dict), out
            sums.append(out["stats"]["sum"])
            state = merge(state, out["pairs"])
        repeats += np.array_equal(sums[0], sums[1])
        if charge is None:  # the same for every key: the series' largest spend, what the ledger records
            charge = float(spend_of(state, CHANNEL.epsilon_spent(), CHANNEL.epsilon_bits()).max())
    return repeats, charge


def test_a_quiet_night_is_no_repeat_and_its_loss_is_within_the_charge():
    trials = 6000
    k_quiet, charge_quiet = _repeats(QUIET, night_keys, trials, 0)
    k_change, charge_change = _repeats(CHANGE, night_keys, trials, 10**6)
    assert charge_quiet == charge_change == 1.0  # min(D·2, 2 nights · 0.5)
    assert k_quiet < trials  # a quiet night is not a bit-identical repeat
    bound = event_loss_lower_bound(k_quiet, k_change, trials, ALPHA)
    assert bound <= min(charge_quiet, charge_change), (k_quiet, k_change, bound)


def test_the_old_keying_fails_the_same_audit():
    trials = 1000
    k_quiet, charge = _repeats(QUIET, _old_keys, trials, 0)
    k_change, _ = _repeats(CHANGE, _old_keys, trials, 10**6)
    assert k_quiet == trials  # every quiet night repeated the last one bit for bit
    assert event_loss_lower_bound(k_quiet, k_change, trials, ALPHA) > charge  # about ln(1/0.04) ≈ 3.2 against 1.0
