"""The one small interface every dataflow operator implements.

An operator turns the batch arriving on one input port into the batch it emits. A
stateful operator can also describe its whole current output (``snapshot``), which is
how new views are initialized from existing state and how lineage recovery refills a
purged subgraph. A stateless operator has no snapshot of its own: its full output is
itself applied to its parents' full output (see ``planner.initialize``).

A stateful operator says how a checkpoint holds its state (``checkpoint_form``), so that
a failed shard can come back from its own checkpoint (runtime/checkpoints.py):

- ``"input"``: its state is exactly the multiset of rows it has taken on each port (a
  join's two sides, TopK's rows, DISTINCT's and EXCEPT's counts, a reader's rows). A
  checkpoint is that multiset, kept up to date from the batches taken since the last
  one (``taken``), so the operator itself does nothing per batch; ``contents`` gives
  it whole once, and restoring is ``load_input`` of it, port by port. Rows are held
  as the state holds them: an operator whose ``process`` transforms its input before
  keeping it (a reader applying its view's SELECT list) checkpoints the transformed
  rows (``taken``), and ``load_input`` takes them back without transforming them
  again (``process`` would: a SELECT list applied twice).
- ``"keyed"``: its state is an entry per key that is not its input (an aggregate's
  groups). ``export_state`` gives the entries changed since the last export (all of
  them when asked), ``load_state`` takes them back.
- None: stateless.

Restoring relies on the rule that makes replay work at all: the state is a function of
the multiset of rows taken, not of their order.
"""
from __future__ import annotations

from ..batch import Batch


class Operator:
    kind: str = "?"
    stateful: bool = False
    #: True for operators whose ``process`` returns one batch per child (sharders).
    splits: bool = False
    #: True for operators that never have children (readers): nothing downstream pins
    #: such a node's times, so recovery brings it back to its parents' output as it
    #: stands: from its newest checkpoint and what its parents sent since, or, without
    #: checkpoints, rebuilt from its parents' state, when its parents keep no payload
    #: log for it (docs/recovery.md)
    leaf: bool = False
    #: how a checkpoint holds this operator's state ("input", "keyed" or None, above)
    checkpoint_form: str | None = None
    #: whether to track what changed since the last checkpoint (set by the domain while
    #: it checkpoints this operator: the keys an aggregate's groups or a join's arrays
    #: changed)
    tracking: bool = False
    #: whether this node holds only the keys read (a partial reader; noria_py/partial.py)
    partial: bool = False
    #: whether ``process`` may take several batches of one port joined into one
    #: (``Batch.concat``) when only the state counts: a restarting node's inputs since
    #: its checkpoint (``Domain.restore_state``). True for an aggregate, which nets a
    #: batch by key first: one call then costs about what a small batch does. Not where
    #: the state's dense form takes a key once a batch (a join's or a reader's rows: a
    #: key updated twice in one batch sends the state to its general form for good);
    #: nor TopK, whose cost is per row taken (joined: 0.61 s against 0.59 s for 1,000
    #: messages since its checkpoint).
    inputs_join: bool = False

    def process(self, port: int, batch: Batch) -> Batch:
        raise NotImplementedError

    def snapshot(self) -> Batch:
        """Every row this operator currently outputs, as insertions (stateful only)."""
        raise NotImplementedError(f"{self.kind} keeps no state to snapshot")

    def contents(self) -> list[Batch]:
        """``checkpoint_form == "input"``: per port, every row taken, with its count as
        its sign (``load_input`` of each, port by port, gives this state back)."""
        raise NotImplementedError(f"{self.kind} is not checkpointed by its input")

    def taken(self, port: int, batch: Batch) -> Batch:
        """``checkpoint_form == "input"``: ``batch``, which ``process`` has just taken on
        ``port`` (called right after it), as the state took it: what a checkpoint
        records. The batch itself, unless ``process`` transforms its input first."""
        return batch

    def load_input(self, port: int, batch: Batch) -> None:
        """``checkpoint_form == "input"``: take back rows as ``contents`` and ``taken``
        give them (``process``, unless that transforms its input first)."""
        self.process(port, batch)

    def load_counts(self, port: int, counts: dict) -> None:
        """``checkpoint_form == "input"``: take back rows held as row -> count (never
        0), as a checkpoint store folds them; ``counts`` is a copy the operator may
        keep. By default ``load_input`` of them as a batch."""
        self.load_input(port, Batch(list(counts), list(counts.values())))

    def array_state(self, full: bool = True) -> dict:
        """``checkpoint_form == "input"``: port -> that port's state where it is held in
        arrays, checkpointed with array operations instead of from its batches: a copy
        (``dense.DenseRows``) when ``full`` or when the last call did not export that
        port's arrays (``load_array_state`` counts as one that did), else the entries at
        the keys changed since the last call (``dense.RowsDelta``, from the keys marked
        while ``tracking``), or None if none changed. ``load_array_state`` takes a copy
        back."""
        return {}

    def load_array_state(self, port: int, rows) -> None:
        raise NotImplementedError(f"{self.kind} keeps no state in arrays")

    def export_state(self, changed_only: bool):
        """``checkpoint_form == "keyed"``: key -> entry for the keys changed since the
        last export (None for a key gone), or for every key; the entries are copies
        that later batches leave alone."""
        raise NotImplementedError(f"{self.kind} is not checkpointed by key")

    def load_state(self, entries) -> None:
        """``checkpoint_form == "keyed"``: the state ``entries`` (key -> entry, as
        ``export_state`` gives them) describe, on an empty operator; the next
        ``export_state(changed_only=True)`` is relative to it."""
        raise NotImplementedError(f"{self.kind} is not checkpointed by key")

    def reset(self) -> None:
        """Forget all state, as after a crash."""

    def describe(self) -> str:
        return self.kind
