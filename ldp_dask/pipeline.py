"""privatize: plan a source, choose the path, run it on the engine and build the :class:`Summary`.

The pipeline knows nothing of statistics and nothing of where tasks run: a
release per row runs :func:`ldp_dask.tasks.noisy_sums` on every task, a
release by privacy unit shuffles persons into buckets
(:func:`ldp_dask.engine.shuffle`, :mod:`ldp_dask.units`), a partitioned
release keeps every file's sums apart (:mod:`ldp_dask.partitions`); all of
them through :func:`ldp_dask.engine.run` and the one release path
(:func:`ldp_dask.release.release`). See :mod:`ldp_dask.tasks` for what a task
does on a worker.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Unpack

from . import exactsum
from ._validation import InputDataError, LdpDaskError
from .amplification import central_event
from .channels import Channel, Memoized, memoized
from .channels.categorical import OTHER
from .clusters import connect
from .engine import run, task_rows, tasks_of
from .ledger import BudgetExceeded
from .locations import read_identities
from .longitudinal import (
    capped_series,
    check_longitudinal,
    longitudinal_metadata,
    memo_key,
    memo_update,
    night_keys,
    series_context,
    series_id,
    series_root,
    with_night,
)
from .noise import TAG_MODULUS, Secret, keyed_digest, named_base_keys, partition_base_keys
from .options import RunKwargs, RunOptions
from .persons import map_units
from .policy import warn_cells
from .privacy import ROW_UNIT, epsilon_per_unit, per_row_channel
from .release import Charge, Outputs, Released, plan, release
from .source import Dataset
from .summary import Summary, summary_of, summary_writer
from .tasks import (
    ByFile,
    ChannelJob,
    MemoRelease,
    combine_files,
    combine_memos,
    combine_sums,
    file_sums,
    noisy_sums,
    release_values,
)

__all__ = ["privatize", "run_channel", "local_charge", "connect", "MODES", "nulls_as_other"]

MODES = ("summary", "rows")


def run_channel(dataset: Dataset, channel: Channel, mode: str, secret: Secret, options: RunOptions,
                rows: tuple[Any, str] | None = None, rows_path: str | None = None) -> Summary:
    """The map/reduce of one channel over a planned dataset: partitions → noisy sums → one :class:`Summary`.

    No ledger, no output file: callers go through :func:`ldp_dask.release.release`
    (e.g. :func:`privatize`). ``rows`` is ``(fs, directory)`` where rows mode
    writes one Parquet file per partition; ``rows_path`` is where that
    directory will be published (recorded in the metadata).
    """
    context = {
        "v": 1, "fingerprint": dataset.fingerprint, "column": dataset.column,
        "channel": channel.name, "params": channel.params(), "mode": mode,
    }
    rows_fs, rows_dir = rows if rows is not None else (None, None)
    choice = getattr(channel, "choice", None)
    k = options.max_contributions
    if dataset.unit is not None:
        channel = per_row_channel(channel, k)
        context = {**context, "unit": dataset.unit, "k": k}
        keys = partition_base_keys(secret, context, len(dataset.tasks))
        handler = _ReleaseBucket(ChannelJob(dataset.reader, (), (), channel, options.clip, mode, rows_dir, rows_fs))
        acc = map_units(dataset, secret, context, handler, combine_sums, options, keys=keys,
                        categorical=channel.value_kind == "categorical")
    else:
        tasks = tasks_of(dataset)
        task_keys = tuple(partition_base_keys(secret, context, len(tasks)))
        job = ChannelJob(dataset.reader, dataset.pieces, task_keys, channel, options.clip, mode, rows_dir, rows_fs)
        acc = run(tasks, noisy_sums, job, combine_sums, options, rows=[task_rows(dataset.pieces, t) for t in tasks],
                  in_process=dataset.kind == "memory")
    if dataset.unit is None and acc["n"] != dataset.n:  # pragma: no cover - a planning bug, not user input
        raise RuntimeError(f"processed {acc['n']} rows, planned {dataset.n}")
    metadata = release_metadata(dataset, secret, mode, options, rows_path)
    if choice:  # chosen by --channel auto: what was compared, kept with the release
        metadata["choice"] = choice
    metadata.update(privacy_unit=dataset.unit or ROW_UNIT, max_contributions=k,
                    epsilon_per_unit=epsilon_per_unit(channel, k))
    return summary_of(channel, acc, metadata, options.clip)


# --- privacy units: tag rows by person, bound, shuffle by bucket, release per bucket ---------------------------
@dataclass(frozen=True)
class _ReleaseBucket:
    """What a bucket of persons' kept rows become in a local release: the channel's noisy sums."""

    job: ChannelJob

    def __call__(self, values: Any, where: str, index: int, key: bytes | None) -> Any:
        if key is None:  # pragma: no cover - a caller's bug
            raise ValueError("a local release needs a key per bucket")
        return release_values(values, self.job, key, index, where)


def run_memoized(dataset: Dataset, channel: Channel, secret: Secret, options: RunOptions,
                 root: str | None = None) -> tuple[Summary, Any]:
    """A longitudinal night (:mod:`ldp_dask.longitudinal`): each person's memoized report summed per bucket under
    the series' memo key, the instantaneous layer drawn per bucket; the :class:`Summary` and the digest pairs.
    ``root`` is the series' root when the caller has it (:func:`~ldp_dask.longitudinal.series_root`)."""
    series = series_context(dataset, channel, root if root is not None else series_root(dataset, options))
    context = {"v": 1, "fingerprint": dataset.fingerprint, "column": dataset.column, "channel": channel.name,
               "params": channel.params(), "mode": "summary", "unit": dataset.unit, "k": 1, "longitudinal": 1}
    if options.night is None:  # pragma: no cover - the callers resolve it (with_night)
        raise ValueError("a longitudinal night needs its night resolved")
    handler = MemoRelease(channel, memo_key(secret, series), options.clip)
    # the rows kept per person follow the context alone (the same row each night); the layer's keys name the night
    acc = map_units(dataset, secret, context, handler, combine_memos, options,
                    keys=night_keys(secret, context, options.night, len(dataset.tasks)),
                    categorical=channel.value_kind == "categorical", persons=True)
    metadata = release_metadata(dataset, secret, "summary", options, None)
    metadata.update(privacy_unit=dataset.unit, max_contributions=1, epsilon_per_unit=epsilon_per_unit(channel, 1),
                    longitudinal={**longitudinal_metadata(channel, series_id(secret, series)),
                                  "night": options.night})
    return summary_of(channel, acc, metadata, options.clip), acc["pairs"]


