"""``noria-py bench partial``: partial readers against full ones (docs/partial.md).

One table ``t (a INT, b INT)`` of ``--rows`` rows over ``--keys`` values of ``a`` and a
parameterized view on ``a`` (``--view rows``: ``SELECT b FROM t WHERE a = ?``, several
rows a key; ``--view count``: ``COUNT(*) ... GROUP BY a``, one; ``--view vote``: the
vote view, ``--keys`` articles LEFT JOIN the votes' counts, ``--rows`` votes). For each mode (full,
partial): the view is created, the rows are written in batches of ``--batch`` (timed:
"load"), ``--read`` of the keys are read once (misses in partial mode: upqueries) and
once more (hits), then ``--more`` further rows are written (timed: "writes after
reads": a partial reader drops the writes to keys it does not hold). Reported per mode:
the views' bytes (``db.memory(bases=False)``, the readers and, for ``count``, the
aggregate), the base's (its upquery index included), the medians of the read
latencies and the write seconds (wall clock; for the writes after reads, CPU seconds of
the process too, steadier on a shared machine), over ``--repeat`` runs.

``--rss`` (issue 20's measure of the views' memory): each mode's run in a fresh process,
and beside it another fresh process that loads the same tables the same way with no
view; the views' RSS is the first's RSS after the reads less the second's, both read
after a full collection and ``malloc_trim``. Fresh processes on both sides, because the
bench's own process has imported every bench (tens of MB the runs would not share).
``--memory-limit BYTES``: partial mode under that limit, every key read once in a
random order, RSS sampled every ``--every`` reads, against the tables-only process's.
"The tables only" (``baselines``) is the tables and the engine's compiled kernels
(code any process loads once, whatever the data: its first table's clocks load them),
with the upquery index a partial view's first miss builds (``build_index``), which the
issue puts with the base tables ("base tables keep indexes for the keys upqueries
need"; ``memory_limit`` bounds "the views' state (base tables not included)"): the
headline. The readings with the index as the views' (the strictest about the index),
the kernels as the views', and both, are printed beside it.
Every answer read is checked against the rows the bench wrote (``check``): a wrong one
fails the run.

``--dist zipf`` (``--zipf-s S``): the reads are drawn from a Zipf distribution over the
keys instead of distinct keys uniformly (``read_order``), as many reads; a key's first
read is a miss in partial mode, its later ones hits. The first-read column is then the
median of the first reads of each key, the second-read column of every read of a key
read before (with ``uniform`` these are the two passes, as before the option). Also
reported, before the table: the distinct keys read and the hit share (the reads of a
key read before), medians over the runs.
``--plot PATH``: instead, the views' bytes against the share of the keys read
(``--shares``), partial mode with uniform and with Zipf reads, and full mode (``sweep``:
one load a line, each share's reads a prefix of one read order), drawn with
``bench.plot_lines``.
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import gc
import multiprocessing
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from noria_py import connect
from noria_py.tuning import COMPACT_AT
from noria_tools import workloads
from noria_tools.bench import plot_lines

VIEWS = {
    "rows": "SELECT b FROM t WHERE a = ?",
    "count": "SELECT a, COUNT(*) AS n FROM t WHERE a = ? GROUP BY a",
}


def _timed_inserts(db, table, chunks: list) -> tuple[float, float]:
    """Seconds to insert ``chunks`` into ``table`` and see them through every view: wall
    clock, and this process's CPU time (steadier on a machine other jobs share)."""
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    for c in chunks:
        table.insert(c)
    db.wait()
    return time.perf_counter() - start, time.process_time() - cpu


def rss(trim: bool = True) -> int:
    """This process's resident set in bytes (``/proc/self/statm``); with ``trim``, after
    a full collection and glibc's ``malloc_trim`` hand freed memory back to the system,
    so two readings compare what is live rather than what the allocator kept."""
    if trim:
        gc.collect()
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):    # not glibc: the reading is untrimmed
            pass
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _rows(rows: int, more: int, keys: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, keys, rows + more), rng.integers(0, 1 << 30, rows + more)],
                    axis=1).astype(np.int64)


def _chunks(data: np.ndarray, lo: int, hi: int, batch: int) -> list[list[tuple]]:
    return [[tuple(r) for r in data[i:min(i + batch, hi)].tolist()] for i in range(lo, hi, batch)]


