"""Recovery in the ``falkirk`` regime: the rollback frontier, a fixed point over the
graph of each node's spans given its policy and its neighbours' spans, then only the
nodes it sets below ⊤ restored, the logs resending what their receivers had not taken
(``runtime/falkirk.py`` says which spans each policy keeps and why the frontier is
consistent).

Every failed node comes back in one recovery, as in the other rollback regimes
(``coordinated.roll_back`` does the rest: the failed check, the lineage rebuild when no
span covers the graph, the time). A frontier that cannot be found (a node needed below
its oldest span) or that the final check finds inconsistent is a ``RecoveryError`` with
every node left as it was.
"""
from __future__ import annotations

from ..errors import RecoveryError
from ..graph import Graph
from ..runtime import Runtime
from ..runtime.falkirk import FalkirkRuntime
from .coordinated import roll_back
from .report import RecoveryReport


def recover(graph: Graph, rt: Runtime, node_id: str) -> RecoveryReport:
    """Bring every failed node back along the rollback frontier; the report is about
    ``node_id`` (``rt.last_frontier``: the fixed point's passes and every span)."""
    if not isinstance(rt, FalkirkRuntime):
        raise RecoveryError("falkirk recovery needs a database opened with "
                            "connect(regime='falkirk') or a dict of per-node policies")
    done, seconds = roll_back(graph, rt, node_id)
    pt = done.line.get(node_id)
    return RecoveryReport(node=node_id, strategy="falkirk", seconds=seconds,
                          replayed_messages=done.messages, rows=done.rows,
                          checkpoint=None if pt is None else pt.time,
                          rolled_back=list(done.line))
