"""What a partial vote view holds after its reads (docs/partial.md, "One key map per
path"): each partial node's arrays (and its lists' and dicts' tables), the process's
RSS growth over the reads, and of it the interpreter's small-object allocator's
blocks in use and free (``sys._debugmallocstats``).

``--keys`` articles, ``--rows`` votes written in batches of 1,000, one read to build
the base's upquery index, then ``--read`` of the articles read (keys drawn with numpy,
so that the bench's own objects are only the keys' list). Run it with the tree to
measure on ``PYTHONPATH``:

    cd /tmp && PYTHONPATH=<tree> <venv>/bin/python <tree>/noria_tools/partialstate.py \\
        --keys 1000000 --rows 1000000 --read 0.1
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from typing import Any

import numpy as np

from noria_py import connect
from noria_tools.partialbench import _chunks, _rows, _schema, rss

#: attributes that lead away from a node's own state (as noria_py/memory.py's)
_AWAY = ("owner", "manager", "path", "listeners")


def allocator() -> tuple[int, int]:
    """Bytes of the interpreter's small-object allocator in blocks in use and in free
    blocks of its pools (``sys._debugmallocstats``, which writes to stderr)."""
    with tempfile.TemporaryFile("w+") as f:
        saved = os.dup(2)
        try:
            os.dup2(f.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read()

    def value(label: str) -> int:
        m = re.search(rf"# bytes in {label} blocks\s*=\s*([\d,]+)", text)
        return int(m.group(1).replace(",", "")) if m else 0
    return value("allocated"), value("available")


def arrays(obj: Any, path: str, seen: set[int], out: list, depth: int = 0) -> None:
    """Append (path, kind, entries, bytes) for each array reached from ``obj`` (a view
    of another array left out), and for each list, dict or set of over 1,000 entries
    its table's bytes (not its items')."""
    if depth > 8 or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        if obj.base is None:
            out.append((path, str(obj.dtype), len(obj), obj.nbytes))
        return
    if isinstance(obj, (list, tuple)) and 0 < len(obj) < 20:
        for i, x in enumerate(obj):
            arrays(x, f"{path}[{i}]", seen, out, depth + 1)
        return
    if isinstance(obj, (list, dict, set)):
        if len(obj) > 1000:
            out.append((path, type(obj).__name__, len(obj), sys.getsizeof(obj)))
        return
    for k, x in getattr(obj, "__dict__", {}).items():
        if k not in _AWAY:
            arrays(x, f"{path}.{k}", seen, out, depth + 1)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--read", type=float, default=0.1)
    a = p.parse_args(argv)
    db = connect(partial=True)
    table, name = _schema(db, "vote", a.keys)
    t = db.table(table)
    for c in _chunks(_rows(a.rows, 0, a.keys, 1), 0, a.rows, 1000):
        t.insert(c)
    v = db.view(name)
    v.lookup(0)                         # (builds the base's upquery index)
    n = int(a.keys * a.read)
    before, (used0, free0) = rss(), allocator()
    for k in np.random.default_rng(1).choice(a.keys, n, replace=False).tolist():
        v.lookup(k)
    after, (used1, free1) = rss(), allocator()
    print(f"{n:,} keys read: RSS {(after - before) / 1e6:+.1f} MB; small objects: in use "
          f"{(used1 - used0) / 1e6:+.1f} MB, free blocks {(free1 - free0) / 1e6:+.1f} MB "
          f"(of it the keys' list: {(n * 40) / 1e6:.1f} MB)")
    kinds = {g["id"]: g["kind"] for g in db.graph()}
    seen: set[int] = set()
    for nid in sorted(kinds, reverse=True):
        if kinds[nid] == "base":
            continue
        found: list = []
        arrays(db.graph_[nid].op, "op", seen, found)
        found = [f for f in found if f[3] > 10_000]
        print(f"{nid} {kinds[nid]}: {sum(f[3] for f in found) / 1e6:.2f} MB in arrays")
        for path, kind, entries, size in found:
            print(f"  {path:40s} {kind:7s} {entries:>10,} {size / 1e6:6.2f} MB")


if __name__ == "__main__":
    main()
