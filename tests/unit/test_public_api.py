import pickle

import numpy as np

import ldp_dask
from ldp_dask import LaplaceHistogram, LaplaceMean


def test_every_name_in_all_resolves():
    """``__all__`` of the package and of its public modules names things that exist, once each."""
    import importlib

    for mod in ("ldp_dask", "ldp_dask.channels", "ldp_dask.estimators", "ldp_dask.gof", "ldp_dask.central",
                "ldp_dask.release", "ldp_dask.options", "ldp_dask.outputs", "ldp_dask.pipeline", "ldp_dask.noise",
                "ldp_dask.ledger", "ldp_dask.summary", "ldp_dask.audit"):
        m = importlib.import_module(mod)
        assert len(set(m.__all__)) == len(m.__all__), mod
        missing = [name for name in m.__all__ if not hasattr(m, name)]
        assert missing == [], (mod, missing)


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


def test_run_options_as_keywords_match_runoptions_and_every_releasing_function_takes_them():
    """``RunKwargs`` (what an editor completes after ``privatize(..., ``) names every field of ``RunOptions`` with
    the same type, plus the public spelling of the unit; each releasing function's ``**run`` is typed with it."""
    import dataclasses
    import inspect

    from ldp_dask import central, gof
    from ldp_dask.options import UNIT_SPELLING, RunKwargs, RunOptions

    fields = {f.name: f.type for f in dataclasses.fields(RunOptions)}
    assert set(RunKwargs.__annotations__) == set(fields) | set(UNIT_SPELLING)
    for name, hint in fields.items():  # the annotations as written (TypedDict keeps them as forward references)
        written = RunKwargs.__annotations__[name]
        assert getattr(written, "__forward_arg__", written) == hint, name
    for fn in (ldp_dask.privatize, ldp_dask.release_plan, gof.run, central.quantiles, central.bounds):
        var = [p for p in inspect.signature(fn).parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
        assert len(var) == 1 and var[0].annotation == "Unpack[RunKwargs]", fn.__qualname__