def _schema(db, view: str, keys: int, views: bool = True) -> tuple[str, str]:
    """Create the bench's tables (and, with ``views``, its view); (table, view name)."""
    if view == "vote":                  # the vote view: article LEFT JOIN counts, by id
        for sql in workloads.SCHEMA:
            db.execute(sql)
        if views:
            db.execute(workloads.VIEW)
        db.table("article").insert(workloads.articles(keys))
        return "vote", workloads.VIEW_NAME
    db.execute("CREATE TABLE t (a INT, b INT)")
    if views:
        db.execute(f"CREATE VIEW v AS {VIEWS[view]}")
    return "t", "v"


def expected_counts(data: np.ndarray, keys: int) -> np.ndarray:
    """Rows (votes) a key among ``data``'s: what every answer is checked against."""
    return np.bincount(data[:, 0], minlength=keys)


def check(view: str, key: int, answer: list, counts: np.ndarray) -> None:
    """Raise ``AssertionError`` unless ``answer`` (a lookup of ``key``) is right for the
    rows written, ``counts`` rows a key: ``rows`` that many rows, ``count`` that count
    (no row for 0), ``vote`` the article with that many votes (NULL for 0)."""
    n = int(counts[key])
    if view == "rows":
        ok = len(answer) == n
    elif view == "count":
        ok = answer == ([(key, n)] if n else [])
    else:
        ok = answer == [(key, f"article {key}", n if n else None)]
    if not ok:
        raise AssertionError(f"wrong answer for key {key}: {answer!r}, expected {n} rows a key")


#: the Zipf exponent of ``--dist zipf`` by default: the one Noria's vote benchmark drew
#: its keys with (Gjengset's PhD thesis, MIT 2021, §6.4: "90% of requests access 1% of
#: keys across 10M stories", alpha 1.15; docs/partial.md, "Beside Noria's figures")
ZIPF_S = 1.15
DISTS = ("uniform", "zipf")


def read_order(keys: int, n: int, seed: int, dist: str = "uniform",
               zipf_s: float = ZIPF_S) -> np.ndarray:
    """The ``n`` keys read, in order, drawn by numpy (seeded). ``uniform``: ``n``
    distinct keys (``choice`` without replacement, in a random order: the draw of the
    figures before ``--dist``, so they stay comparable; a prefix is again a uniform
    sample). ``zipf``: ``n`` reads, the key of rank k with probability proportional to
    1/k^zipf_s among ``keys`` (bounded, unlike ``numpy.random.zipf``), the ranks given
    to the keys by a seeded permutation (the hot keys spread over the key range, not
    bunched at the low ids, where a dense array's layout would favour them)."""
    rng = np.random.default_rng(seed)
    if dist == "uniform":
        return rng.choice(keys, n, replace=False)
    if dist != "zipf":
        raise ValueError(f"unknown read distribution {dist!r} (one of {DISTS})")
    p = 1.0 / np.arange(1, keys + 1, dtype=np.float64) ** zipf_s
    ranks = rng.choice(keys, n, p=p / p.sum())
    return rng.permutation(keys)[ranks]


def repeats(order: np.ndarray) -> np.ndarray:
    """A mask of ``order``'s reads whose key was read before in it (hits in partial
    mode without a memory limit; none with ``uniform`` reads)."""
    _, first = np.unique(order, return_index=True)
    out = np.ones(len(order), dtype=bool)
    out[first] = False
    return out


def _reads(data: np.ndarray, rows: int, keys: int, read: float, seed: int,
           dist: str = "uniform", zipf_s: float = ZIPF_S) -> tuple:
    """What ``one_run`` holds besides the database while it reads: the answers' counts,
    the keys it reads and their times (``tables_rss`` holds them too: they are the
    bench's, not the views'; 13.5 MB at 1M keys, 10% read). The keys are drawn by numpy:
    ``random.sample`` of ``range(keys)`` makes a list of every key, whose int objects,
    freed, left 25 MB of free blocks in the interpreter's allocator at 1M keys (RSS the
    reads' own objects then took without growing it). The keys are ``read_order``'s
    (``read`` times ``keys`` reads), with a mask of those that repeat a key (a byte a
    read; ``tables_rss``'s uniform reads have one of the same length)."""
    counts = expected_counts(data[:rows], keys)
    order = read_order(keys, max(1, int(keys * read)), seed, dist, zipf_s)
    read_keys = order.tolist()
    return (counts, read_keys, repeats(order), np.empty(len(read_keys)),
            np.empty(len(read_keys)))


