"""``noria-py bench pg``: the PostgreSQL front end, measured through psycopg over loopback.

- **lookup**: a prepared ``SELECT n FROM v WHERE a = %s`` (``v`` a COUNT per ``a`` over
  ``--rows`` rows), p50 and p99 of ``--reads`` reads, against ``noria-py pg`` in its own
  process, and against a real PostgreSQL computing the view at each read (without and
  with an index on ``t(a)``) and reading a hand-materialized, indexed copy of it.
- **concurrent**: ``--clients`` connections reading for ``--seconds`` while one more
  inserts rows (100 per statement); reads per second against one client alone, and
  the errors seen (every read's answer is checked: a count never goes down).
- **subscribe**: a subscriber (``COPY (SUBSCRIBE v) TO STDOUT``) and a writer; the time
  from before each write until its line arrives, p50 and p99 of ``--changes`` writes.

Every answer is checked against the count it must be. docs/postgres.md has the figures.
"""
from __future__ import annotations

import argparse
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import noria_py
from noria_tools.postgres import Postgres, PostgresUnavailable

KEYS = 10_000


def _quantiles(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return xs[len(xs) // 2] * 1e6, xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1e6


def _serve(rows: int) -> tuple[subprocess.Popen, int, str]:
    """``noria-py pg`` over a data directory holding ``t`` and ``v``."""
    data_dir = tempfile.mkdtemp(prefix="noria-pgbench-")
    db = noria_py.connect(data_dir=data_dir)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, b TEXT)")
    db.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
    t = db.table("t")
    for i in range(0, rows, 10_000):
        t.insert([(j, j % KEYS, "x") for j in range(i, min(rows, i + 10_000))])
    db.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = [sys.executable, "-m", "noria_tools.cli", "pg", "--port", str(port),
           "--data-dir", data_dir]
    proc = subprocess.Popen(exe, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    return proc, port, f"host=127.0.0.1 port={port} user=bench dbname=noria"


def _lookups(psycopg: Any, dsn: str, sql: str, reads: int, rows: int) -> tuple[float, float]:
    per_key = {a: rows // KEYS + (1 if a < rows % KEYS else 0) for a in range(KEYS)}
    rng = random.Random(1)
    with psycopg.connect(dsn, autocommit=True) as c:
        cur = c.cursor()
        times = []
        for i in range(reads + 100):
            a = rng.randrange(KEYS)
            t0 = time.perf_counter()
            cur.execute(sql, (a,), prepare=True)
            got = cur.fetchall()
            if i >= 100:
                times.append(time.perf_counter() - t0)
            if got != [(per_key[a],)]:
                raise AssertionError(f"{sql} with a={a}: {got}, not [({per_key[a]},)]")
    return _quantiles(times)


def bench_lookup(psycopg: Any, pg: Postgres | None, noria_dsn: str, rows: int, reads: int) -> None:
    print(f"\nlookup: SELECT n FROM v WHERE a = %s, {rows:,} rows, {KEYS:,} groups, "
          f"{reads:,} reads (p50 / p99 µs)")
    p50, p99 = _lookups(psycopg, noria_dsn, "SELECT n FROM v WHERE a = %s", reads, rows)
    print(f"  noria-py pg, the view's reader         {p50:9.0f} {p99:9.0f}")
    if pg is None:
        return
    with psycopg.connect(pg.dsn, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS t CASCADE; DROP TABLE IF EXISTS m")
        c.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, a BIGINT, b TEXT)")
        c.execute(f"INSERT INTO t SELECT i, i % {KEYS}, 'x' FROM generate_series(0, {rows - 1}) i")
        c.execute("CREATE VIEW v AS SELECT a, COUNT(*) AS n FROM t GROUP BY a")
        c.execute("CREATE TABLE m AS SELECT * FROM v; CREATE INDEX ON m (a); ANALYZE")
    few = max(200, reads // 20)
    p50v, p99v = _lookups(psycopg, pg.dsn, "SELECT n FROM v WHERE a = %s", few, rows)
    print(f"  PostgreSQL, the view computed per read {p50v:9.0f} {p99v:9.0f}   "
          f"({p50v / p50:.0f}× noria-py's p50; {few} reads)")
    with psycopg.connect(pg.dsn, autocommit=True) as c:
        c.execute("CREATE INDEX ON t (a); ANALYZE")
    p50i, p99i = _lookups(psycopg, pg.dsn, "SELECT n FROM v WHERE a = %s", reads, rows)
    print(f"  PostgreSQL, the same with t(a) indexed {p50i:9.0f} {p99i:9.0f}   "
          f"({p50i / p50:.1f}×)")
    p50m, p99m = _lookups(psycopg, pg.dsn, "SELECT n FROM m WHERE a = %s", reads, rows)
    print(f"  PostgreSQL, a materialized indexed copy{p50m:9.0f} {p99m:9.0f}   "
          f"(noria-py's p50 is {p50 / p50m:.2f}× this)")


def _read_for(dsn: str, threads: int, seconds: float, out: Any) -> None:
    """One client process: ``threads`` connections reading for ``seconds``; puts
    (reads, errors) on ``out``."""
    import psycopg
    counts: list[int] = []
    errors: list[str] = []

    def reader() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as c:
                cur = c.cursor()
                seen, n_reads = 0, 0
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < seconds:
                    cur.execute("SELECT n FROM v WHERE a = %s", (KEYS - 1,), prepare=True)
                    row = cur.fetchone()
                    n = row[0] if row else 0
                    if n < seen:
                        errors.append(f"count went down: {seen} -> {n}")
                    seen = n
                    n_reads += 1
                counts.append(n_reads)
        except Exception as exc:       # noqa: BLE001 - counted and reported
            errors.append(repr(exc))

    ths = [threading.Thread(target=reader) for _ in range(threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    out.put((sum(counts), errors))


def bench_concurrent(psycopg: Any, dsn: str, clients: int, seconds: float) -> None:
    """Readers in client processes of their own (at most 10, threads in each), so the
    clients' own Python does not bound the figure."""
    import multiprocessing

    def run(n: int, write: bool) -> tuple[float, list[str]]:
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        procs = min(n, 10)
        workers = [ctx.Process(target=_read_for,
                               args=(dsn, n // procs + (1 if i < n % procs else 0), seconds, out))
                   for i in range(procs)]
        for w in workers:
            w.start()
        writes = 0
        t0 = time.perf_counter()
        if write:
            with psycopg.connect(dsn, autocommit=True) as w:
                next_id = 10 ** 9 + writes
                insert = "INSERT INTO t VALUES " + ", ".join(["(%s, %s, %s)"] * 100)
                while time.perf_counter() - t0 < seconds:
                    params = [v for j in range(100) for v in (next_id + j, KEYS - 1, "w")]
                    w.execute(insert, params, prepare=True)
                    next_id += 100
                    writes += 100
        results = [out.get() for _ in workers]
        for w in workers:
            w.join()
        total = sum(r[0] for r in results)
        errors = [e for r in results for e in r[1]]
        if write:
            print(f"  ({writes / seconds:,.0f} rows/s written meanwhile)")
        return total / seconds, errors

    print(f"\nconcurrent: reads/s, {seconds:.0f} s each")
    one, e1 = run(1, False)
    print(f"  1 client alone                          {one:9,.0f}")
    many, e2 = run(clients, True)
    print(f"  {clients} clients, one more writing          {many:9,.0f}   "
          f"({many / one:.2f}× one client alone; errors: {len(e1) + len(e2)})")
    for err in (e1 + e2)[:5]:
        print(f"    {err}")


def bench_subscribe(psycopg: Any, dsn: str, changes: int) -> None:
    arrived: dict[int, float] = {}
    ready = threading.Event()

    def subscriber() -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            try:
                with c.cursor().copy("COPY (SUBSCRIBE v) TO STDOUT") as copy:
                    for row in copy.rows():
                        ready.set()
                        if row[1] == "1" and int(row[2]) >= KEYS:
                            arrived[int(row[2])] = time.perf_counter()
                            if len(arrived) == changes:
                                c.cancel_safe()
            except psycopg.errors.QueryCanceled:
                pass

    th = threading.Thread(target=subscriber)
    th.start()
    ready.wait(60)
    sent: dict[int, float] = {}
    with psycopg.connect(dsn, autocommit=True) as w:
        for i in range(changes):
            a = KEYS + i                          # a new group: one "+1" line
            sent[a] = time.perf_counter()
            w.execute("INSERT INTO t VALUES (%s, %s, 'sub')", (2 * 10 ** 9 + i, a))
            time.sleep(0.002)
    th.join(60)
    lat = [arrived[a] - sent[a] for a in sent if a in arrived]
    if len(lat) != changes:
        raise AssertionError(f"the subscriber saw {len(lat)} of {changes} changes")
    p50, p99 = _quantiles(lat)
    print(f"\nsubscribe: write to the subscriber's line, {changes} writes: "
          f"p50 {p50 / 1e3:.2f} ms, p99 {p99 / 1e3:.2f} ms")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench pg", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--reads", type=int, default=5_000)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--changes", type=int, default=200)
    p.add_argument("--only", choices=("lookup", "concurrent", "subscribe"), default=None)
    args = p.parse_args(argv)
    try:
        import psycopg
    except ImportError:
        print("noria-py bench pg needs psycopg: pip install 'psycopg[binary]'", file=sys.stderr)
        return 2
    proc, _port, dsn = _serve(args.rows)
    try:
        pg = None
        if args.only in (None, "lookup"):
            try:
                pg = Postgres()
            except PostgresUnavailable as exc:
                print(f"(no PostgreSQL to compare with: {exc})")
            try:
                bench_lookup(psycopg, pg, dsn, args.rows, args.reads)
            finally:
                if pg is not None:
                    pg.stop()
        if args.only in (None, "concurrent"):
            bench_concurrent(psycopg, dsn, args.clients, args.seconds)
        if args.only in (None, "subscribe"):
            bench_subscribe(psycopg, dsn, args.changes)
    finally:
        proc.terminate()
        proc.wait()
    return 0
