"""Durable base tables for ``noria_py.connect(data_dir=...)``.

Only base tables are stored: every view can be recomputed from them, so
keeping view state on disk would add write cost and a second thing to keep
consistent for no gain in what survives a crash. A restart reads the last
snapshot, replays the log written since, and hands the rows to the engine,
which rebuilds its views from them.

A write batch is acknowledged only after its log record is synced; a crash
can therefore lose at most batches that were never acknowledged, and the
partial record it may leave (a torn tail) is cut away on the next start (and
reported in :attr:`Recovered.report`) rather than stopping the process. Any
other damage would lose acknowledged batches, so opening refuses it with a
:class:`CorruptionError` naming the file and byte offset; :func:`repair`
(``noria-py repair --data-dir DIR``) says what dropping it would lose, and
drops it when asked (``--yes``).

The package is layered, each module using only those listed before it:
:mod:`.codec` encodes values (msgpack) and columns (raw int64/float64 bytes);
:mod:`.log` frames records and appends them to a log file; :mod:`.snapshot`
writes and reads a snapshot file; :mod:`.storage` owns a data directory and
is the only part the engine calls. What the engine hands over is in its own
types (:class:`noria_py.batch.Batch`, :class:`noria_py.columns.ColumnChunk`),
and no operator imports from this package, so the on-disk format can change
without touching one. (The cluster's wire protocol reuses :mod:`.codec`'s
value encoding, so that dates travel the same way they are stored.)

Typical use by the engine::

    st = Storage("state/")
    rec = st.load()            # catalog, rows per table, lsn, report
    ...
    st.log_batch("vote", batch)     # before the engine applies the batch
    ...                             # the engine applies it
    st.maybe_snapshot(lambda: {"vote": current_rows_of_vote, ...})
    st.close()
"""

from .storage import (
    CorruptionError,
    Damage,
    Recovered,
    RepairPlan,
    Storage,
    StorageError,
    holds_tables,
    repair,
)

__all__ = ["Storage", "StorageError", "CorruptionError", "Recovered", "Damage", "RepairPlan",
           "holds_tables", "repair"]