def _release_summary(source: Any, column: str | None = None, channel: Channel | None = None, mode: str = "summary",
                    *, out: str | os.PathLike[str] | None = None, rows_path: str | os.PathLike[str] | None = None,
                    overwrite: bool = False, options: RunOptions | None = None, incremental: bool = False,
                    since: Any = None, window: str | None = None, skip_changed: bool = False,
                    longitudinal: bool = False, **run: Any) -> Released[Summary]:
    """:func:`privatize` through the release path, returning the ledger's receipt and the files written too."""
    if not isinstance(channel, Channel):
        raise LdpDaskError(f"The 'channel' parameter must be a Channel instance. Got {channel!r} instead.")
    if longitudinal or isinstance(channel, Memoized):
        channel = memoized(channel)
        if incremental or since is not None or window is not None:
            raise LdpDaskError("a longitudinal release reads the whole table each night (its persons' reports "
                               "repeat by themselves): it is not partitioned; leave out incremental, since and window")
    if mode not in MODES:
        raise LdpDaskError(f"The 'mode' parameter must be one of {MODES}. Got {mode!r} instead.")
    opts = RunOptions.of(options, **run)
    if channel.value_kind == "categorical":
        opts = nulls_as_other(opts, getattr(channel, "categories", ()), getattr(channel, "other", False))
    if mode == "rows" and rows_path is None:
        raise LdpDaskError("Rows mode needs 'rows_path' (--rows-out), the directory for privatized rows.")
    if mode != "rows" and rows_path is not None:
        raise LdpDaskError("'rows_path' is only used with mode='rows'.")
    dataset = plan(source, column, channel.value_kind, opts).for_noise_cells(channel.dim)
    if dataset.value_kind != channel.value_kind:
        raise LdpDaskError(f"the dataset was planned as {dataset.value_kind!r} values but the {channel.name!r} "
                           f"channel needs {channel.value_kind!r} values")
    if getattr(channel, "domain", None) is not None:  # the footers may prove the release would be refused
        dataset.check_range(channel.domain, opts.clip)  # type: ignore[attr-defined]
    warn_cells(channel, dataset.n)
    if incremental or since is not None or window is not None:
        return _release_partitioned(dataset, channel, mode, out, overwrite, opts, since, window, skip_changed)
    rows = None if rows_path is None else os.fspath(rows_path)

    secret, opts = with_key(opts)
    charge = local_charge(channel, mode, opts)
    if isinstance(channel, Memoized):
        check_longitudinal(dataset, channel, mode, opts, secret)
        opts = with_night(opts)
        root = series_root(dataset, opts)  # read from the ledger once
        pairs: dict[int, Any] = {}

        def compute_memoized(secret: Secret, _: Outputs) -> Summary:
            summary, found = run_memoized(dataset, channel, secret, opts, root)
            pairs[0] = found  # one release, one summary (the release path may replace the object)
            return summary

        capped = capped_series(dataset, channel, secret, opts, root)  # a capped series: charged by its nights alone
        charge = dataclasses.replace(charge, context={**charge.context, "longitudinal": 1, "night": opts.night},
                                     capped=capped, epsilon=0.0 if capped else charge.epsilon)
        return release(dataset, charge, compute_memoized, opts, targets={"summary": out},
                       write=summary_writer(secret), overwrite=overwrite, content_tag=lambda s: s.content_tag,
                       memos=lambda s: memo_update(s, pairs.pop(0)))

    def compute(secret: Secret, outputs: Outputs) -> Summary:
        return run_channel(dataset, channel, mode, secret, opts, outputs.directory("rows") if rows else None, rows)

    return release(dataset, charge, compute, opts,
                   targets={"summary": out, "rows": rows}, write=summary_writer(secret), overwrite=overwrite,
                   content_tag=lambda s: s.content_tag, central=lambda s: [central_event(s)])


