"""Python's cyclic garbage collector against a large, long-lived engine state.

A full collection walks every tracked container and everything it refers to: with
100,000-entry state dicts that is 60-80 ms on this VM, each visit a cache miss, and
under the default policy the vote workload triggers dozens of them (measured with
``gc.callbacks``: 49-65% of the write time in batches of 10,000 votes, 17% in batches
of 1,000). The engine's state has no reference cycles to collect. So, after loading:
move everything that exists into the permanent generation (``gc.freeze``), keep the
young generation small (700, the default: its collections stay in cache; a large one,
tried first, made each young collection walk ~100,000 cold objects), and collect the
oldest generation rarely. New cycles (there are few) are still collected.

The engine leaves the policy to the user (``tune_gc``) with one scoped exception: a
cluster client makes a large answer of ``lookup_many`` with the collector paused for
those milliseconds, then enabled again unless the caller had disabled it
(runtime/cluster/reads.py, ``collector_paused``: nothing goes uncollected).
"""
from __future__ import annotations

import gc


def tune_gc(young: int = 700, full_every: int = 1000) -> None:
    """Call after loading (or periodically in a long-running server); affects the whole
    process, which is why the engine does not do it on its own. ``full_every``: young
    collections of the middle generation between two full collections (default 10)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(young, 10, full_every)