#: the base table and column (its position) each view's upqueries read by an index of
#: the base's own (``Base.index_rows``): the vote view's COUNT reads ``vote`` on
#: ``article_id``; its join reads ``article`` on ``id``, its primary key, whose map
#: the table keeps anyway
UPQUERY_INDEX = {"vote": ("vote", 0), "rows": ("t", 0), "count": ("t", 0)}


def build_index(db, view: str) -> int:
    """Build the upquery index ``view``'s first miss builds on its base (``UPQUERY_INDEX``)
    directly, with no view: its bytes (the bases' ``db.memory`` growth). Part of "the
    tables" (docs/partial.md, "RSS under ``memory_limit``"): a partial view's base keeps
    it whatever is read and however little, and ``memory_limit`` bounds the views."""
    table, col = UPQUERY_INDEX[view]
    before = sum(db.memory().values())
    db.graph_[db._tables[table].node].op.index_rows((col,), (0,))
    return sum(db.memory().values()) - before


def warm_kernels(partial: bool, view: str) -> None:
    """Run what loads the engine's compiled kernels (numba's tree-clock code: once a
    process, whatever the data) on a connection of its own, closed after: the view
    created on one key, read, written in columnar batches past the diff log's
    compaction (``tuning.COMPACT_AT`` messages), read again. The first run of a tree
    compiles them into its ``__pycache__`` (tens of MB more, once): ``main`` runs this
    in a child first, so that no measured process is the one that compiles."""
    db = connect(partial=partial)
    table, name = _schema(db, view, 1)
    db.view(name).lookup(0)
    t = db.table(table)
    rows = [(0, i) for i in range(40)]
    for _ in range(2 * COMPACT_AT):
        t.insert(rows)
    db.wait()
    db.view(name).lookup(0)
    db.close()


def tables_rss(partial: bool, rows: int, more: int, keys: int, view: str, batch: int,
               seed: int, read: float = 0.0, limit: bool = False) -> dict[str, int]:
    """RSS of a process holding the bench's tables only: the same connection, schema and
    load as ``one_run``'s (``limit_run``'s with ``limit``), no view (run it in a fresh
    process: ``in_child``), and the same objects of the bench's own as that run holds
    while it reads (``_reads``, ``_limit_reads``). Read five times, in this order: after
    the imports and ``connect`` (``bare``); after ``warm_kernels`` (``code``: the
    engine's compiled kernels, numba's machine code and its modules, tens of MB that any
    process loads once whatever the data: the first table's clocks load the compaction
    kernel, a view's first run the rest); after the tables' load (``tables``: the
    baseline of issue 20's measures, docs/partial.md "Figures"); with the upquery index
    a partial view's first miss builds (``indexed``, ``build_index``; partial mode
    only: ``index_bytes``, its ``db.memory``); after ``warm_kernels`` once more
    (``rewarmed``: a check that ``code`` held all a view loads, a second view costing
    the process nothing more). The kernels load before the tables because the tables
    cannot be built without them (their clocks load them): "the tables without the
    kernels" is ``tables`` less ``code - bare``."""
    bare = rss()
    warm_kernels(partial, view)
    code = rss()
    db = connect(partial=partial)
    table, _ = _schema(db, view, keys, views=False)
    data = _rows(rows, more, keys, seed)
    chunks = _chunks(data, 0, rows, batch)
    _timed_inserts(db, db.table(table), chunks)
    del chunks
    if limit:
        bench: tuple | None = _limit_reads(data, keys, seed)
    else:
        bench = _reads(data, rows, keys, read, seed) if read else None
    tables = rss()
    index = build_index(db, view) if partial else 0
    indexed = rss()
    warm_kernels(partial, view)
    rewarmed = rss()
    del bench
    return {"bare": bare, "code": code, "tables": tables, "indexed": indexed,
            "rewarmed": rewarmed, "index_bytes": index}


def baselines(t: dict[str, int]) -> dict[str, int]:
    """The four baselines a process's RSS is measured against, from ``tables_rss``'s
    readings, by what counts as the tables' (the rest is the views'): ``code+index``,
    the headline (``HEADLINE``: the tables with their upquery index and the engine's
    compiled kernels: measured), ``code`` (the index the views': measured before
    ``build_index``), ``none`` (the tables alone: the kernels and the index the
    views') and ``index`` (the tables and their index, the kernels the views'); the
    last two less the kernels' RSS."""
    kernels = t["code"] - t["bare"]
    return {"code": t["tables"], "code+index": t["indexed"], "none": t["tables"] - kernels,
            "index": t["indexed"] - kernels}


