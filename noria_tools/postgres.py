"""A throwaway PostgreSQL server for tests and benchmarks: this machine's binaries, a
temporary directory, a free loopback port, trust authentication, no fsync.

PostgreSQL refuses to run as root; as root it runs as the ``postgres`` user
(``runuser``). ``stop()`` removes the directory.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries here, or the server did not start."""


class Postgres:
    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        pg_ctl = shutil.which("pg_ctl") or (found[-1] if found else None)
        if pg_ctl is None:
            raise PostgresUnavailable("PostgreSQL binaries (initdb, pg_ctl) not found")
        bindir = Path(pg_ctl).parent
        self.dir = Path(tempfile.mkdtemp(prefix="noria-pg-"))
        run_as: list[str] = []
        if os.geteuid() == 0:
            self.dir.chmod(0o777)
            run_as = ["runuser", "-u", "postgres", "--"]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        data = str(self.dir / "data")
        self._stop = [*run_as, str(bindir / "pg_ctl"), "-D", data, "-m", "immediate", "stop"]
        try:
            subprocess.run([*run_as, str(bindir / "initdb"), "-D", data, "-A", "trust", "-U",
                            "postgres", "--no-sync", "-E", "UTF8", "--locale=C"],
                           check=True, capture_output=True)
            subprocess.run([*run_as, str(bindir / "pg_ctl"), "-D", data, "-w", "-l",
                            str(self.dir / "log"), "-o",
                            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
                            "start"], check=True, capture_output=True)
        except (subprocess.CalledProcessError, OSError) as err:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise PostgresUnavailable(f"PostgreSQL did not start: {err}") from None
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        self.dsn = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def stop(self) -> None:
        subprocess.run(self._stop, capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Postgres":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
