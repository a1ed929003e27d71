"""Without PySpark installed, the Spark features say how to install it (issue 25): a
``pyspark`` that fails to import stands in for a missing one, in a fresh process."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import noria_py


def run(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "fake" / "pyspark"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named pyspark')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path / "fake"), str(Path(noria_py.__file__).parents[1])])}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def test_register_and_load_give_the_install_hint(tmp_path: Path) -> None:
    data = tmp_path / "state"
    with noria_py.connect(data_dir=str(data)) as db:
        db.execute("CREATE TABLE vote (a INT, b INT)")
    csv = tmp_path / "v.csv"
    csv.write_text("a,b\n1,2\n")
    done = run(tmp_path, f"""
import sys
import noria_py.spark as spark
from noria_tools.cli import main
try:
    spark.register(None)
except spark.SparkUnavailableError as exc:
    print("register:", exc)
sys.exit(main(["load", "vote", {str(csv)!r}, "--data-dir", {str(data)!r}, "--engine", "spark"]))
""")
    assert done.returncode == 1, done.stderr
    assert "register: PySpark is not installed: pip install 'noria-py[spark]'" in done.stdout
    assert "noria-py load: PySpark is not installed" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_small_load_needs_no_pyspark(tmp_path: Path) -> None:
    data = tmp_path / "state"
    with noria_py.connect(data_dir=str(data)) as db:
        db.execute("CREATE TABLE vote (a INT, b INT)")
    csv = tmp_path / "v.csv"
    csv.write_text("a,b\n1,2\n3,4\n")
    done = run(tmp_path, f"""
import sys
from noria_tools.cli import main
sys.exit(main(["load", "vote", {str(csv)!r}, "--data-dir", {str(data)!r}, "-q"]))
""")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("loaded 2 rows into vote")
    with noria_py.connect(data_dir=str(data)) as db:
        assert sorted(db.execute("SELECT * FROM vote").fetchall()) == [(1, 2), (3, 4)]
