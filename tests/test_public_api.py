import pickle

import numpy as np

import ldp_dask
from ldp_dask import LaplaceHistogram, LaplaceMean


def test_every_name_in_all_resolves():
    for name in ldp_dask.__all__:
        assert getattr(ldp_dask, name) is not None, name


def test_channels_and_summaries_pickle_by_value():
    ch = LaplaceHistogram(0.7, 12, (-1.0, 3.0))
    assert pickle.loads(pickle.dumps(ch)) == ch
    m = LaplaceMean(2.0, (0, 10))
    assert pickle.loads(pickle.dumps(m)) == m
    w = ldp_dask.WaveletLaplace(1.0, (0, 1), 2, 5, wavelet="sym4", calibration="paper", nu=2.0)
    blob = pickle.dumps(w)
    assert pickle.loads(blob) == w and len(blob) < 2000  # by parameters, not by table
    assert np.array_equal(pickle.loads(blob).scales, w.scales)
    s = ldp_dask.privatize(np.linspace(-1, 3, 1000), channel=ch, seed=1)
    back = pickle.loads(pickle.dumps(s))
    assert back.same_release(s) and back.metadata == s.metadata


def test_secret_never_in_repr():
    sec = ldp_dask.noise.resolve_secret(secret="a-very-secret-key-material-1234")
    assert "a-very-secret" not in repr(sec) and "a-very-secret" not in str(sec)
