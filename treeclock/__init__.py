"""Constant-size tree clocks (Yuan, "Scalable fault tolerance for streaming dataflow").

Every dataflow node keeps a *tree clock*: an inverted tree rooted at the node
whose paths are the paths a message could take through the dataflow to reach
it, each holding an integer time. On receipt a node builds a *diff* (its own
time + 1 at the root, the sender's last diff under the sender), logs it and
merges it into its clock; every message it sends carries its last diff. Cut at
depth ``d``, clocks and diffs have a constant size, and they hold exactly what
recovery of a failed node needs (``min_time``, ``t_star``).

Two implementations with the same operations and the same results:

* :class:`TreeClocks` (here): flat ``int64`` numpy arrays in a per-node
  :class:`Layout`, Numba kernels; what the engine uses.
* :class:`ReferenceTreeClocks` (:mod:`treeclock.reference`): dicts of
  path -> time in plain Python, obviously correct; what the tests check the
  fast one against.

Both take ``(parents, depth)``, where ``parents`` maps each node id (a small
int) to the tuple of its parents, and raise :class:`TreeClockError` (a
``ValueError``) on bad input. See ``docs/treeclock.md``.
"""

from .clocks import DiffLog, PathEdge, TreeClocks, receive_path
from .codec import clock_nbytes, diff_nbytes
from .errors import TreeClockError
from .layout import Layout
from .reference import TreeClocks as ReferenceTreeClocks

__all__ = [
    "TreeClocks",
    "ReferenceTreeClocks",
    "DiffLog",
    "PathEdge",
    "receive_path",
    "Layout",
    "TreeClockError",
    "clock_nbytes",
    "diff_nbytes",
]
