"""Recovery in the ``uncoordinated`` and ``cic`` regimes: find a recovery line among the
nodes' local checkpoints, set back the nodes it names, resend the channel state from the
logs (``runtime/uncoordinated.py`` says how checkpoints, dependencies and logs are kept,
and why the lines are consistent).

``uncoordinated`` takes the newest consistent line: the failed nodes at their newest
checkpoint their parents' points allow, a live node kept as it is unless it took a
message its (set back) parent sent after its point (an orphan), and so on down: only
the nodes the dependencies require roll back. ``cic`` takes the line the checkpoint
indices give (the failed nodes' smallest newest index), among the failed nodes and
their descendants. Both check the line before touching a node: one with an orphan is a
``RecoveryError``, never a wrong view. Every failed node comes back in one recovery;
without a line covering the graph (a view created while a node was down) every operator
is rebuilt from the tables (``RecoveryReport.checkpoint`` None, ``rolled_back`` empty).
"""
from __future__ import annotations

from ..errors import RecoveryError
from ..graph import Graph
from ..runtime import Runtime
from ..runtime.uncoordinated import UncoordinatedRuntime
from .coordinated import roll_back
from .report import RecoveryReport


def recover(graph: Graph, rt: Runtime, node_id: str, strategy: str) -> RecoveryReport:
    """Bring every failed node back along a recovery line (``strategy``:
    "uncoordinated" or "cic", the regime's own); the report is about ``node_id``."""
    if not isinstance(rt, UncoordinatedRuntime) or rt.regime != strategy:
        raise RecoveryError(f"{strategy} recovery needs a database opened with "
                            f"connect(regime={strategy!r})")
    done, seconds = roll_back(graph, rt, node_id)
    pt = done.line.get(node_id)
    return RecoveryReport(node=node_id, strategy=strategy, seconds=seconds,
                          replayed_messages=done.messages, rows=done.rows,
                          checkpoint=None if pt is None else pt.time,
                          rolled_back=list(done.line))
