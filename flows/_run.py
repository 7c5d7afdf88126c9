"""The run options as flow parameters, generated from their declarations (:func:`ldp_dask.options.faces`).

:func:`with_run_options` gives a flow one keyword parameter per run option a
flow takes (``scheduler``, ``seed``, ``secret_file``, ``clip``, ``ledger``,
``privacy_unit``, ...), typed for Prefect's parameter form; the flow receives
them in ``**run`` and turns them into a :class:`~ldp_dask.options.RunOptions`
with :func:`run_options`. A run option declared tomorrow is a parameter of every
releasing flow at once (tests/integration/test_faces.py checks each face).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ldp_dask.options import (
    DEFAULT_CENTRAL_DELTA,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IN_PROCESS_ROWS,
    DEFAULT_RETRIES,
    DEFAULT_SPLIT_EVERY,
    RunOptions,
    faces,
)

__all__ = ["with_run_options", "run_options", "logged_warnings", "FLOW_PARAMETERS"]

F = TypeVar("F", bound=Callable[..., Any])

#: Each run option's flow parameters with their type and default (the flow face's part; the meaning is declared
#: with the option). ``ledger``: a path or URL, True for the default ledger, False for none.
FLOW_PARAMETERS: dict[str, tuple[Any, Any]] = {
    "scheduler": (str | None, None),
    "seed": (int | None, None),
    "secret_file": (str | None, None),
    "clip": (bool, False),
    "partition_rows": (int | None, None),
    "storage_options": (dict[str, Any] | None, None),
    "split_every": (int, DEFAULT_SPLIT_EVERY),
    "retries": (int, DEFAULT_RETRIES),
    "ledger": (str | bool, True),
    "privacy_unit": (str | None, None),
    "max_contributions": (int, 1),
    "unit_nulls": (str, "error"),
    "allow_large_epsilon": (bool, False),
    "in_process_rows": (int, DEFAULT_IN_PROCESS_ROWS),
    "connect_timeout": (float, DEFAULT_CONNECT_TIMEOUT),
    "nulls": (float | str | None, None),
    "central_delta": (float, DEFAULT_CENTRAL_DELTA),
    "night": (str | None, None),
}


def _names() -> list[str]:
    return [name for face in faces().values() for name in face.flow]


def with_run_options(fn: F) -> F:
    """Add every run option's flow parameters to ``fn``'s signature (keyword-only, after its own); ``fn`` takes
    them in ``**run``."""
    sig = inspect.signature(fn)
    own = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    clash = sorted({p.name for p in own} & set(_names()))
    if clash or len(own) == len(sig.parameters):  # pragma: no cover - a flow author's mistake
        raise TypeError(f"{fn.__name__} must take **run and not declare run options itself ({clash})")
    run = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=FLOW_PARAMETERS[name][1],
                             annotation=FLOW_PARAMETERS[name][0]) for name in _names()]
    fn.__signature__ = sig.replace(parameters=[*own, *run])  # type: ignore[attr-defined]
    fn.__doc__ = (fn.__doc__ or "") + _RUN_DOC
    return fn


def run_options(run: dict[str, Any], flow_run_id: str | None = None) -> RunOptions:
    """The :class:`RunOptions` of a flow's run parameters (missing ones take their defaults)."""
    values = {name: run.get(name, FLOW_PARAMETERS[name][1]) for name in _names()}
    values["client"] = values.pop("scheduler")
    return RunOptions.of(flow_run_id=flow_run_id, **values)


@contextmanager
def logged_warnings(logger: Any) -> Iterator[None]:
    """The library's warnings (:class:`~ldp_dask.policy.LdpDaskWarning`) raised inside the block, as warning lines
    of the run's log (where the Prefect UI shows them); others pass on."""
    from ldp_dask.policy import LdpDaskWarning

    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", LdpDaskWarning)
            yield
    finally:  # outside the recording block: a warning passed on inside it would be recorded again, endlessly
        for w in seen:
            if issubclass(w.category, LdpDaskWarning):
                logger.warning("%s", w.message)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


_RUN_DOC = "\n\n    Run options (every releasing flow takes them):\n\n" + "\n".join(
    f"    * ``{', '.join(face.flow)}``: {face.help}" for face in faces().values() if face.flow) + "\n"
