"""Real fsspec filesystems that fail on purpose: the first read of each Parquet file on a worker
(FlakyFileSystem), every write (FailingWritesFileSystem) or every move after the first (FailingSecondMoveFileSystem);
and one that counts the workers' reads (CountingFileSystem).

Used to prove that a retried task reproduces the undisturbed release. The
first failure per file is recorded as a marker file, so it works across
worker processes; reads in the driver process (planning) never fail.
"""

from __future__ import annotations

import hashlib
import os
import uuid

from fsspec.implementations.local import LocalFileSystem


class _Prefixed(LocalFileSystem):
    """The local filesystem under a protocol of its own (``flaky://``, ...): paths lose the prefix."""

    protocol: tuple[str, ...] = ()

    @classmethod
    def _strip_protocol(cls, path):
        prefix = f"{cls.protocol[0]}://"
        path = path[len(prefix):] if str(path).startswith(prefix) else path
        return LocalFileSystem._strip_protocol(path)


class _WorkerReads(_Prefixed):
    """Knows which reads of Parquet files are made outside the driver (worker processes), and where to leave
    markers of them (``marker_dir``): what a subclass does with such a read is its own."""

    def __init__(self, marker_dir: str, driver_pid: int, **kwargs):
        super().__init__(**kwargs)
        self.marker_dir = marker_dir
        self.driver_pid = driver_pid

    def _worker_read(self, path, mode) -> bool:
        return "r" in mode and str(path).endswith(".parquet") and os.getpid() != self.driver_pid


class FlakyFileSystem(_WorkerReads):
    protocol = ("flaky",)

    def _open(self, path, mode="rb", **kwargs):
        if self._worker_read(path, mode):
            marker = os.path.join(self.marker_dir, hashlib.sha256(str(path).encode()).hexdigest())
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.close(fd)
                raise OSError(f"injected transient failure reading {path}")
        return super()._open(path, mode, **kwargs)


class FailingWritesFileSystem(_Prefixed):
    """A real local filesystem whose writes all fail (``failwrite://``): a disk that fills up, a revoked bucket."""

    protocol = ("failwrite",)

    def _open(self, path, mode="rb", **kwargs):
        if "w" in mode or "a" in mode:
            raise OSError(f"injected write failure: {path}")
        return super()._open(path, mode, **kwargs)


class FailingSecondMoveFileSystem(_Prefixed):
    """A real local filesystem on which every move after the first fails (``failmove://``): a release's outputs are
    published one rename at a time, so the first lands and the second fails (a bucket revoked part-way)."""

    protocol = ("failmove",)
    moves = 0

    def mv(self, path1, path2, **kwargs):
        type(self).moves += 1
        if type(self).moves > 1:
            raise OSError(f"injected failure moving {path1} into place")
        return super().mv(path1, path2, **kwargs)


class CountingFileSystem(_WorkerReads):
    """A real local filesystem that records every read of a Parquet file on a worker (``counting://``): one marker
    file per open, in ``marker_dir``, so reads are counted across worker processes; the driver's (planning) are
    not counted."""

    protocol = ("counting",)

    def _open(self, path, mode="rb", **kwargs):
        if self._worker_read(path, mode):
            open(os.path.join(self.marker_dir, uuid.uuid4().hex), "w").close()
        return super()._open(path, mode, **kwargs)