def nulls_as_other(options: RunOptions, categories: Any, other: bool) -> RunOptions:
    """With ``other`` (values outside the listed categories counted as ``"__other__"``) and no null policy, a null
    is one more value outside the list: it is counted as "other" (the policy ``nulls="__other__"``, recorded in the
    summary), not refused."""
    if options.nulls is None and other and OTHER not in list(categories or ()):
        return dataclasses.replace(options, nulls=OTHER)
    return options


def with_key(opts: RunOptions) -> tuple[Secret, RunOptions]:
    """The run's key, resolved once on the driver (a fresh random key too), and options that carry it."""
    secret = opts.key()
    return secret, dataclasses.replace(opts, secret=secret, seed=None, secret_file=None)


def _release_partitioned(dataset: Dataset, channel: Channel, mode: str, out: Any, overwrite: bool,
                         opts: RunOptions, since: Any, window: str | None,
                         skip_changed: bool = False) -> Released[Summary]:
    """A partitioned release (:mod:`ldp_dask.partitions`): a file is a partition with its own noise, kept in the
    summary; with ``since`` only the files that changed are read; each file read is charged on its own rows."""
    from .partitions import plan_partitions
    from .summary import read_summary
    from .windows import parse_window, windowed

    if mode != "summary":
        raise LdpDaskError("A partitioned release (incremental, since, window) keeps per-file noisy sums: it runs in "
                           f"summary mode only. Got mode={mode!r}.")
    if dataset.kind != "parquet":
        raise LdpDaskError("A partitioned release (incremental, since, window) needs a Parquet source: its files "
                           "are the partitions. Write the data to Parquet files first.")
    secret, opts = with_key(opts)  # the stamps, the plan and the release share it
    if window is not None:
        dataset = windowed(dataset, parse_window(window))
    dataset = dataclasses.replace(dataset, by_file=True)
    previous = None if since is None else read_summary(since, key=secret)
    charge = local_charge(channel, mode, opts)
    kept = channel if dataset.unit is None else per_row_channel(channel, opts.max_contributions)
    plan_ = plan_partitions(dataset, kept, mode, opts.clip, secret, charge.epsilon, since=previous,
                            skip_changed=skip_changed, k=opts.max_contributions)
    charge = dataclasses.replace(charge, parts=plan_.parts, context={**charge.context, "partitioned": plan_.context_id})
    dataset = plan_.with_table(dataset)
    work = _run_partitioned if dataset.unit is None else _run_partitioned_units
    try:
        return release(dataset, charge, lambda sec, _: work(dataset, channel, sec, opts, plan_), opts,
                       targets={"summary": out}, write=summary_writer(secret), overwrite=overwrite,
                       content_tag=lambda s: s.content_tag, part_tags=lambda s: plan_.part_tags(s.partitions),
                       central=lambda s: [central_event(s)],
                       published={str(since): previous} if previous is not None else None)
    except BudgetExceeded as exc:
        if not plan_.changed:
            raise
        raise BudgetExceeded(
            f"{exc}. Of the files it would release, {', '.join(plan_.changed[:3])}"
            f"{'' if len(plan_.changed) <= 3 else f' and {len(plan_.changed) - 3} more'} changed since the --since "
            "summary (a correction?) and would be released again; --skip-changed (Python: skip_changed=True) "
            "releases the new files only, keeping the changed files' earlier sums") from None


