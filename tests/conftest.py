"""Fixtures shared by more than one folder: one Spark session for the whole test run (it
takes seconds to start), for tests/spark and strategy="spark" in tests/recovery. Servers
started by the tests write their token files (runtime/cluster/tokens.py) to a directory
of the run's own, not the user's."""
from __future__ import annotations

import os
import tempfile

import pytest

os.environ.setdefault("NORIA_RUNTIME_DIR", tempfile.mkdtemp(prefix="noria-runtime-"))


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="PySpark is not installed (pip install -e '.[spark]')")
    from noria_py.spark import SparkUnavailableError, get_session
    try:
        session = get_session("local[2]", {"spark.sql.shuffle.partitions": "2",
                                           "spark.default.parallelism": "2"})
    except SparkUnavailableError as exc:
        pytest.skip(str(exc))
    yield session
    session.stop()
