"""Python's cyclic garbage collector against a large, long-lived engine state.

Every full collection walks every tracked container: with millions of rows held in
dictionaries, one takes a few hundred milliseconds, and they come more often as the
state grows. That pause is the tail of every latency measured here (docs/benchmarks.md,
Figure 3: at 10% load, p99 283 ms with the default policy, 0.57 ms with this one). The engine's
state has no reference cycles to collect, so after loading: move everything that exists
into the permanent generation (``gc.freeze``), and collect the young generations less
often. New cycles (there are few) are still collected.
"""
from __future__ import annotations

import gc


def tune_gc(young: int = 100_000) -> None:
    """Call after loading (or periodically in a long-running server); affects the whole
    process, which is why the engine does not do it on its own."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(young, 50, 1000)