#: the headline's baseline (``baselines``): the tables with their upquery index and
#: the engine's kernels
HEADLINE = "code+index"
#: ``baselines``' keys, the headline first, and how the printed tables name them
READINGS = {HEADLINE: "kernels the code's, index the tables' (headline)",
            "code": "kernels the code's, index the views'",
            "none": "kernels and index the views'",
            "index": "kernels the views', index the tables'"}


def in_child(fn, *args):
    """``fn(*args)`` in a fresh interpreter (spawned: nothing inherited from this one, so
    two such runs import the same modules and differ only in what ``fn`` builds)."""
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as ex:
        return ex.submit(fn, *args).result()


def rss_run(partial: bool, rows: int, keys: int, read: float, more: int, view: str,
            batch: int, seed: int, dist: str = "uniform",
            zipf_s: float = ZIPF_S) -> dict[str, float]:
    """``one_run`` with ``measure_rss``, and ``tables_rss``, each in a fresh process:
    issue 20's "process RSS minus the same process with the tables only", the first's
    RSS after the reads less each of ``baselines`` (``views_rss`` the headline, less
    the tables, their index and the kernels; ``views_rss_<reading>`` the others). The pieces:
    ``kernels_rss`` (the tables-only process's RSS grown by ``warm_kernels``),
    ``index_rss`` (grown by ``build_index``; 0 in full mode) and ``rewarm_rss`` (grown by
    a second ``warm_kernels``: about 0 if the kernels are once a process)."""
    out = in_child(one_run, partial, rows, keys, read, more, view, batch, seed, True, dist, zipf_s)
    t = in_child(tables_rss, partial, rows, more, keys, view, batch, seed, read)
    base = baselines(t)
    return out | {"tables_rss": t["tables"], "kernels_rss": t["code"] - t["bare"],
                  "index_rss": t["indexed"] - t["tables"],
                  "rewarm_rss": t["rewarmed"] - t["indexed"],
                  "views_rss": out["rss"] - base[HEADLINE]} | {
        f"views_rss_{k}": out["rss"] - b for k, b in base.items() if k != HEADLINE}


def one_run(partial: bool, rows: int, keys: int, read: float, more: int, view: str,
            batch: int, seed: int, measure_rss: bool = False, dist: str = "uniform",
            zipf_s: float = ZIPF_S) -> dict[str, float]:
    """One mode's run (module docstring); with ``measure_rss``, also the process's RSS
    after the reads, before the writes after them (``rss``). The reads' medians: of
    the first read of each key (``first_read_us``: misses in partial mode), and of
    every read of a key read before, in both passes (``second_read_us``: hits)."""
    db = connect(partial=partial)
    table, name = _schema(db, view, keys)
    data = _rows(rows, more, keys, seed)
    chunks = _chunks(data, 0, rows, batch)
    t = db.table(table)
    load, _ = _timed_inserts(db, t, chunks)
    del chunks
    v = db.view(name)
    counts, read_keys, repeat, first, second = _reads(data, rows, keys, read, seed, dist, zipf_s)
    for i, k in enumerate(read_keys):
        s = time.perf_counter()
        got = v.lookup(k)
        first[i] = time.perf_counter() - s
        check(view, k, got, counts)
    for i, k in enumerate(read_keys):
        s = time.perf_counter()
        got = v.lookup(k)
        second[i] = time.perf_counter() - s
        check(view, k, got, counts)
    after = rss() if measure_rss else 0
    later = _chunks(data, rows, rows + more, batch)
    writes, writes_cpu = _timed_inserts(db, t, later)
    kinds = {n["id"]: n["kind"] for n in db.graph()}
    mem = db.memory()
    out = {"load_s": load, "writes_s": writes, "writes_cpu_s": writes_cpu,
           "first_read_us": float(np.median(first[~repeat])) * 1e6,
           "second_read_us": float(np.median(np.concatenate([first[repeat], second]))) * 1e6,
           "distinct": int((~repeat).sum()), "hit_share": float(repeat.mean()),
           "views_bytes": sum(b for n, b in mem.items() if kinds[n] != "base"),
           "base_bytes": sum(b for n, b in mem.items() if kinds[n] == "base")}
    if measure_rss:
        out["rss"] = after
    db.close()
    return out


