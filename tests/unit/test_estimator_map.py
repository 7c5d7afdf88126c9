"""Which estimator serves which channel is stated once (ldp_dask.estimators): the table agrees with what the
estimators accept, channel by channel."""

from __future__ import annotations

import numpy as np
import pytest

import ldp_dask
from ldp_dask import LdpDaskError
from ldp_dask.channels import CHANNELS, build_channel
from ldp_dask.estimators import ESTIMATORS, estimate, estimator_for, has_local_quantiles, local_quantiles


def _summary(name: str) -> ldp_dask.Summary:
    rng = np.random.default_rng(3)
    if name in ("sketch", "heavy-hitters"):  # no category list: any value
        return ldp_dask.privatize(np.array(["a", "b", "c"] * 700, dtype=object), channel=build_channel(name, 1.0),
                                  seed=1)
    if CHANNELS[name].value_kind == "categorical":
        ch = build_channel(name, 1.0, categories=["a", "b", "c"], n=2000)
        return ldp_dask.privatize(np.array(["a", "b", "c"] * 700, dtype=object), channel=ch, seed=1)
    ch = build_channel(name, 1.0, (0.0, 1.0), n=2000)
    return ldp_dask.privatize(rng.beta(2, 5, 2000), channel=ch, seed=1)


@pytest.mark.parametrize("name", sorted(CHANNELS))
def test_the_estimator_table_matches_what_the_estimators_accept(name):
    s = _summary(name)
    if estimator_for(name) is None:
        with pytest.raises(LdpDaskError, match="no estimate of their own"):
            estimate(s)
    else:
        assert ESTIMATORS[name] is estimator_for(s.channel)
        estimate(s, **({"candidates": ["a", "z"]} if name == "sketch" else {}))  # a sketch is asked about values
    if has_local_quantiles(name):
        assert local_quantiles(s, B=20, rng=1).values.shape == (9,)
    else:
        with pytest.raises(LdpDaskError):
            local_quantiles(s, B=20, rng=1)
