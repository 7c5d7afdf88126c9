"""The use cases behind the command line and the flows, written once.

A face parses its input into these calls and presents what comes back: the
command line (:mod:`ldp_dask.cli`) prints it, a flow (``flows/``) logs it and
publishes artifacts. Both build their :class:`~ldp_dask.options.RunOptions`
from the same declarations, so a release asked for in either is the same
release. What a releasing command does, in order::

    plan the source (metadata only) ─► choose the channel from n ─► warnings ─► release ─► result + receipt

:func:`plan_column` and :func:`release_column` are the two halves of
``privatize`` (a flow runs them as two tasks: planning retries on I/O errors,
the release does not). The goodness-of-fit
test, the central quantiles and the central bounds are one call each
(:func:`ldp_dask.gof.run`, :func:`ldp_dask.central.quantiles`,
:func:`ldp_dask.central.bounds`), which both faces call directly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._validation import LdpDaskError
from .channels import AUTO, Channel, build_channel, memoized, value_kind_of
from .options import RunOptions
from .partitions import follows_n, params_following_n
from .pipeline import nulls_as_other, privatize
from .release import plan
from .source import Dataset, typed_categories
from .summary import Summary

__all__ = ["ChannelRequest", "plan_column", "release_column"]


@dataclass(frozen=True)
class ChannelRequest:
    """A channel as a face asks for it: a name (or ``"auto"``), ε, the public domain and the channel's options
    (``bins``, ``wavelet``, ``categories``, ...); built for the planned n by :meth:`build`."""

    name: str
    epsilon: float
    domain: tuple[float, float] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    mode: str = "summary"

    @property
    def value_kind(self) -> str:
        """``"numeric"`` or ``"categorical"``: what the column must hold."""
        return value_kind_of(self.name, self.options.get("categories"))

    def build(self, n: int) -> Channel:
        """The channel for a release of ``n`` rows (``auto`` and default parameters follow n)."""
        extra = {"mode": self.mode} if self.name == AUTO else {}
        return build_channel(self.name, self.epsilon, self.domain, n=n, **dict(self.options), **extra)


def plan_column(source: Any, column: str, request: ChannelRequest,
                options: RunOptions) -> tuple[Dataset, Channel, ChannelRequest]:
    """Plan ``source`` (metadata only) and build the channel for its n: the dataset, the channel, and the
    request with its categories typed as the column."""
    if request.value_kind == "categorical":
        options = nulls_as_other(options, request.options.get("categories"), bool(request.options.get("other")))
    dataset = plan(source, column, request.value_kind, options)
    if "categories" in request.options:
        typed = typed_categories(list(request.options["categories"]), dataset)
        request = ChannelRequest(request.name, request.epsilon, request.domain,
                                 {**request.options, "categories": typed}, request.mode)
    changed = params_following_n(request.build, dataset.n) if dataset.unit is not None else []
    if changed:
        raise LdpDaskError(
            f"with a privacy unit, {', '.join(changed)} cannot be chosen from the number of rows: it is not "
            "public when ε counts per person (one person's rows move it), and a parameter chosen from it "
            f"would publish it. Give {', '.join(changed)} explicitly (e.g. --bins 32, or a named --channel)")
    return dataset, request.build(dataset.n), request


def predict_units(dataset: Dataset, channel: Channel, options: RunOptions) -> float:
    """Before a release with a privacy unit spends anything: count the persons (a sketch, one pass over the unit
    column), predict the estimate's standard error from k reports each at ε/k, and warn when it would be mostly
    noise (:func:`ldp_dask.predict.unit_warning`). Returns the persons counted."""
    from .persons import estimate_persons
    from .policy import warn
    from .predict import unit_warning

    persons = estimate_persons(dataset, options)
    message = unit_warning(channel, persons, options.max_contributions)
    if message:
        warn(message)
    return persons


def release_column(dataset: Dataset, channel: Channel, request: ChannelRequest, options: RunOptions, *,
                   out: str | os.PathLike[str] | None = None, rows_out: str | os.PathLike[str] | None = None,
                   overwrite: bool = False, incremental: bool = False, since: Any = None,
                   window: str | None = None, skip_changed: bool = False,
                   longitudinal: dict[str, Any] | None = None) -> Summary:
    """Release a planned column through the one release path; a series of partitioned releases is warned about
    when the channel's parameters follow n (:func:`ldp_dask.partitions.follows_n`). ``longitudinal`` (the
    memoized channel's ``instant`` and ``levels``) makes it a longitudinal release. The summary carries its
    receipt and the outputs written."""
    if incremental or since is not None or window is not None:
        follows_n(request.build, dataset.n)
    if longitudinal is not None:
        channel = memoized(channel, **longitudinal)
    if dataset.unit is not None:
        predict_units(dataset, channel, options)
    return privatize(dataset, column=dataset.column, channel=channel, mode=request.mode, out=out,
                     rows_path=rows_out, overwrite=overwrite, options=options, incremental=incremental,
                     since=since, window=window, skip_changed=skip_changed)
