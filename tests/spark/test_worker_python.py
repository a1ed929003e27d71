"""register(spark) says which line to add when Spark's Python workers cannot import
noria_py (a session started outside the virtual environment), instead of a
ModuleNotFoundError in every task."""
from __future__ import annotations

import shutil
import sys
from types import SimpleNamespace

import pytest

from noria_py.spark import SparkUnavailableError, check_worker_python


def _spark(master: str, python: str) -> SimpleNamespace:
    return SimpleNamespace(sparkContext=SimpleNamespace(master=master, pythonExec=python))


def test_a_worker_python_without_noria_py_is_refused_with_the_fix() -> None:
    bare = "/usr/bin/python3" if shutil.which("/usr/bin/python3") else None
    if bare is None:
        pytest.skip("no system Python to stand for one outside the virtual environment")
    with pytest.raises(SparkUnavailableError, match="spark.pyspark.python"):
        check_worker_python(_spark("local[2]", bare))


def test_the_projects_python_and_remote_workers_pass() -> None:
    check_worker_python(_spark("local[*]", sys.executable))
    check_worker_python(_spark("spark://elsewhere:7077", "/usr/bin/python3"))
