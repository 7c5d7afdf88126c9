"""A real PostgreSQL server for the tests, started on 127.0.0.1 from Debian's postgresql package or, where
the machine has none, from the server binaries the ``pgserver`` wheel bundles."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from local_process import free_port, stop


def server_binaries() -> Path | None:
    """A directory holding initdb and postgres: Debian's (newest first), the PATH's, or pgserver's."""
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(os.path.join(d, "initdb"), os.X_OK):
            return Path(d)
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    try:
        import pgserver
    except ImportError:
        return None
    d = Path(pgserver.__file__).parent / "pginstall" / "bin"
    return d if (d / "initdb").exists() else None



@contextmanager
def postgres_server(workdir: Path) -> Iterator[str]:
    """Start a throwaway server (trust authentication, 127.0.0.1 only); yield its URL without a database."""
    bins = server_binaries()
    if bins is None:
        raise RuntimeError("no PostgreSQL server binaries: install Debian's postgresql or the pgserver wheel "
                           "(pip install -e '.[test]')")
    data = workdir / "pgdata"
    workdir.mkdir(parents=True, exist_ok=True)
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        as_user = ["runuser", "-u", "nobody", "--"]
        os.chmod(workdir, 0o777)
    subprocess.run([*as_user, str(bins / "initdb"), "-D", str(data), "-U", "ldp", "--auth=trust", "-E", "UTF8",
                    "--no-sync"], check=True, capture_output=True)
    port = free_port()
    log = open(workdir / "server.log", "wb")
    proc = subprocess.Popen([*as_user, str(bins / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port),
                             "-k", str(workdir), "-c", "fsync=off", "-c", "max_connections=200"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"postgresql://ldp@127.0.0.1:{port}"
    try:
        import psycopg

        deadline = time.monotonic() + 120
        while True:
            try:
                psycopg.connect(f"{url}/postgres", connect_timeout=5).close()
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"PostgreSQL did not start: {(workdir / 'server.log').read_text()[-2000:]}") from None
                time.sleep(0.2)
        yield url
    finally:
        stop(proc, 30)
        log.close()


def fresh_database(url: str, name: str) -> str:
    """Create an empty database ``name`` on the server; return its URL."""
    import psycopg

    with psycopg.connect(f"{url}/postgres", autocommit=True) as con:
        con.execute(f'DROP DATABASE IF EXISTS "{name}"')
        con.execute(f'CREATE DATABASE "{name}"')
    return f"{url}/{name}"