def sweep(partial: bool, rows: int, keys: int, view: str, batch: int, seed: int,
          shares: list[float], dist: str = "uniform",
          zipf_s: float = ZIPF_S) -> dict[float, tuple[float, int]]:
    """For each of ``shares`` (ascending), after ``shares * keys`` reads: (the share of
    the keys read at least once, the views' bytes, ``db.memory(bases=False)`` summed).
    One load; the reads are prefixes of one ``read_order`` of ``max(shares) * keys``
    reads, each answer checked (``check``), so each share's state is what a run reading
    that many would hold (no ``memory_limit``: nothing is evicted)."""
    db = connect(partial=partial)
    table, name = _schema(db, view, keys)
    data = _rows(rows, 0, keys, seed)
    _timed_inserts(db, db.table(table), _chunks(data, 0, rows, batch))
    v = db.view(name)
    counts = expected_counts(data, keys)
    order = read_order(keys, max(1, int(keys * max(shares))), seed, dist, zipf_s)
    seen = np.zeros(keys, dtype=bool)
    out, done = {}, 0
    for share in sorted(shares):
        n = max(1, int(keys * share))
        for k in order[done:n].tolist():
            check(view, k, v.lookup(k), counts)
        seen[order[done:n]] = True
        done = n
        out[share] = (float(seen.mean()), sum(db.memory(bases=False).values()))
    db.close()
    return out


