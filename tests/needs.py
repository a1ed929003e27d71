"""What some tests need from outside the repository, and what happens without it.

Java (with PySpark) for the Spark tests, and the shared sqllogictest corpus beside the
repository (``../shared/conformance``) for the corpus tests. Without one, its tests are
skipped, saying what is missing; under CI (``CI=true``) they fail instead, so that a CI
machine set up without Java or without ``../shared`` cannot pass by running less.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NoReturn

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "conformance" / "sqllogictest"


def under_ci() -> bool:
    return os.environ.get("CI") == "true"


def missing(what: str) -> NoReturn:
    """Skip the calling test (or fixture) for want of ``what``; under CI, fail it."""
    if under_ci():
        pytest.fail(f"{what} (CI=true: a missing requirement fails the run instead of "
                    "skipping its tests)", pytrace=False)
    pytest.skip(what)


def spark_session() -> Any:
    """A local Spark session for the tests (two cores, two partitions)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        missing("PySpark is not installed (pip install -e '.[spark]')")
    from noria_py import spark
    try:
        return spark.get_session("local[2]", {"spark.sql.shuffle.partitions": "2",
                                              "spark.default.parallelism": "2"})
    except spark.SparkUnavailableError as exc:
        missing(str(exc))


def corpus() -> Path:
    """The sqllogictest corpus of ../shared/conformance."""
    if not CORPUS.is_dir():
        missing(f"sqllogictest corpus not found at {CORPUS} (it lives in ../shared "
                "beside the repository)")
    return CORPUS


class Postgres:
    """A PostgreSQL server of this machine's binaries, in a temporary directory, on a
    free loopback port, trusted (no password), with fsync off; ``stop()`` removes it."""

    def __init__(self) -> None:
        import glob
        import shutil
        import socket
        import subprocess
        import tempfile
        import time

        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        pg_ctl = shutil.which("pg_ctl") or (found[-1] if found else None)
        if pg_ctl is None:
            missing("PostgreSQL binaries (initdb, pg_ctl) not found")
        bindir = Path(pg_ctl).parent
        self.dir = Path(tempfile.mkdtemp(prefix="noria-pg-"))
        run_as: list[str] = []
        if os.geteuid() == 0:           # PostgreSQL refuses to run as root
            self.dir.chmod(0o777)
            run_as = ["runuser", "-u", "postgres", "--"]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._stop = [*run_as, str(bindir / "pg_ctl"), "-D", str(self.dir / "data"), "-m",
                      "immediate", "stop"]
        subprocess.run([*run_as, str(bindir / "initdb"), "-D", str(self.dir / "data"), "-A",
                        "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"],
                       check=True, capture_output=True)
        subprocess.run([*run_as, str(bindir / "pg_ctl"), "-D", str(self.dir / "data"), "-w",
                        "-l", str(self.dir / "log"), "-o",
                        f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
                        "start"], check=True, capture_output=True)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        self.dsn = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        self._shutil = shutil
        self._subprocess = subprocess

    def stop(self) -> None:
        self._subprocess.run(self._stop, capture_output=True)
        self._shutil.rmtree(self.dir, ignore_errors=True)
