"""What some tests need from outside the repository, and what happens without it.

Java (with PySpark) for the Spark tests, the shared sqllogictest corpus beside the
repository (``../shared/conformance``) for the corpus tests, PostgreSQL's binaries
for the Postgres front end's differential tests, and Ray for the cluster's placement
on Ray. Without one, its tests are
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


def postgres() -> Any:
    """A real PostgreSQL (noria_tools/postgres.py); the caller stops it."""
    from noria_tools.postgres import Postgres, PostgresUnavailable
    try:
        return Postgres()
    except PostgresUnavailable as exc:
        missing(str(exc))


def ray_instance(num_cpus: int = 8) -> str:
    """A Ray instance started by this process (``ray.init``), for ``noria-py serve --ray
    ADDRESS`` to place workers on; returns its address. The caller ends it with
    ``ray.shutdown()``, which stops only what this process started."""
    try:
        import ray
    except ImportError:
        missing("Ray is not installed (pip install -e '.[ray]')")
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    return str(ray.get_runtime_context().gcs_address)


def certificate(directory: Path, name: str = "cert") -> tuple[str, str]:
    """A self-signed certificate for ``localhost`` and ``127.0.0.1`` (its own CA: what a
    client verifies it against) and its key, made with the openssl command."""
    import shutil
    import subprocess
    if shutil.which("openssl") is None:
        missing("openssl is not installed (it makes the tests' certificates)")
    cert, key = directory / f"{name}.pem", directory / f"{name}-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return str(cert), str(key)
