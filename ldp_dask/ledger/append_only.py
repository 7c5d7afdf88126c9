"""The checks a dataset declared append-only passes on every release, or the reason it no longer can.

A dataset declared append-only (``ldp-dask budget set NAME --source URL --limit ε --append-only``) has its
rows followed by location: a row pays for the releases that read its file
(:func:`ldp_dask.ledger.budget.spent_per_person` with ``follow_locations``).
That holds only while files are added and nothing else happens to them, so
before every release of it the ledger compares what its recorded releases
read (:mod:`ldp_dask.locations`: each file's location, device and inode, and
keyed digests of its state and footer) with the files there now. Pure
functions of the recorded releases and a listing: no database.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["append_only_breaks"]


def append_only_breaks(active: list[dict[str, Any]], root: str, files: Sequence[Mapping[str, Any]], key_id: str,
                        listing: Callable[[str], Mapping[str, Mapping[str, Any]]] | None) -> str | None:
    """Why the files of an append-only dataset at ``root`` can no longer be followed by location, or None.

    Every file a recorded release read under ``root`` must still be there with the same keyed state (size and
    version), and no file this release reads may be a copy (the same keyed footer) or a link (the same device
    and inode) of one recorded at another location. Digests keyed under another key cannot be compared: that
    too breaks the promise, since nothing can be checked."""
    top = root.rstrip("/")

    def inside(loc: str) -> bool:
        return loc.rstrip("/") == top or loc.startswith(top + "/")

    seen: dict[str, dict[str, Any]] = {}
    for r in active:
        for f in json.loads(r.get("files") or "[]"):
            if inside(f["loc"]):
                seen[f["loc"]] = {**f, "key_id": r.get("key_id")}
    if not seen:
        return None
    if listing is None:
        return "its files could not be listed to check them"
    try:
        now = listing(top)
    except Exception as exc:  # noqa: BLE001 - whatever the storage says, nothing could be checked
        return f"its files could not be listed to check them ({type(exc).__name__})"
    for loc, f in sorted(seen.items()):
        if f["key_id"] != key_id:
            return f"{loc} was charged under key id {f['key_id']} and cannot be checked under {key_id}"
        if loc not in now:
            return f"{loc} was charged and has gone (renamed, moved, compacted or deleted)"
        if now[loc].get("state") != f.get("state"):
            return f"{loc} changed since it was charged (rewritten in place?)"
    footers = {f["footer"]: loc for loc, f in seen.items() if f.get("footer")}
    ids = {f["id"]: loc for loc, f in seen.items() if f.get("id")}
    for f in files:
        loc = f["loc"]
        if not inside(loc) or loc in seen:
            continue
        if f.get("id") and f["id"] in ids:
            return f"{loc} is a link to the charged {ids[f['id']]}"
        if f.get("footer") and f["footer"] in footers:
            return f"{loc} holds the same Parquet footer as the charged {footers[f['footer']]} (a copy?)"
    return None
