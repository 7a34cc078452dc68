"""A throwaway PostgreSQL server for a test: initdb in a temporary folder, listening on 127.0.0.1 only, stopped
and removed at the end. PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user that
the Debian package creates."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .services import require_program


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    user: str
    db_name: str

    def url(self) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.db_name}"


def _bin(program: str) -> str:
    found = shutil.which(program) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{program}"))), None)
    return found or require_program(program, "postgresql")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres_server(db_name: str = "dagster") -> Iterator[PostgresServer]:
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    as_root = os.geteuid() == 0
    owner = pwd.getpwnam("postgres") if as_root else pwd.getpwuid(os.geteuid())
    run_as = ["runuser", "-u", owner.pw_name, "--"] if as_root else []
    root = Path(tempfile.mkdtemp(prefix="citegate-pg-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    for path in (root, sockets):
        os.chown(path, owner.pw_uid, owner.pw_gid)
    port = _free_port()
    subprocess.run(
        [*run_as, initdb, "-D", str(data), "-U", owner.pw_name, "--auth=trust", "--no-sync", "-E", "UTF8"],
        check=True,
        capture_output=True,
    )
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={sockets} -c fsync=off"
    subprocess.run(
        [*run_as, pg_ctl, "-D", str(data), "-o", options, "-l", str(root / "server.log"), "-w", "start"],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            [*run_as, _bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", owner.pw_name, db_name],
            check=True,
            capture_output=True,
        )
        yield PostgresServer("127.0.0.1", port, owner.pw_name, db_name)
    finally:
        subprocess.run([*run_as, pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
