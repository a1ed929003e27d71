"""Lineage recovery with the recomputation done by a PySpark job (``strategy="spark"``).

The purge is lineage's: the failed node and everything downstream of it lose their
state. What differs is who recomputes it.

In Spark:
  - For every purged stateful node (aggregate, join, TopK, distinct, reader, ...), the
    logical relation(s) feeding each of its ports (the planner records them per node in
    ``node.inputs``) is translated into DataFrame operations / Spark SQL
    (``noria_py.spark.translate``): filters, projections, joins, aggregates, DISTINCT,
    UNION ALL, TopK as a window. That is the purged sub-plan, from its sources up.
  - Its sources are handed to Spark as Arrow tables (``spark.createDataFrame`` of a
    ``pyarrow.Table``, no pandas): the base tables' rows, and the output of intact
    stateful nodes upstream of the failure (their state is correct, exactly as
    in-engine lineage recovery reuses it).
  - Results come back with ``DataFrame.toArrow()``.

In Python (the driver, holding the engine):
  - Rows of each input are routed to the shard that owns them: a sharded node's port
    receives the rows whose partition columns hash, with ``noria_py.hashing.shard_of``
    (the engine's stable hash), to its shard.
  - Those rows go into the fresh operator through its ordinary ``process`` path, port
    by port, as ``planner.initialize`` does for a migration; so operator state that is
    more than the output (MIN/MAX multisets, join indexes, the rows behind a TopK) is
    rebuilt exactly. Stateless purged nodes (filters, sharders, unions) need nothing.

The Spark job runs before anything is purged: if Spark is missing or a construct has
no translation, recovery fails with the graph as it was (the node still failed, and
``strategy="lineage"`` still possible). The runtime is drained first, so the intact
state is a consistent cut, as in lineage recovery.

Floating-point SUM/AVG may differ from the engine's in the last bits, since Spark adds
in another order (the engine's own result depends on arrival order too).
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Hashable, cast

from sql_frontend import plan as lp

from ..batch import Batch
from ..errors import RecoveryError
from ..hashing import shard_of
from ..spark.arrow import arrow_to_rows, expand, rows_to_arrow
from .base import prepare_rebuild
from .report import RecoveryReport

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from ..client import Database
    from ..graph import Graph
    from ..ops.base import Base
    from ..runtime import Runtime

#: a relation's rows (``inputs[rel]``), and the cache of them split by shard
#: (``inputs[("__sharded", rel, key)]``: a list of rows per shard)
Inputs = dict[Hashable, list[Any]]
Partition = tuple[int, ...] | str | None     # a stream's (``planner.sharding.Stream``)


def recover(db: Database, node_id: str, spark: SparkSession | None = None) -> RecoveryReport:
    """Purge ``node_id`` and its descendants, rebuild their state with Spark."""
    start = time.perf_counter()
    graph: Graph = db.graph_
    runtime: Runtime = db.runtime
    planner = db.planner
    resent, purged, paths = prepare_rebuild(graph, runtime, (node_id,))
    if purged is None:
        return RecoveryReport(node=node_id, strategy="spark", replayed_messages=resent,
                              seconds=time.perf_counter() - start, paths=paths)
    purged_set = set(purged)
    stateful = [n for n in purged if graph[n].op.stateful]
    for nid in stateful:
        if getattr(graph[nid], "inputs", None) is None:
            raise RecoveryError(f"node {nid} ({graph[nid].kind}) does not record the relations "
                                "that feed it, so Spark cannot recompute it; use strategy='lineage'")

    if spark is None:
        from ..spark.session import get_session
        spark = get_session()
    inputs = _compute_inputs(spark, db, purged_set, stateful)

    for nid in purged:
        runtime.reset(nid)
    rows_in = 0
    shards = planner.shards
    for nid in stateful:
        node = graph[nid]
        for port, (rel, key) in enumerate(node.inputs or ()):     # (recorded: checked above)
            rows = inputs[rel]
            if node.shard is not None:
                rows = _by_shard(inputs, rel, key, shards)[node.shard]
            rows_in += len(rows)
            node.op.process(port, Batch.inserts(rows))
    runtime.settle(purged_set)
    seconds = time.perf_counter() - start
    return RecoveryReport(node=node_id, strategy="spark", seconds=seconds,
                          purged=purged, rows=rows_in, paths=paths)


def _by_shard(inputs: Inputs, rel: lp.Rel, key: Partition,
              shards: int) -> list[list[tuple[Any, ...]]]:
    cache_key = ("__sharded", rel, key)
    parts = inputs.get(cache_key)
    if parts is None:
        if not isinstance(key, tuple) or not key:
            raise RecoveryError(f"a sharded node reads a stream partitioned on {key!r}; "
                                "cannot route rows to shards: use strategy='lineage'")
        parts = [[] for _ in range(shards)]
        if len(key) == 1:
            k = key[0]
            for r in inputs[rel]:
                parts[shard_of((r[k],), shards)].append(r)
        else:
            for r in inputs[rel]:
                parts[shard_of(tuple(r[i] for i in key), shards)].append(r)
        inputs[cache_key] = parts
    return parts


def _compute_inputs(spark: SparkSession, db: Database, purged: set[str],
                    stateful: list[str]) -> Inputs:
    """Each distinct input relation of the purged stateful nodes, computed in Spark."""
    from ..spark.translate import Translator

    graph: Graph = db.graph_
    planner = db.planner
    tables = {t.schema.name.lower(): t for t in db._tables.values()}

    def leaf(relation: object) -> pa.Table | None:
        rel = cast("lp.Rel", relation)          # (what the Translator hands: a relation)
        if isinstance(rel, lp.Scan):
            entry = tables.get(rel.table.lower())
            if entry is None:
                raise RecoveryError(f"table {rel.table!r} is gone")
            base = cast("Base", graph[entry.node].op)     # a table's node
            rows = base.all_rows()
            return rows_to_arrow(rows, [c.name for c in rel.columns], [c.type for c in rel.columns])
        stream = planner.memo.get(rel)
        if stream is None or not rel.columns:      # (Arrow cannot count rows of no columns)
            return None
        nodes = [graph[s] for s in dict.fromkeys(stream.sources) if s in graph]
        if (not nodes or len(nodes) != len(set(stream.sources))
                or any(n.id in purged or not n.op.stateful or not db.runtime.alive(n.id)
                       for n in nodes)):
            return None
        # intact materialized state: its output is this relation's rows
        held: list[tuple[Any, ...]] = []
        for n in nodes:
            snap = n.op.snapshot()
            held.extend(expand(zip(snap.rows, snap.signs)))
        return rows_to_arrow(held, [c.name for c in rel.columns], [c.type for c in rel.columns])

    tr = Translator(spark, leaf)
    wanted = list(dict.fromkeys(rel for nid in stateful
                                for rel, _ in graph[nid].inputs or ()))  # (recorded: checked)
    out: Inputs = {}
    for rel in wanted:
        try:
            frame = tr.df(rel)  # type: ignore[no-untyped-call]  # spark.translate: untyped
            out[rel] = arrow_to_rows(frame.toArrow(), [c.type for c in rel.columns]) \
                if rel.columns else [()] * frame.count()
        except RecoveryError:
            raise
        except Exception as exc:
            raise RecoveryError(f"the Spark job failed: {type(exc).__name__}: "
                                f"{str(exc).splitlines()[0] if str(exc) else ''}; the graph is "
                                "unchanged (try strategy='lineage')") from exc
    return out