def _run_partitioned_units(dataset: Dataset, channel: Channel, secret: Secret, options: RunOptions,
                           plan_: Any) -> Summary:
    """A partitioned release with a privacy unit: the files read tonight are one release over their persons
    (bounded and padded to exactly k reports per person across all of them, :func:`run_channel`), kept as one
    partition that names its files; kept partitions of earlier nights add their kept sums. So a night costs ε per
    person whatever the number of its files, and the ledger charges it once (one part,
    :func:`ldp_dask.partitions.plan_partitions`). Its noise is keyed by the files' locations and layouts (one
    file: exactly as a partition of one file always was), so a night re-run on unchanged files reproduces its
    sums."""
    from .partitions import kept_nights, night_partition, tonight_dataset
    from .summary import sum_partitions

    tonight = plan_.to_read
    new = None
    if tonight:
        new = night_partition(plan_, run_channel(tonight_dataset(dataset, plan_), channel, "summary", secret, options),
                              secret)
    parts = kept_nights(plan_, new)
    k = options.max_contributions
    metadata = release_metadata(dataset, secret, "summary", options, None)
    metadata.update(privacy_unit=dataset.unit, max_contributions=k,
                    epsilon_per_unit=epsilon_per_unit(per_row_channel(channel, k), k),
                    partition_context=plan_.context_id, partitions_read=int(new is not None), files_read=len(tonight),
                    partitions_reused=len(parts) - int(new is not None))
    tag = sum(int(p.tag, 16) for p in parts) % TAG_MODULUS
    return Summary(per_row_channel(channel, k), sum(p.rows for p in parts), sum_partitions(parts), metadata,
                   content_tag=f"{tag:064x}", partitions=tuple(parts))


