"""register(spark) says which line to add when Spark's Python workers cannot import
noria_py (a session started outside the virtual environment), instead of a
ModuleNotFoundError in every task; and a real session started that way works once the
line is added."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from noria_py.spark import SparkUnavailableError, check_worker_python
from tests import needs


def _spark(master: str, python: str) -> SimpleNamespace:
    return SimpleNamespace(sparkContext=SimpleNamespace(master=master, pythonExec=python))


def test_a_worker_python_without_noria_py_is_refused_with_the_fix() -> None:
    bare = "/usr/bin/python3" if shutil.which("/usr/bin/python3") else None
    if bare is None:
        pytest.skip("no system Python to stand for one outside the virtual environment")
    with pytest.raises(SparkUnavailableError, match="PYSPARK_PYTHON"):
        check_worker_python(_spark("local[2]", bare))


def test_the_projects_python_and_remote_workers_pass() -> None:
    check_worker_python(_spark("local[*]", sys.executable))
    check_worker_python(_spark("spark://elsewhere:7077", "/usr/bin/python3"))


JOB = '''
import os
import sys
from pyspark.sql import SparkSession
import noria_py
from noria_py.spark import SparkUnavailableError, register

data_dir = sys.argv[1]
spark = SparkSession.builder.master("local[1]").getOrCreate()    # as a user would
try:
    register(spark)
except SparkUnavailableError as exc:
    print("REFUSED:", exc)
spark.stop()
os.environ["PYSPARK_PYTHON"] = sys.executable                    # the fix it names
spark = SparkSession.builder.master("local[1]").getOrCreate()
register(spark)
db = noria_py.connect(data_dir=data_dir)
db.execute("CREATE TABLE t (k INT, v TEXT)")
db.close()
df = spark.createDataFrame([(1, "a"), (2, "b")], "k int, v string")
df.write.format("noria").option("data_dir", data_dir).option("table", "t").mode("append").save()
read = spark.read.format("noria").option("data_dir", data_dir).option("table", "t").load()
print("ROWS:", sorted(tuple(r) for r in read.collect()))
spark.stop()
'''


@pytest.mark.slow           # (45 s: two Spark sessions in a fresh process)
@pytest.mark.spark
def test_a_users_own_session_outside_the_virtual_environment(tmp_path: Path) -> None:
    """A script that starts its own SparkSession with the virtual environment not
    activated (PATH without it, no PYSPARK_PYTHON: Spark's workers would run the
    system's Python): register() refuses, naming the fix; with the fix, the same
    script writes a DataFrame into a table and reads it back."""
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system is None or shutil.which("java") is None:
        needs.missing("a system Python 3 (outside the virtual environment) and Java")
    if subprocess.run([system, "-c", "import noria_py"], cwd=tmp_path,
                      capture_output=True).returncode == 0:
        needs.missing(f"{system} imports noria_py: it cannot stand for a Python without it")
    (tmp_path / "job.py").write_text(JOB)
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"
    done = subprocess.run([sys.executable, "job.py", str(tmp_path / "data")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "REFUSED:" in done.stdout and "PYSPARK_PYTHON" in done.stdout, done.stdout
    assert "ROWS: [(1, 'a'), (2, 'b')]" in done.stdout, done.stdout
