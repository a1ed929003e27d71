"""A partial view's hit in a quiet loop (docs/partial.md, "Figures").

The vote view over 20,000 articles and 100,000 votes; 1,000 articles read once (filled),
then ``lookup`` of those 1,000 in a loop: the CPU time a lookup, the minimum of 40
passes (other jobs on a shared machine move it less than wall time), for a partial and
a full database. Run it with the tree to measure on ``PYTHONPATH``:

    cd /tmp && PYTHONPATH=<tree> <venv>/bin/python -m noria_tools.hitloop
"""
from __future__ import annotations

import random
import time

import noria_py
from noria_tools import workloads


def hit_us(partial: bool, passes: int = 40, n: int = 1000) -> float:
    """The CPU µs of one hit of the vote view (the minimum over ``passes`` loops)."""
    db = noria_py.connect(partial=partial)
    workloads.setup(db, 20000)
    db.table("vote").insert([(i * 7919 % 20000, i) for i in range(100000)])
    v = db.view(workloads.VIEW_NAME)
    keys = random.Random(1).sample(range(20000), n)
    v.lookup_many(keys)
    lookup = v.lookup
    best = float("inf")
    for _ in range(passes):
        start = time.process_time()
        for k in keys:
            lookup(k)
        best = min(best, (time.process_time() - start) / n)
    return best * 1e6


def main() -> None:
    print(f"partial {hit_us(True):.3f} us  full {hit_us(False):.3f} us")


if __name__ == "__main__":
    main()
