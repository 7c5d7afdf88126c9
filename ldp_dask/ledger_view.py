"""What ``ldp-dask budget`` shows of the ledger: a dataset's budget declared, the ledger listed per dataset (spend,
budget, composed central guarantee, longitudinal series, the table versions read, the per-partition groups) or per
entry. Printing only: the ledger computes every figure (:mod:`ldp_dask.ledger`)."""

from __future__ import annotations

import argparse
import json
import re
import time
from typing import Any

from ._validation import LdpDaskError
from .receipts import central_spend_line, series_spend

__all__ = ["cmd_budget", "table_versions", "GROUPS_SHOWN"]


def cmd_budget(a: argparse.Namespace) -> int:
    """``ldp-dask budget``: declare a dataset's budget (``set``), or list the ledger per dataset or entry."""
    from ldp_dask.ledger import open_ledger
    from ldp_dask.ledger.budget import remaining
    from ldp_dask.source import source_root

    led = open_ledger(a.ledger or True)
    assert led is not None
    if a.action == "set":
        if a.name is None or a.source is None or a.limit is None:
            raise LdpDaskError("budget set needs NAME, --source and --limit (e.g. budget set flights "
                               "--source data/flights --limit 4).")
        root = source_root(a.source)
        central = tuple(a.central) if a.central is not None else None
        led.declare(a.name, root, a.limit, a.privacy_unit, append_only=a.append_only, central=central)
        unit = a.privacy_unit or "row"
        how = ("; append-only: each row pays for the releases of its own file, while every file charged stays "
               "where and as it was" if a.append_only else "")
        also = "" if central is None else f" and central ε ≤ {central[0]:g} at δ {central[1]:g}, composed"
        print(f"budget set: dataset {a.name!r} = {root}, ε ≤ {a.limit:g} per {unit}{also} "
              f"(spent so far {led.spent(root):g}; every release reading inside or around this root is charged "
              f"here{how})")
        return 0
    rows = led.entries() if a.entries else led.summary()
    if a.json:
        print(json.dumps(rows, default=str))
        return 0
    if not rows:
        print(f"the ledger {led.location} is empty")
        return 0
    if a.entries:
        for r in rows:
            note = f" ({r['note']})" if r["note"] else ""
            events = json.loads(r["central"]).get("events") if r.get("central") else None
            if events:
                note = " recorded central " + ", ".join(f"(ε {e:.3g}, δ {d:g})" for e, d in events[:4]) + \
                    (f" and {len(events) - 4} more" if len(events) > 4 else "") + note
            print(f"#{r['id']:<4} {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(r['created_at']))}  "
                  f"{r['scope']:<7} {r['channel']:<18} ε={r['epsilon']:<8g} per {r['privacy_unit']:<8} "
                  f"{r['status']:<10} {r['source']} [{r['column_name']}] key {r['key_id']}{note}")
        return 0
    entries = led.entries()  # which table versions each dataset's releases read
    print(f"ledger {led.location}: ε spent per person (per row unless a privacy unit is named), all columns and "
          "scopes together")
    for r in rows:
        name = r["dataset"] or "(undeclared)"
        budget = (f" of budget {r['budget']:g} (remaining {remaining(r['budget'], r['spent']):.3g})"
                  if r["budget"] is not None else " (no budget set)")
        views = "; ".join(f"{k} {v:g}" for k, v in sorted(r["by_column"].items()))
        scopes = ", ".join(f"{k} {v:g}" for k, v in sorted(r["by_scope"].items()))
        print(f"  {name} {r['root']}: {r['spent']:g} per {r['privacy_unit']}{budget}")
        tables = table_versions(entries, r["root"])
        if tables:
            print("      " + "; ".join(f"{where}: {'snapshot' if where.startswith('Iceberg') else 'version'}(s) "
                                      f"{', '.join(map(str, v))} released" for where, v in tables.items()))
        if r.get("central") is not None and (r["central"]["events"] or r["central"]["budget"]):
            print(f"      central guarantee: {central_spend_line(r['central'])}")
        if r.get("nights_left") is not None:
            print(f"      nightly series: ε {r['night_rate']:g} per {r['privacy_unit']} a night; "
                  f"{r['nights_left']} more night(s) fit")
        for m in r.get("longitudinal", ()):
            nights = "" if m.get("capped") else f" ({m['nights']} nights)"  # a capped series says its nights
            name = f"of {m.get('column')} ({m.get('channel')}, series {m['series'][:8]})"
            print(f"      longitudinal series {name}{nights}: {series_spend(m, r['privacy_unit'])}")
        if r.get("table_log"):
            print("      a table's log: ε per row followed through its appends, rewrites and changes")
        elif r.get("fallback"):
            print(f"      declared append-only, counted conservatively since: {r['fallback']}")
        elif r.get("append_only"):
            print("      append-only: ε per row followed file by file")
        if views:
            print(f"      by column: {views}; by scope: {scopes}")
        _print_groups(r)
    return 0


_TABLE_VERSION = re.compile(r"^(?P<format>Delta|Iceberg) table (?P<table>.+) at (?:version|snapshot) "
                            r"(?P<version>\d+)$")


def table_versions(entries: list[dict[str, Any]], root: str) -> dict[str, list[int]]:
    """The table versions (Delta) or snapshots (Iceberg) the active releases of ``root`` read, by table (from
    their entries' sources, which :class:`ldp_dask.tables.TableVersion` names)."""
    found: dict[str, set[int]] = {}
    for e in entries:
        m = _TABLE_VERSION.match(str(e.get("source") or ""))
        if m and e.get("root") == root and e.get("status") in ("committed", "publishing", "reserved"):
            found.setdefault(f"{m.group('format')} table {m.group('table')}", set()).add(int(m.group("version")))
    return {t: sorted(v) for t, v in found.items()}


#: ``budget`` lists at most this many person groups of a dataset (``--json`` lists them all)
GROUPS_SHOWN = 12


def _print_groups(row: dict[str, Any]) -> None:
    """The per-row groups of a dataset: ε per row in each charged location inside it (a partition, a file)."""
    groups = row.get("groups") or {}
    if not groups:
        return
    head = row["root"].rstrip("/") + "/"
    values = sorted(set(groups.values()))
    print(f"      per partition: {len(groups)} charged inside it, ε per row from {values[0]:g} to {values[-1]:g}")
    for where, eps in list(groups.items())[:GROUPS_SHOWN]:
        print(f"        {where[len(head):] if where.startswith(head) else where}: {eps:g}")
    if len(groups) > GROUPS_SHOWN:
        print(f"        … {len(groups) - GROUPS_SHOWN} more (budget --json lists them all)")
