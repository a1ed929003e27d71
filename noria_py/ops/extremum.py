"""MIN and MAX per group.

The same grouped machinery as ``aggregate``, with accumulators that keep every value
of the group in a sorted multiset (sortedcontainers), so deleting the current extreme
yields the next one without asking upstream for the group again.
"""
from __future__ import annotations

from .aggregate import Aggregate


class Extremum(Aggregate):
    kind = "extremum"