def _limit_reads(data: np.ndarray, keys: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """What ``limit_run`` holds besides the database while it reads (``tables_rss``
    holds them too): the answers' counts and every key in a random order, as numpy
    arrays (16 bytes a key, where a list of the keys cost 40: its ints)."""
    return expected_counts(data, keys), np.random.default_rng(seed).permutation(keys)


def limit_run(rows: int, keys: int, view: str, batch: int, seed: int, limit: int,
              every: int) -> dict[str, float]:
    """Partial mode under ``memory_limit=limit``: every key read once in a random order,
    each answer checked, the RSS (untrimmed: what the system sees) sampled every
    ``every`` reads. ``start_rss`` (trimmed): after the load and the first read, which
    builds the base's upquery index (the views hold one key; ``index_bytes``, the
    bases' ``db.memory`` growth by that read). The tables-only baseline
    is ``tables_rss`` in another fresh process (``_main_limit``)."""
    db = connect(partial=True, memory_limit=limit)
    table, name = _schema(db, view, keys)
    data = _rows(rows, 0, keys, seed)
    chunks = _chunks(data, 0, rows, batch)
    _timed_inserts(db, db.table(table), chunks)
    del chunks
    v = db.view(name)
    counts, order = _limit_reads(data, keys, seed)
    first = int(order[0])
    bases = sum(db.memory().values()) - sum(db.memory(bases=False).values())
    check(view, first, v.lookup(first), counts)
    index = sum(db.memory().values()) - sum(db.memory(bases=False).values()) - bases
    start = rss()
    peak, samples, held = start, 0, 0
    s = time.perf_counter()
    for lo in range(1, keys, every):        # (a list of ``every`` keys at a time)
        for k in order[lo:lo + every].tolist():
            check(view, k, v.lookup(k), counts)
        if lo + every <= keys:
            peak, samples = max(peak, rss(trim=False)), samples + 1
            held = max(held, sum(db.memory(bases=False).values()))
    peak = max(peak, rss(trim=False))
    out = {"start_rss": start, "max_rss": peak, "index_bytes": index,
           "fixed_bytes": db._partial.fixed_bytes(),
           "max_views_bytes": held, "samples": samples + 1, "reads": keys,
           "read_s": time.perf_counter() - s}
    db.close()
    return out


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b > 0 else "n/a"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="noria-py bench partial")
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--keys", type=int, default=10_000, help="distinct values of a")
    p.add_argument("--read", type=float, default=0.01, help="share of the keys read")
    p.add_argument("--more", type=int, default=None,
                   help="rows written after the reads (default: a tenth of --rows)")
    p.add_argument("--view", choices=[*sorted(VIEWS), "vote"], default="rows",
                   help="vote: the vote view (article LEFT JOIN vote counts; --keys "
                        "articles, --rows votes)")
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--rss", action="store_true",
                   help="also the process's RSS after the reads, less a fresh process's "
                        "with the tables only (the views' RSS), per mode")
    p.add_argument("--memory-limit", dest="memory_limit", type=int, default=None,
                   metavar="BYTES", help="instead: partial mode under this memory_limit, "
                   "every key read once in a random order, RSS sampled (--every)")
    p.add_argument("--every", type=int, default=10_000, help="reads between RSS samples")
    p.add_argument("--dist", choices=DISTS, default="uniform",
                   help="the keys read: distinct keys drawn uniformly (default), or as many "
                        "reads drawn from a Zipf distribution over the keys (--zipf-s)")
    p.add_argument("--zipf-s", dest="zipf_s", type=float, default=ZIPF_S,
                   help=f"the Zipf exponent of --dist zipf (default {ZIPF_S}, Noria's vote "
                        "benchmark's)")
    p.add_argument("--plot", default=None, metavar="PATH",
                   help="instead: a PNG of the views' bytes against the share of the keys "
                        "read (--shares), partial mode with uniform and with Zipf reads, "
                        "and full mode")
    p.add_argument("--shares", default="0.01,0.05,0.1,0.25,0.5,1.0",
                   help="with --plot: the reads, as shares of --keys, comma-separated")
    a = p.parse_args(argv)
    if a.zipf_s <= 0:
        p.error(f"--zipf-s must be positive, got {a.zipf_s:g}")
    if a.plot is not None:
        try:
            a.shares = sorted({float(x) for x in a.shares.split(",")})
        except ValueError:
            p.error(f"--shares takes numbers separated by commas, got {a.shares!r}")
        if not a.shares or not all(0 < x <= 1 for x in a.shares):
            p.error(f"--shares must lie in (0, 1], got {a.shares}")
        return _main_plot(a)
    in_child(warm_kernels, True, a.view)     # (the first run of a tree compiles them)
    if a.memory_limit is not None:
        return _main_limit(a)
    more = a.rows // 10 if a.more is None else a.more
    print(f"rows={a.rows} keys={a.keys} read={a.read:g} more={more} view={a.view} "
          f"batch={a.batch} repeat={a.repeat}" + _dist_line(a))
    cols = ["views_bytes", "base_bytes", "load_s", "writes_s", "writes_cpu_s", "first_read_us",
            "second_read_us"] + (RSS_COLS if a.rss else [])
    print(f"{'mode':8}" + "".join(f"{c:>16}" for c in cols))
    meds = {}
    for partial in (False, True):
        run = functools.partial(rss_run if a.rss else one_run, dist=a.dist, zipf_s=a.zipf_s)
        runs = [run(partial, a.rows, a.keys, a.read, more, a.view, a.batch, seed)
                for seed in range(a.repeat)]
        med = {c: statistics.median(r[c] for r in runs) for c in runs[0]}
        cells = "".join(f"{med[c]:>16,.0f}" if c.endswith(("bytes", "rss")) else
                        f"{med[c]:>16.4g}" for c in cols)
        print(f"{'partial' if partial else 'full':8}" + cells)
        meds[partial] = med
    if a.rss:
        _print_rss(meds)
    return 0


#: ``rss_run``'s columns in the modes' table (the readings other than the headline
#: follow in ``_print_rss``'s)
RSS_COLS = ["kernels_rss", "tables_rss", "index_rss", "rewarm_rss", "rss", "views_rss"]


def _print_rss(meds: dict[bool, dict[str, float]]) -> None:
    """The views' RSS partial against full by each reading of "the tables only"
    (``READINGS``), the headline first; each mode's medians in ``meds``."""
    print("views' RSS (RSS after the reads less the tables-only process), by what the "
          "tables-only process holds:")
    for k, what in READINGS.items():
        col = "views_rss" if k == HEADLINE else f"views_rss_{k}"
        p, f = meds[True][col], meds[False][col]
        print(f"  {what:48} partial {_mb(p):>10}  full {_mb(f):>10}  partial/full "
              f"{_ratio(p, f)}")


