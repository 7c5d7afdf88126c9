"""A real S3-compatible server on 127.0.0.1 for the test session: moto's server (``moto[server]``), in its own
process, reached over HTTP by s3fs exactly as a real endpoint would be."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator

from local_process import free_port, stop

#: moto accepts any credentials; these are set in the environment for the session, as for a real bucket.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "ldp-test", "AWS_SECRET_ACCESS_KEY": "ldp-test-secret",
               "AWS_DEFAULT_REGION": "us-east-1"}


@contextlib.contextmanager
def s3_server(timeout: float = 60.0) -> Iterator[str]:
    """Start moto's S3 server on a free port of 127.0.0.1; yield its endpoint URL; stop it at the end."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # the server logs every request to stderr: into a file, never a pipe nobody drains (a full pipe, after a few
    # hundred requests, blocks the server's next log line and with it every request)
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, **CREDENTIALS})
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):
                        break
                except OSError:
                    if proc.poll() is not None:
                        log.seek(0)
                        raise RuntimeError(f"the S3 server exited: {log.read().decode()[-2000:]}") from None
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the S3 server did not answer within {timeout:g} s") from None
                    time.sleep(0.2)
            yield url
        finally:
            stop(proc, 10)
