"""``noria-py bench load``: `noria-py load` on each engine against Table.insert of the
same rows (docs/benchmarks-spark.md).

    .venv/bin/noria-py bench load --rows 500 --format csv --repeat 3 --engines auto,spark --no-insert
    .venv/bin/noria-py bench load --rows 10000000 --repeat 3 --engines arrow,spark --no-insert

Each run starts from a fresh data dir holding the vote table (no views). For each engine
(``--engine`` of `noria-py load`), the whole command is timed in a new process (Python,
and for Spark the JVM, start-up included); with ``--warm``, Spark's in-process phases on
a session already running too; ``insert`` is Table.insert of the same rows, 100,000 per
call (the loader's batch size), fsynced write-ahead log in both.
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

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
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
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the vote table")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each (medians reported)")
    ap.add_argument("--master", default="local[*]", help="Spark master")
    ap.add_argument("--format", choices=["parquet", "csv"], default="parquet",
                    help="the input file's format")
    ap.add_argument("--engines", default="arrow,spark",
                    help="comma-separated --engine values of `noria-py load` to time")
    ap.add_argument("--no-insert", dest="insert", action="store_false",
                    help="skip timing Table.insert of the same rows")
    ap.add_argument("--warm", action="store_true",
                    help="also time load() in process on a Spark session already running")
    a = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="noria-load-bench-"))
    n = a.rows
    ids = np.arange(n, dtype=np.int64)
    table = pa.table({"article_id": pa.array(ids % 100_000), "user_id": pa.array(ids)})
    path = root / f"votes.{a.format}"
    if a.format == "parquet":
        pq.write_table(table, path)
    else:
        pa_csv.write_csv(table, path, pa_csv.WriteOptions(quoting_style="none"))
    engines = [e for e in a.engines.split(",") if e]
    res: dict[str, list[float]] = {"insert": []} if a.insert else {}
    for e in engines:
        res[f"load_cmd_{e}"] = []
    for i in range(a.repeat):
        if a.insert:
            rows = list(zip(table.column(0).to_pylist(), table.column(1).to_pylist()))
            d = fresh(root, f"ins{i}")
            db = noria_py.connect(data_dir=d)
            t = time.perf_counter()
            tab = db.table("vote")
            for s in range(0, n, 100_000):
                tab.insert(rows[s:s + 100_000])
            res["insert"].append(time.perf_counter() - t)
            db.close()
            del rows
        for e in engines:
            d = fresh(root, f"cmd{i}{e}")
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "noria_tools.cli", "load", "vote", str(path),
                            "--data-dir", d, "--master", a.master, "--engine", e, "-q"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            res[f"load_cmd_{e}"].append(time.perf_counter() - t)
            shutil.rmtree(d, ignore_errors=True)
    phases = []
    if a.warm:
        from noria_py.spark import get_session
        from noria_py.spark.load import load
        spark = get_session(a.master)
        load("vote", [str(path)], data_dir=fresh(root, "warm"), spark=spark, progress=False,
             engine="spark")
        res["load_inproc_spark"] = []
        for i in range(a.repeat):
            d = fresh(root, f"inproc{i}")
            rep = load("vote", [str(path)], data_dir=d, spark=spark, progress=False,
                       engine="spark")
            assert rep.rows == n
            res["load_inproc_spark"].append(rep.seconds)
            phases.append(rep.phases)
    med = {k: statistics.median(v) for k, v in res.items()}
    out = {"rows": n, "format": a.format, "input_bytes": path.stat().st_size, "runs": res,
           "median_s": med, "rows_per_s": {k: n / v for k, v in med.items()}}
    if phases:
        out["phases_median_s"] = {k: statistics.median(p[k] for p in phases) for k in phases[0]}
    print(json.dumps(out, indent=1))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
