"""Recovery: a reservation whose process died (same host) or whose lease expired (any host) is resolved.

Committed if it was publishing or left a staged output on disk (a private output may have left the process),
dropped otherwise (docs/privacy.md, "The budget ledger"); a committed entry's staged outputs, hidden files no
one will rename, are removed. Every ledger operation runs it first.
"""

from __future__ import annotations

import json
import os
import socket
import time

from .index import drop_release
from .store import Tx

__all__ = ["recover"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _staged_output_exists(outputs: list[str], token: str) -> bool:
    """Whether a release left a staged (hidden, not yet renamed) output beside one of its targets."""
    import fsspec

    from .._io import temp_name

    for target in outputs:
        try:
            fs, p = fsspec.core.url_to_fs(target)
            if fs.exists(temp_name(p, token)):
                return True
        except Exception:  # unreachable storage: cannot prove nothing was left, so count it
            return True
    return False


def _remove_staged(outputs: list[str], token: str) -> None:
    """Remove what a stopped release left staged beside its targets (best effort: storage may be unreachable)."""
    import fsspec

    from .._io import temp_name

    for target in outputs:
        try:
            fs, p = fsspec.core.url_to_fs(target)
            staged = temp_name(p, token)
            if fs.exists(staged):
                fs.rm(staged, recursive=True)
        except Exception:  # noqa: BLE001 - unreachable storage: the debris stays, the charge stands
            pass


def recover(tx: Tx) -> None:
    """Resolve reservations whose process died or whose lease expired (see the module's rules)."""
    now, host = time.time(), socket.gethostname()
    for r in tx.all("SELECT id, status, outputs, token, host, pid, lease_until FROM releases "
                    "WHERE status IN ('reserved', 'publishing')"):
        dead = r["lease_until"] < now or (
            r["host"] == host and r["pid"] is not None and r["pid"] != os.getpid() and not _alive(int(r["pid"])))
        if not dead:
            continue
        outputs = json.loads(r["outputs"])
        if r["status"] == "publishing":
            tx.run("UPDATE releases SET status='committed', note='recovered: the run stopped while publishing' "
                   "WHERE id=?", (r["id"],))
            _remove_staged(outputs, r["token"])
        elif _staged_output_exists(outputs, r["token"]):
            tx.run("UPDATE releases SET status='committed', note='recovered: the run stopped with a private "
                   "output staged on disk' WHERE id=?", (r["id"],))
            _remove_staged(outputs, r["token"])
        else:
            drop_release(tx, r["id"])
