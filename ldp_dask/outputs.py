"""Writing results: JSON, PNG plots and the figures behind them.

Every result object (estimates, tests, quantile releases) writes through these
helpers, atomically (:func:`ldp_dask._io.atomic_write`), so a failed write leaves
nothing at the target path. Plots use matplotlib's headless Agg backend.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import numpy as np

from ._io import atomic_write

__all__ = ["jsonable", "json_bytes", "save_json", "new_axes", "figure_png", "finish_plot", "write_result_files"]


def jsonable(v: Any) -> Any:
    """``v`` with numpy arrays and scalars turned into lists and Python numbers (for JSON)."""
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return v


def new_axes(ax: Any, figsize: tuple[float, float]) -> tuple[Any, bool]:
    """The Axes to draw on: ``ax``, or a new figure (headless Agg backend); and whether it is ours."""
    if ax is not None:
        return ax, False
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=figsize, dpi=110)[1], True


def figure_png(ax: Any, dpi: int | None = None, close: bool = True) -> bytes:
    """The Axes' figure as PNG bytes (files, artifacts, HTML pages); closes the figure when ``close``."""
    buf = io.BytesIO()
    ax.figure.tight_layout()
    ax.figure.savefig(buf, format="png", dpi=dpi or "figure")
    if close:
        import matplotlib.pyplot as plt

        plt.close(ax.figure)
    return buf.getvalue()


def finish_plot(ax: Any, path: str | os.PathLike[str] | None, own: bool, overwrite: bool) -> Any:
    """Write the figure as a PNG atomically when ``path`` is given; close figures we created."""
    if path is not None:
        png = figure_png(ax, close=own)
        atomic_write(path, lambda fh: fh.write(png), overwrite=overwrite)
    return ax


def json_bytes(obj: dict[str, Any]) -> bytes:
    """``obj`` as indented JSON (numpy values converted)."""
    return json.dumps(jsonable(obj), indent=2, sort_keys=True).encode()


def save_json(obj: dict[str, Any], path: str | os.PathLike[str], overwrite: bool) -> str:
    """Write ``obj`` as indented JSON (numpy values converted), atomically."""
    blob = json_bytes(obj)
    return atomic_write(path, lambda fh: fh.write(blob), overwrite=overwrite)


def write_result_files(result: Any, outputs: Any) -> None:
    """Stage a result's files among ``outputs`` (:class:`ldp_dask._io.StagedOutputs`): the ``json``
    output gets :meth:`to_dict`, the ``plot`` output the PNG of :meth:`plot` (results that draw one)."""
    if "json" in outputs:
        outputs.write("json", json_bytes(result.to_dict()))
    if "plot" in outputs and hasattr(result, "plot"):
        outputs.write("plot", figure_png(result.plot()))
