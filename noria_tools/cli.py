"""The ``noria-py`` command.

It lives with the tools because it dispatches to both sides: ``serve``, ``worker`` and
``load`` run the engine (``noria_py``), ``demo``, ``bench`` and ``logictest`` the tools
(``noria_tools``). Every subcommand imports what it runs only when it runs (importing
the engine takes seconds), so ``noria-py --help`` stays quick.
"""
from __future__ import annotations

import argparse
import os
import sys


def _serve(argv: list[str]) -> int:
    from noria_py.runtime.cluster.server import main as serve_main
    return serve_main(argv)


def _pg(argv: list[str]) -> int:
    from noria_py.pg.server import main as pg_main
    return pg_main(argv)


def _worker(args: argparse.Namespace) -> int:
    from noria_py.runtime.cluster.worker import main as worker_main
    if args.token:
        print("noria-py worker: warning: a --token on the command line is visible to other "
              "users (ps); prefer $NORIA_TOKEN", file=sys.stderr)
        os.environ["NORIA_TOKEN"] = args.token
    where = (["--read-host", args.read_host] if args.read_host else []) + (
        ["--read-port", str(args.read_port)] if args.read_port else [])
    return worker_main(["--join", args.join, *where])


def _demo(args: argparse.Namespace) -> int:
    from noria_tools.demo import run_demo
    return run_demo(articles=args.articles, votes=args.votes, batch=args.batch,
                    shards=args.shards, duckdb_reads=args.duckdb_reads)


def _bench(args: argparse.Namespace) -> int:
    from noria_tools.bench import BENCHES, run_bench
    if args.name is None:
        print("noria-py bench NAME [options]; NAME is one of: " + ", ".join(BENCHES)
              + " (noria-py bench NAME --help for its options)", file=sys.stderr)
        return 2
    return run_bench(args.name, args.extra)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("noria-py")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _load(args: argparse.Namespace) -> int:
    from noria_py.spark.load import main as load_main
    return load_main(args)


def _repair(args: argparse.Namespace) -> int:
    """Exit 0: nothing to repair, or repaired; 1: a dry run found something to drop;
    2: the directory cannot be repaired here (the message says why)."""
    from noria_py.client import catalog_problems
    from noria_py.storage import StorageError, repair
    try:
        plan = repair(args.data_dir, apply=args.yes, check=catalog_problems)
    except StorageError as exc:
        print(f"noria-py repair: {exc}", file=sys.stderr)
        return 2
    for line in plan.lines():
        print(line)
    if not plan.applied:
        from noria_py.runtime.ondisk import inspect
        for note in inspect(args.data_dir):
            print(f"not damage: {note} (opening does this by itself)")
    return 1 if plan.needed and not plan.applied else 0


def _logictest(args: argparse.Namespace) -> int:
    from noria_tools.logictest import main as logictest_main
    return logictest_main(args.files, mode=args.mode, verbose=args.verbose)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="noria-py", description=__doc__.partition("\n\n")[0])
    p.add_argument("--version", action="version", version=f"noria-py {_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="the vote application from the Noria paper, embedded")
    d.add_argument("--articles", type=int, default=100_000, help="articles in the table")
    d.add_argument("--votes", type=int, default=1_000_000, help="votes written, timed")
    d.add_argument("--batch", type=int, default=1_000, help="votes per insert")
    d.add_argument("--shards", type=int, default=1, help="shards of each node")
    d.add_argument("--duckdb-reads", type=int, default=300,
                   help="reads of DuckDB computing the query, to compare lookups with")
    d.set_defaults(run=_demo)

    b = sub.add_parser("bench", help="run a named benchmark (without a name: the list)")
    b.add_argument("name", nargs="?", help="the benchmark (docs/benchmarks.md)")
    b.add_argument("extra", nargs=argparse.REMAINDER, help="its options (NAME --help)")
    b.set_defaults(run=_bench)

    lt = sub.add_parser("logictest", help="run sqllogictest files")
    lt.add_argument("files", nargs="+", help="sqllogictest files")
    lt.add_argument("--mode", choices=["both", "incremental", "initial"], default="both",
                    help="views made before the data (incremental), after it (initial), or both")
    lt.add_argument("-v", "--verbose", action="store_true", help="print each failure")
    lt.set_defaults(run=_logictest)

    r = sub.add_parser("repair", help="say what dropping a data directory's damage would lose; "
                       "with --yes, drop it")
    r.add_argument("--data-dir", dest="data_dir", required=True, help="the data directory")
    r.add_argument("--yes", action="store_true",
                   help="drop it (each changed file is first copied beside itself, "
                        "NAME.damaged-<time>); without it nothing changes")
    r.set_defaults(run=_repair)

    # serve's options are the engine's own (``python -m noria_py.runtime.cluster.server``
    # takes the same): they pass through to its parser unread
    sub.add_parser("serve", help="run a cluster: a controller and worker processes",
                   add_help=False)

    sub.add_parser("pg", help="serve a database to PostgreSQL clients (psql, psycopg, ...)",
                   add_help=False)

    w = sub.add_parser("worker", help="join a running cluster as a worker")
    w.add_argument("--join", required=True, metavar="HOST:PORT", help="the cluster's controller")
    w.add_argument("--token", default=None,
                   help="default $NORIA_TOKEN, else a local server's token file")
    w.add_argument("--read-host", default=None,
                   help="address clients read its views at (default: the one it reaches "
                        "the controller from)")
    w.add_argument("--read-port", type=int, default=0, help="default: a free port")
    w.set_defaults(run=_worker)
    ld = sub.add_parser("load", help="bulk-load Parquet or CSV files into a table (small "
                        "inputs with pyarrow, large ones with Spark)")
    ld.add_argument("table", help="the table to load into (it must exist)")
    ld.add_argument("paths", nargs="+", metavar="PATH", help="Parquet or CSV files")
    ld.add_argument("--format", choices=["parquet", "csv"], default=None,
                    help="default: from the file names")
    ld.add_argument("--engine", choices=["auto", "arrow", "spark"], default="auto",
                    help="what reads and checks the rows: arrow (pyarrow in this process, no "
                         "JVM; the input is held in memory), spark (a Spark job; for large "
                         "inputs, or files not on this machine), or auto (default: arrow up "
                         "to 256 MB of input, else spark); same checks and errors either way")
    ld.add_argument("--master", default=None, help="Spark master (default local[*]; "
                    "--engine spark only)")
    where = ld.add_mutually_exclusive_group(required=True)
    where.add_argument("--data-dir", dest="data_dir", help="the database's data directory")
    where.add_argument("--server", default=None, help="a running cluster: noria://HOST:PORT")
    ld.add_argument("--token", default=None, help="the cluster's token (default $NORIA_TOKEN)")
    ld.add_argument("--skip-bad", action="store_true",
                    help="load the good rows; write the bad ones to a reject file")
    ld.add_argument("--reject-file", default=None, help="default: TABLE.rejects.csv")
    ld.add_argument("--batch-rows", type=int, default=100_000, help="rows per logged insert")
    ld.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    ld.set_defaults(run=_load)

    args, rest = p.parse_known_args(argv)
    if args.command == "serve":
        return _serve(rest)
    if args.command == "pg":
        return _pg(rest)
    if rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
