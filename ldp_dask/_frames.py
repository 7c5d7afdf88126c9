"""Tagged rows as a DataFrame for Dask's own shuffle, and back (:func:`ldp_dask.engine.shuffle` above
:data:`~ldp_dask.engine.SHUFFLE_DIRECT_ROWS` rows): a structured column (a plan's several values a row) travels as
one frame column per field."""

from __future__ import annotations

from typing import Any

__all__ = ["as_frame", "from_frame"]


def as_frame(parts: Any) -> Any:
    """A map result (``groups`` dicts of arrays) as one DataFrame with a ``group`` column."""
    import numpy as np
    import pandas as pd

    columns = list(parts[0])
    frame = {}
    for c in columns:
        whole = np.concatenate([p[c] for p in parts])
        if whole.dtype.names:  # a structured column (several values a row): one frame column per field
            frame.update({f"{c}{_FIELD}{name}": whole[name] for name in whole.dtype.names})
        else:
            frame[c] = whole
    frame["group"] = np.repeat(np.arange(len(parts)), [len(p[columns[0]]) for p in parts])
    return pd.DataFrame(frame)


#: how :func:`as_frame` names the frame columns of a structured column's fields (``value::f0``)
_FIELD = "::"


def from_frame(frame: Any) -> dict[str, Any]:
    """:func:`as_frame`'s columns back as arrays, a structured column's fields joined into one again."""
    import numpy as np

    out: dict[str, Any] = {}
    fields: dict[str, list[str]] = {}
    for c in frame.columns:
        if c == "group":
            continue
        if _FIELD in c:
            fields.setdefault(c.split(_FIELD)[0], []).append(c)
        else:
            out[c] = frame[c].to_numpy()
    for c, names in fields.items():
        cols = [frame[n].to_numpy() for n in names]
        rec = np.empty(len(frame), dtype=[(n.split(_FIELD, 1)[1], a.dtype) for n, a in zip(names, cols)])
        for n, a in zip(names, cols):
            rec[n.split(_FIELD, 1)[1]] = a
        out[c] = rec
    return out
