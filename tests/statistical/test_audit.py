"""The privacy auditor on the channels with an explicit output law (categorical, bounded means, Square Wave, and
the private groups' (group, value) channels in both noise modes, at their worst pair: the top of the domain in one
group against the bottom in another, 4 apart in L1 for group-mean); the other
Laplace channels are audited in both noise modes in tests/statistical/test_laws.py): a channel's audited ε lower bound stays ≤ its ε,
and a channel that really spends about 2ε is caught. Bounds are one-sided Clopper–Pearson bounds at confidence
1 − 10⁻³, so a correct channel fails "passed" with probability ≤ 10⁻³ for a random seed; the seeds
are fixed."""

from __future__ import annotations

import numpy as np
import pytest

from ldp_dask.audit import audit, audit_channel, miscalibrated, worst_pair
from ldp_dask.channels import (
    GroupHistogram,
    GroupMean,
    HadamardResponse,
    HybridMean,
    LaplaceHistogram,
    RandomizedResponse,
    SquareWave,
    SubsetSelection,
)

ALPHA = 1e-3
CHANNELS = {
    "rr-kary": lambda: RandomizedResponse(1.0, ["a", "b", "c", "d"]),
    "rr-unary": lambda: RandomizedResponse(1.0, [1, 2, 3, 4], encoding="unary"),
    "rr-oue": lambda: RandomizedResponse(1.0, [1, 2, 3, 4], encoding="oue"),
    "rr-warner": lambda: RandomizedResponse(1.0, ["no", "yes"], encoding="warner"),
    "hadamard": lambda: HadamardResponse(1.0, ["a", "b", "c", "d", "e"]),
    "subset": lambda: SubsetSelection(1.0, ["a", "b", "c", "d", "e", "f"], subset_size=2),
    "hybrid-mean": lambda: HybridMean(1.0, (0.0, 10.0)),
    "hybrid-mean-piecewise-continuous": lambda: HybridMean(1.0, (0.0, 10.0), "piecewise", "continuous"),
    "hybrid-mean-duchi": lambda: HybridMean(1.0, (-1.0, 1.0), "duchi"),
    "square-wave": lambda: SquareWave(1.0, (0.0, 10.0), cells=64),
    "group-mean": lambda: GroupMean(1.0, (0.0, 10.0), groups=3),
    "group-mean-continuous": lambda: GroupMean(1.0, (0.0, 10.0), groups=3, noise="continuous"),
    "group-histogram": lambda: GroupHistogram(1.0, groups=3, cells=4),
    "group-histogram-continuous": lambda: GroupHistogram(1.0, groups=3, cells=4, noise="continuous"),
}


@pytest.mark.parametrize("name", sorted(CHANNELS))
def test_every_channel_passes_its_audit(name):
    ch = CHANNELS[name]()
    r = audit_channel(ch, samples=200_000, rng=np.random.default_rng(1), alpha=ALPHA)
    assert r.passed and r.epsilon_lower <= ch.epsilon_spent(), r
    assert r.epsilon_lower > 0.4  # the audit is not vacuous: it certifies a good part of ε


@pytest.mark.parametrize("name", sorted(CHANNELS))
def test_miscalibrated_channels_are_caught(name):
    ch = miscalibrated(CHANNELS[name](), 2.0)
    r = audit_channel(ch, samples=200_000, rng=np.random.default_rng(2), alpha=ALPHA)
    assert not r.passed and r.epsilon_lower > 1.3, r  # realises ~2ε


def test_explicit_pair_and_worst_pair():
    ch = LaplaceHistogram(1.0, 4, (0.0, 1.0))
    x, xp = worst_pair(ch)
    assert int(x * 4) != int(min(xp, 0.999) * 4)  # different bins
    r = audit(ch, 0.1, 0.1, samples=20_000, rng=np.random.default_rng(3))  # same input: nothing to find
    assert r.epsilon_lower == 0.0