def _main_limit(a: argparse.Namespace) -> int:
    print(f"rows={a.rows} keys={a.keys} view={a.view} batch={a.batch} "
          f"memory_limit={a.memory_limit} every={a.every}")
    r = in_child(limit_run, a.rows, a.keys, a.view, a.batch, 0, a.memory_limit, a.every)
    t = in_child(tables_rss, True, a.rows, 0, a.keys, a.view, a.batch, 0, 0.0, True)
    base = baselines(t)
    print(f"reads {r['reads']:,} (every key once, each answer right) in {r['read_s']:.1f} s; "
          f"{r['samples']} RSS samples")
    print(f"tables-only process (fresh)         {_mb(t['bare'])} after the imports")
    print(f"  the compiled kernels              +{_mb(t['code'] - t['bare'])} (a throwaway "
          f"view's, on a connection of its own, closed)")
    print(f"  the tables (with the kernels)     {_mb(t['tables'])} (the bench's read order "
          f"and counts too)")
    print(f"  then the upquery index            +{_mb(t['indexed'] - t['tables'])} "
          f"({_mb(t['index_bytes'])} in db.memory)")
    print(f"  then a second throwaway view      +{_mb(t['rewarmed'] - t['indexed'])} (the "
          f"kernels are once a process)")
    print(f"RSS after the load and one read     {_mb(r['start_rss'])} (the index there "
          f"{_mb(r['index_bytes'])} in db.memory)")
    print(f"max RSS while reading               {_mb(r['max_rss'])} (+{_mb(r['max_rss'] - r['start_rss'])})")
    print(f"max views' bytes (db.memory)        {_mb(r['max_views_bytes'])} (of the limit, the "
          f"slot maps and spare slots at the end: {_mb(r['fixed_bytes'])})")
    print(f"max RSS over the tables-only process, against the limit {_mb(a.memory_limit)}, by "
          f"what that process holds:")
    for k, what in READINGS.items():
        over = r["max_rss"] - base[k]
        print(f"  {what:48} {_mb(over):>10}  within the limit: "
              f"{'yes' if over <= a.memory_limit else 'no'}")
    return 0


def _dist_line(a: argparse.Namespace) -> str:
    """With ``--dist zipf``: the reads' distribution, and the distinct keys each run
    reads and its hit share (``repeats`` of ``read_order``, as ``one_run`` draws them),
    medians over the runs' seeds, on a line of their own; else nothing."""
    if a.dist == "uniform":
        return ""
    n = max(1, int(a.keys * a.read))
    hits = [float(repeats(read_order(a.keys, n, seed, a.dist, a.zipf_s)).sum())
            for seed in range(a.repeat)]
    h = statistics.median(hits)
    return (f" dist={a.dist} zipf_s={a.zipf_s:g}\n{n:,} reads a run: {n - h:,.0f} distinct "
            f"keys ({(n - h) / a.keys:.2%} of the keys), hit share {h / n:.3f} (medians)")


def _main_plot(a: argparse.Namespace) -> int:
    """``--plot``: ``sweep`` for partial mode with uniform and with Zipf reads, and for
    full mode (uniform reads: its views hold every key whatever is read), printed as a
    table and drawn against the share of the keys read at least once."""
    label = f"Zipf s={a.zipf_s:g}"
    print(f"rows={a.rows} keys={a.keys} view={a.view} batch={a.batch} shares={a.shares} "
          f"zipf_s={a.zipf_s:g}")
    runs = {f"partial, {d}": sweep(True, a.rows, a.keys, a.view, a.batch, 0, a.shares, d,
                                   a.zipf_s) for d in DISTS}
    runs["full, uniform"] = sweep(False, a.rows, a.keys, a.view, a.batch, 0, a.shares)
    print(f"{'reads/keys':>10} {'full bytes':>14} {'uniform: read':>14} {'bytes':>14} "
          f"{'/ full':>7} {'zipf: read':>11} {'bytes':>14} {'/ full':>7}")
    for share in a.shares:
        full = runs["full, uniform"][share][1]
        (ur, ub), (zr, zb) = (runs[f"partial, {d}"][share] for d in DISTS)
        print(f"{share:>10g} {full:>14,} {ur:>14.4f} {ub:>14,} {_ratio(ub, full):>7} "
              f"{zr:>11.4f} {zb:>14,} {_ratio(zb, full):>7}")
    lines = {k.replace("zipf", label): {r: b / 1e6 for r, b in pts.values()}
             for k, pts in runs.items()}
    plot_lines(lines, a.plot, f"views' memory, {a.view} view, {a.keys:,} keys, {a.rows:,} rows",
               "share of the keys read (at least once)", "views' bytes (MB, db.memory)")
    print(f"plot written to {a.plot}")
    return 0