def _run_partitioned(dataset: Dataset, channel: Channel, secret: Secret, options: RunOptions,
                     plan_: Any) -> Summary:
    """Read the files the plan must read (each task keyed by its file's name), keep every file's sums apart, and
    add the kept sums of the others: the totals are the exact sum of all partitions, rounded once."""
    from .summary import Partition, sum_partitions

    reading = plan_.to_read
    pieces = tuple(dataclasses.replace(p, index=i) for i, p in enumerate(p for f in reading for p in f.pieces))
    sub = dataclasses.replace(dataset, pieces=pieces, n=sum(p.num_rows for p in pieces))
    tasks = tasks_of(sub)
    by_path = {f.path: f for f in reading}
    files = [by_path[pieces[t.start].path or ""] for t in tasks]
    names = [name for f in reading for name in f.task_names()]  # tasks come file by file, in the plan's order
    if len(names) != len(tasks):  # pragma: no cover - a planning bug
        raise RuntimeError(f"{len(tasks)} tasks for {len(names)} planned")
    keys = tuple(named_base_keys(secret, plan_.context, names))
    shared = ByFile(ChannelJob(sub.reader, pieces, keys, channel, options.clip, "summary"),
                    tuple(f.name for f in files))
    acc: dict[str, Any] = {"files": {}}
    if tasks:
        acc = run(tasks, file_sums, shared, combine_files, options, rows=[task_rows(pieces, t) for t in tasks])
    read = {}
    for f in reading:
        a = acc["files"][f.name]
        if a["n"] != f.rows:  # pragma: no cover - a planning bug, not user input
            raise RuntimeError(f"processed {a['n']} rows of {f.name}, planned {f.rows}")
        read[f.name] = Partition(f.name, f.rows, f.layout, f.stamp, f"{a['tag']:064x}",
                                 {k: exactsum.to_float(v) for k, v in a["stats"].items()}, f.identity)
    parts = plan_.kept(read)
    if not parts:  # pragma: no cover - a planned dataset has rows
        raise InputDataError("the release has no partition")
    metadata = release_metadata(dataset, secret, "summary", options, None)
    metadata.update(privacy_unit=ROW_UNIT, max_contributions=1,
                    epsilon_per_unit=epsilon_per_unit(channel, 1),
                    partition_context=plan_.context_id, partitions_read=len(read),
                    partitions_reused=len(parts) - len(read))
    tag = sum(int(p.tag, 16) for p in parts) % TAG_MODULUS
    clipped = sum(int(acc["files"][f.name]["clipped"]) for f in reading)
    return Summary(channel, sum(p.rows for p in parts), sum_partitions(parts), metadata,
                   n_clipped=clipped if options.clip else None, content_tag=f"{tag:064x}", partitions=parts)


def local_charge(channel: Channel, mode: str, options: RunOptions) -> Charge:
    """What a local release spends per privacy unit: the ε the per-row channel really spends (from its
    sensitivities), times the rows a person may contribute. The mode decides the output too (clipping changes
    the content, which the content tag covers)."""
    row = per_row_channel(channel, options.max_contributions)
    return Charge("local", channel.name, channel.params(), epsilon_per_unit(row, options.unit),
                  context={"mode": mode})


