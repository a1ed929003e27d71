"""Recovery in the ``coordinated`` regime: every node back to the last complete epoch of
barrier checkpoints, the bases replaying their write histories from there
(``runtime/coordinated.py`` says how epochs are taken and why they are consistent).

Unlike tree clocks, this touches every node, failed or not, and replays every write
since the epoch through the whole graph: its cost grows with the graph's state and with
the writes since the last complete epoch, never with the failed node alone. Without a
complete epoch covering the graph (a view was created while a node was down), every
operator is rebuilt from the tables, as a lineage pass over the whole graph does.
"""
from __future__ import annotations

import time
from typing import Any

from ..errors import RecoveryError
from ..graph import Graph
from ..planner.initialize import initialize
from ..runtime import Runtime
from ..runtime.coordinated import CoordinatedRuntime
from ..runtime.uncoordinated import UncoordinatedRuntime
from .report import RecoveryReport


def recover(graph: Graph, rt: Runtime, node_id: str) -> RecoveryReport:
    """Roll every node back to the last complete epoch (``node_id`` is the failed node
    the report is about; every other failed node comes back with it)."""
    if not isinstance(rt, CoordinatedRuntime):
        raise RecoveryError("coordinated recovery needs a database opened with "
                            "connect(regime='coordinated')")
    done, seconds = roll_back(graph, rt, node_id)
    return RecoveryReport(node=node_id, strategy="coordinated", seconds=seconds,
                          replayed_messages=done.messages, rows=done.rows,
                          checkpoint=done.epoch, rolled_back=done.nodes)


def roll_back(graph: Graph, rt: CoordinatedRuntime | UncoordinatedRuntime,
              node_id: str) -> tuple[Any, float]:
    """``rt.rollback`` after the failure of ``node_id`` (a regime that sets nodes back
    to checkpoints: ``coordinated``, ``uncoordinated``, ``cic``), the operators it
    cannot set back rebuilt from the tables (a lineage pass, then settled); what the
    rollback did, and its seconds."""
    if rt.alive(node_id):
        raise RecoveryError(f"node {node_id} has not failed; nothing to recover")
    start = time.perf_counter()

    def rebuild(nodes: set[str]) -> None:
        initialize(graph, nodes)
        rt.settle(nodes)
    done = rt.rollback(rebuild)
    return done, time.perf_counter() - start
