"""Fixtures shared by more than one folder: one Spark session for the whole test run (it
takes seconds to start), for tests/spark and strategy="spark" in tests/recovery. Servers
started by the tests write their token files (runtime/cluster/tokens.py) to a directory
of the run's own, not the user's. What is missing (Java, ../shared) skips a test, or
under CI=true fails it: tests/needs.py. A TLS certificate for the servers' TLS tests."""
from __future__ import annotations

import os
import tempfile

import pytest

from tests import needs

os.environ.setdefault("NORIA_RUNTIME_DIR", tempfile.mkdtemp(prefix="noria-runtime-"))


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for localhost and 127.0.0.1, and its key (openssl)."""
    return needs.certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def spark():
    """Skipped without PySpark or Java; under CI=true, failed (tests/needs.py)."""
    session = needs.spark_session()
    yield session
    session.stop()