def privatize(source: Any, column: str | None = None, channel: Channel | None = None, mode: str = "summary", *,
              out: str | os.PathLike[str] | None = None, rows_path: str | os.PathLike[str] | None = None,
              overwrite: bool = False, options: RunOptions | None = None, incremental: bool = False,
              since: Any = None, window: str | None = None, skip_changed: bool = False, longitudinal: bool = False,
              **run: Unpack[RunKwargs]) -> Summary:
    """Privatize one column with a local channel and reduce it to a :class:`Summary`.

    Every row is privatized by ``channel`` (ε per row, the channel's own
    calibration) on the Dask workers or in this process, and only the noisy
    sums come back (summary mode, drawn exactly in distribution), so the
    summary is what a reader of genuine local reports would see.

    Parameters
    ----------
    source : path, URL, numpy array, pandas DataFrame/Series, pyarrow Table or Dataset
        A Parquet file, directory, glob (whose matches may be directories,
        ``"flights/date=*/"``) or fsspec URL (processed on Dask), or
        in-memory data (processed in-process; same result for the same key
        and partitioning), or a :class:`~ldp_dask.source.Dataset` already
        planned by :func:`~ldp_dask.release.plan` (then its partitioning is
        used as it is).
    column : str
        Column to privatize (optional for 1-D arrays).
    channel : Channel
        E.g. ``LaplaceHistogram(epsilon=1, bins=32, domain=(0, 1))``.
    mode : {"summary", "rows"}
        ``"summary"``: only noisy sums leave workers, drawn exactly in
        distribution. ``"rows"``: every row's view is written to ``rows_path``
        (one Parquet file per partition) and the summary is reduced from them.
    out : path or URL, optional
        Also write the summary there (atomically, before the release is
        committed to the ledger).
    rows_path : path or URL, optional
        Output directory for rows mode.
    overwrite : bool
        Replace existing outputs.
    options : RunOptions, optional
        How the release runs: cluster, key, clipping, partitioning, ledger, ...
    incremental : bool
        A *partitioned* release (:mod:`ldp_dask.partitions`, docs/how-to/incremental.md):
        each file of a Parquet source is a partition with noise of its own,
        and the summary keeps every file's noisy sums, so that a later
        release reads only the files that changed (``since``). The ledger
        charges each file released anew: on its own rows when the dataset is
        declared append-only, else for every row; with a privacy unit, for
        every person (each file read is a release over the persons in it).
    since : path or Summary, optional
        A partitioned summary released earlier with the same key, channel and
        parameters: its files that did not change (same name, row groups,
        footer, size and modification time) are not read, their kept sums are
        used. The result is bit-identical to reading every file. Implies
        ``incremental``.
    window : str, optional
        ``"30d"``: release only the files of the last 30 days of a
        hive-partitioned table (``date=YYYY-MM-DD/`` directories), ending at
        the newest date. Implies ``incremental``.
    skip_changed : bool
        With ``since``: a file that changed since that summary (a correction
        to an old day) is not released again; its kept sums are used, and a
        warning names it. Without it such a file is read and charged anew,
        and a release that the budget refuses for it says which file it is.
    longitudinal : bool
        A longitudinal release (docs/how-to/longitudinal.md): with a privacy
        unit, each person's report is memoized — a keyed function of the
        person and the state of their value — so a person whose state did not
        change repeats last night's report. By default the series is *capped*
        (:func:`ldp_dask.channels.memoized`): the cell or category is first
        hashed by the person's keyed hash into g values (``CappedHistogram``,
        ``CappedFrequencies``; a mean's α-point rounding, ``CappedMean``), so a
        person makes at most g reports ever and **the channel's ε is the
        series' whole cost per person**, charged once at its first night
        (with an instantaneous layer, ε_bits a night until the nights reach
        it). A memoized channel given directly implies it and sets its
        options; ``MemoHistogram``, ``MemoFrequencies`` and ``MemoMean`` are the
        uncapped forms, ε per distinct report, the ledger charging each person
        by their distinct reports (docs/privacy.md, "Longitudinal releases").
    **run :
        Any :class:`~ldp_dask.options.RunOptions` field by name, overriding
        ``options`` (``client="local"``, ``seed=1``, ``ledger=True``, ...).

    Returns
    -------
    Summary
        With ``receipt`` (what the ledger recorded: ε charged, the dataset's
        spend, whether it reproduced a recorded release) and ``written`` (the
        outputs published, ``{label: path}``).

    Raises
    ------
    InputDataError
        Unusable data (NaN, out of domain, wrong type, empty, corrupt); nothing is written.
    BudgetExceeded
        The ledger's budget for the dataset and column would be exceeded; nothing is run.
    """
    return _release_summary(source, column, channel, mode, out=out, rows_path=rows_path, overwrite=overwrite,
                            options=options, incremental=incremental, since=since, window=window,
                            skip_changed=skip_changed, longitudinal=longitudinal, **run).attach()


def release_metadata(dataset: Dataset, sec: Secret, mode: str, options: RunOptions, rows_path: Any) -> dict[str, Any]:
    return {
        "ledger": options.ledger_note,
        "column": dataset.column,
        "source": dataset.description,
        # the structure's digest covers row counts: keyed, so that nobody without the key can test a guess; with a
        # privacy unit the row count is not public (one person's rows move it), nor is anything that follows it
        "fingerprint": keyed_digest(sec, "fingerprint", dataset.fingerprint.encode())[:32] if dataset.unit is None
        else None,
        "root": dataset.root,
        "mode": mode,
        "partitions": len(dataset.pieces) if dataset.unit is None else None,
        "key_id": sec.key_id,
        "key_source": sec.source,
        "reproducible": sec.reproducible,
        "insecure_seed": sec.insecure,
        "clip": bool(options.clip),
        # the δ of the central guarantee the summary states (Summary.central): a public parameter of the statement
        "central_delta": float(options.central_delta),
        "nulls": None if dataset.fill is None else {"policy": "value", "value": dataset.fill},
        "rows_path": os.fspath(rows_path) if rows_path is not None else None,
        # keyed footer digests of the files read: merge refuses the same file under another name (not with a unit:
        # a footer holds row counts, which one person's rows move)
        "file_identities": read_identities(sec, dataset) if dataset.unit is None else None,
        # a table format's files: which table, at which version (its log named the files read)
        **({"table": dataset.table} if dataset.table is not None else {}),
    }
