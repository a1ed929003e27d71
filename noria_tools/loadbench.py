"""``noria-py bench load``: `noria-py load` from Parquet against Table.insert of the same
rows (docs/benchmarks-spark.md).

    .venv/bin/noria-py bench load --rows 1000000 --repeat 3

Each run starts from a fresh data dir holding the vote table (no views). `load` is timed
as the whole command in a new process (Spark start-up included) and, separately, its
in-process phases; `insert` is Table.insert of the same rows, 100,000 per call (the
loader's batch size), fsynced write-ahead log in both.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import noria_py


def fresh(root: Path, name: str) -> str:
    d = root / name
    shutil.rmtree(d, ignore_errors=True)
    db = noria_py.connect(data_dir=str(d))
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.close()
    return str(d)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="noria-py bench load")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[*]")
    a = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="noria-load-bench-"))
    n = a.rows
    table = pa.table({"article_id": pa.array([i % 100_000 for i in range(n)], pa.int64()),
                      "user_id": pa.array(range(n), pa.int64())})
    path = root / "votes.parquet"
    pq.write_table(table, path)
    rows = list(zip(table.column(0).to_pylist(), table.column(1).to_pylist()))
    res: dict[str, list[float]] = {"insert": [], "load_cmd": [], "load_inproc": []}
    for i in range(a.repeat):
        d = fresh(root, f"ins{i}")
        db = noria_py.connect(data_dir=d)
        t = time.perf_counter()
        tab = db.table("vote")
        for s in range(0, n, 100_000):
            tab.insert(rows[s:s + 100_000])
        res["insert"].append(time.perf_counter() - t)
        db.close()

        d = fresh(root, f"cmd{i}")
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "noria_tools.cli", "load", "vote", str(path),
                        "--data-dir", d, "--master", a.master, "-q"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        res["load_cmd"].append(time.perf_counter() - t)

    from noria_py.spark import get_session
    from noria_py.spark.load import load
    spark = get_session(a.master)
    load("vote", [str(path)], data_dir=fresh(root, "warm"), spark=spark, progress=False)
    phases = []
    for i in range(a.repeat):
        d = fresh(root, f"inproc{i}")
        rep = load("vote", [str(path)], data_dir=d, spark=spark, progress=False)
        assert rep.rows == n
        res["load_inproc"].append(rep.seconds)
        phases.append(rep.phases)
    med = {k: statistics.median(v) for k, v in res.items()}
    out = {"rows": n, "runs": res, "median_s": med,
           "rows_per_s": {k: n / v for k, v in med.items()},
           "phases_median_s": {k: statistics.median(p[k] for p in phases) for k in phases[0]}}
    print(json.dumps(out, indent=1))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
