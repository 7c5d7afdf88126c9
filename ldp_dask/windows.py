"""Windows over hive-partitioned dates: the files, or a partitioned summary's kept partitions, of the last N days
(``--window 30d``) ending at the newest ``key=YYYY-MM-DD`` directory. Neither reads data nor spends ε: a window
of a summary is its kept sums (docs/how-to/incremental.md, "A window of the last days")."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from ._validation import LdpDaskError
from .source import Dataset
from .summary import Partition, Summary, sum_partitions

__all__ = ["parse_window", "in_window", "windowed", "window_of", "rebuilt"]


_WINDOW = re.compile(r"^([1-9][0-9]{0,4})d$")
_HIVE_DATE = re.compile(r"(?:^|/)([A-Za-z_][A-Za-z0-9_]*)=(\d{4}-\d{2}-\d{2})(?:/|$)")


def parse_window(text: str) -> int:
    """``"30d"`` → 30 (days)."""
    m = _WINDOW.match(str(text).strip())
    if not m:
        raise LdpDaskError(f"The 'window' parameter must be a number of days like '30d' (1d to 99999d). "
                           f"Got {text!r} instead.")
    return int(m.group(1))


def _date_of(name: str) -> tuple[str, date] | None:
    found = _HIVE_DATE.findall(name)
    if len(found) != 1:
        return None
    key, value = found[0]
    try:
        return key, date.fromisoformat(value)
    except ValueError:
        return None


def in_window(names: Sequence[str], days: int) -> list[str]:
    """The names, among hive-partitioned ``names`` (``…/date=2026-11-23/part.parquet``), whose date lies in the
    last ``days`` days ending at the newest date among them (that date included). A date after tomorrow (UTC) is
    refused: a stray ``date=2099-01-01/`` would otherwise end the window and leave every real day out of it.

    Every name must carry exactly one ``key=YYYY-MM-DD`` directory, all under the same key.
    """
    dated = {n: _date_of(n) for n in names}
    undated = [n for n, d in dated.items() if d is None]
    if undated:
        raise LdpDaskError(f"a window needs files under one date directory each (hive partitions like "
                           f"date=2026-11-23/); {undated[0]!r} has none")
    keys = {d[0] for d in dated.values() if d is not None}
    if len(keys) > 1:
        raise LdpDaskError(f"the files are partitioned by several date keys ({', '.join(sorted(keys))}); a window "
                           "needs one")
    newest = max(d[1] for d in dated.values() if d is not None)
    tomorrow = datetime.now(UTC).date() + timedelta(days=1)  # a day's slack for the time zones of the writers
    if newest > tomorrow:
        late = next(n for n, d in dated.items() if d is not None and d[1] == newest)
        raise LdpDaskError(f"the date directory of {late!r} is in the future (today is {tomorrow - timedelta(days=1)} "
                           "UTC): a window ends at the newest date, so it would be the whole window; remove or "
                           "rename it")
    first = newest - timedelta(days=days - 1)
    return [n for n in names if dated[n] is not None and dated[n][1] >= first]  # type: ignore[index]


def windowed(dataset: Dataset, days: int) -> Dataset:
    """``dataset`` restricted to the files of the last ``days`` days (:func:`in_window`), before any is read."""
    from .source import _fingerprint

    names = sorted({dataset.relative(p.path) for p in dataset.pieces if p.path is not None})
    keep = set(in_window(names, days))
    pieces = tuple(dataclasses.replace(p, index=i) for i, p in
                   enumerate(p for p in dataset.pieces if dataset.relative(p.path or "") in keep))
    return dataclasses.replace(dataset, pieces=pieces, n=sum(p.num_rows for p in pieces),
                               fingerprint=_fingerprint({"fingerprint": dataset.fingerprint,
                                                         "window": sorted(keep)}),
                               description=f"{dataset.description} (last {days} days)")


def window_of(summary: Summary, days: int) -> Summary:
    """The release of the last ``days`` days of a partitioned summary, from its kept sums (no data read, no ε)."""
    if not summary.partitions:
        raise LdpDaskError("a window is taken over kept partitions: the summary is not a partitioned release")
    keep = set(in_window([x for p in summary.partitions for x in p.paths], days))
    parts = tuple(p for p in summary.partitions if all(x in keep for x in p.paths))
    meta = {k: v for k, v in summary.metadata.items() if k not in ("partitions_read", "partitions_reused")}
    meta.update(window_days=days, source=f"{summary.metadata.get('source')} (last {days} days)")
    return rebuilt(summary, parts, meta)


def rebuilt(like: Summary, parts: tuple[Partition, ...], metadata: dict[str, Any]) -> Summary:
    return Summary(like.channel, sum(p.rows for p in parts), sum_partitions(parts), metadata,
                   integrity=like.integrity, partitions=parts)
