"""The ``falkirk`` regime in a cluster (``noria-py serve --regime falkirk``, or a JSON
object of per-node policies for ``--regime``): Falkirk Wheel's policy per node and its
rollback frontier (seed 000; ``runtime/falkirk.py`` says what each policy keeps and why
the frontier is right) on worker processes, built on the ``uncoordinated`` regime's
cluster machinery (``lines.py``: its points, channel logs, checkpoint store, recovery
plan and garbage collection), with the embedded regime's own functions for everything
falkirk decides.

Policies. Every node's policy is ``runtime/falkirk.py: choose`` over the user's choice,
computed where it is needed from the same graph: by each worker, for its node shards,
from the choice the controller sends in its ``config`` frame (a msgpack map of strings),
and by the controller, for the frontier. A node's policy never changes.

Normal operation, on the workers (``Worker._uc_handle``): a node shard takes a span as
its policy says, through the lines' checkpoint (its state's change to the store here,
then its ``pt`` frame): ``eager`` after every message, ``lazy`` every
``tuning.CHECKPOINT_EVERY`` messages or ``CHECKPOINT_ROWS`` rows, a stateless ``batch``
or ``ephemeral`` one after every message (no state: its point is metadata), a stateful
``batch`` or ``ephemeral`` one never but whole at its creation (``uc_checkpoint_all``,
as every node on a quiet graph after a graph change). What a node sends is logged here
(relayed, or copied in a ``log`` frame with direct channels: ``lines.py``) if its policy
logs its output; an ``ephemeral`` node's edges keep only the times it sent (the seed's
T_D): relayed messages' times are taken as they pass, with direct channels a ``sent``
frame ``["sent", [[src, dst, time], ...]]`` goes before the messages are routed and
before any later point, so the controller knows of every message a receiver may have
taken before it knows of the sender's next span.

Recovery of a lost worker (``Lines.roll_back``, unchanged but for the line): every live
node finishes what it was sent; each live node's time and last-seen times are its span
⊤; the frontier is ``runtime/falkirk.py: frontier`` over a ``Spans`` of the points, the
live nodes' state, the bases' write counts, the policies, the unlogged edges' times and
the logs' trim levels here, checked by ``consistent`` (and the lines' own orphan check);
then the lines' plan (a checkpoint in the store at each stateful node's span, the logs
and histories reaching back) and touch: the nodes the frontier sets below ⊤ are set
back (``Worker._set_back``, every regime's), the logs resend what each receiver had not
taken (an unlogged edge has nothing to resend: the frontier set its sender back to what
its receiver had taken), the bases resend from their histories. A frontier that cannot
be found (a node needed below its oldest span), an inconsistent one, or a choice naming
a table or what no node is, is refused before any node is touched: the lost nodes are
rebuilt by lineage and the report's ``fallback`` says why (never a wrong view).

Garbage collection (``Lines.gc``): the low watermark is the frontier with every node
failed at once (``frontier(live=False)``); below it the points fold, the checkpoint
chains fold, the logs and the bases' histories are trimmed (the lines' own), and so are
the unlogged edges' times (``trim_sent``). A stateful ``batch`` or ``ephemeral`` node
keeps its creation as its only span: its inputs' logs grow (the seed's "grows without
bound"); ``eager`` and ``lazy`` keep everything bounded.

Invariants (beyond the lines'): ``sent[(p, c)]`` holds, in order, the times of every
message unlogged ``p`` sent ``c`` above the low watermark's ``c``'s parent-time of ``p``,
up to what ``p``'s worker has told the controller; ``logs`` hold only logged senders'.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import RecoveryError
from ..falkirk import LOGGED, TOP, Spans, choose, consistent, frontier, trim_sent, unknown_names
from ..uncoordinated import Point
from .lines import Lines, when_free
from .wire import ProtocolError

if TYPE_CHECKING:  # pragma: no cover
    from .controller import ClusterRuntime

__all__ = ["Falkirk", "take_span"]


def take_span(policy: str, stateful: bool, since: list[int], every: int, rows: int) -> bool:
    """Whether a node shard of ``policy`` takes a span after the message it just took
    (``since``: [messages, rows] since its last; ``every`` and ``rows``: a lazy node's
    interval): an eager one and a stateless non-lazy one after every message, a lazy
    one at its interval, a stateful batch or ephemeral one never (its creation only)."""
    if policy == "eager" or (policy != "lazy" and not stateful):
        return True
    return policy == "lazy" and (since[0] >= every or since[1] >= rows)


class Falkirk(Lines):
    """The controller's side of the falkirk regime (module docstring)."""

    def __init__(self, rt: ClusterRuntime, choice: Mapping[str, str]) -> None:
        super().__init__(rt, "uncoordinated")
        self.regime = "falkirk"
        #: the user's choice, checked (``regimes.policies``)
        self.choice = dict(choice)
        #: per node: its policy (``choose``), as it was first asked
        self.policy: dict[str, str] = {}
        #: per unlogged edge (src, dst): the times it sent since the low watermark
        self.sent: dict[tuple[str, str], deque[int]] = {}
        #: the last frontier found: its fixed point's passes and each span set back
        self.last_frontier: dict[str, Any] = {}

    def policy_of(self, node_id: str) -> str:
        """``node_id``'s policy (``choose``: its worker computes the same)."""
        p = self.policy.get(node_id)
        if p is None:
            p = self.policy[node_id] = choose(self.choice, self.rt.graph[node_id])[0]
        return p

    # ------------------------------------------------------------ normal operation

    def on_point(self, f: Sequence[Any]) -> None:
        """A span (``Lines.on_point``); a garbage collection when due, if the database's
        lock is free (``when_free``: the spans of a run come mostly after its writes,
        and a stateless node spans at every message)."""
        super().on_point(f)
        if self.due >= max(8, len(self.rt.graph.nodes)):
            when_free(self.rt, self.gc)

    def on_log(self, msgs: Sequence[Any]) -> None:
        """Messages a worker sent (relayed here, or a ``log`` frame): an unlogged
        sender's keep only their times."""
        logged = []
        times = []
        for m in msgs:
            if not (isinstance(m, (list, tuple)) and len(m) in (6, 7)
                    and type(m[0]) is str and type(m[1]) is str and type(m[3]) is int):
                raise ProtocolError("a logged message must be an encoded message")
            if self.policy_of(m[0]) in LOGGED:
                logged.append(m)
            else:
                times.append((m[0], m[1], m[3]))
        if logged:
            super().on_log(logged)
        if times:
            self._sent(times)

    def on_sent(self, entries: Sequence[Any]) -> None:
        """``["sent", [[src, dst, time], ...]]``: what unlogged senders sent."""
        times = []
        for e in entries:
            if not (isinstance(e, (list, tuple)) and len(e) == 3 and type(e[0]) is str
                    and type(e[1]) is str and type(e[2]) is int):
                raise ProtocolError("a sent time must be [src, dst, time]")
            times.append((e[0], e[1], e[2]))
        self._sent(times)

    def _sent(self, times: list[tuple[str, str, int]]) -> None:
        with self.lock:
            sent = self.sent
            for src, dst, t in times:
                q = sent.get((src, dst))
                if q is None:
                    q = sent[(src, dst)] = deque()
                q.append(t)

    def forget(self, node_id: str) -> None:
        super().forget(node_id)
        with self.lock:
            self.policy.pop(node_id, None)
            for key in [k for k in self.sent if node_id in k]:
                del self.sent[key]

    def _clear(self) -> None:
        super()._clear()
        self.sent.clear()

    # ------------------------------------------------------------ the frontier

    def spans(self, order: list[str], parents: dict[str, list[str]],
              current: Mapping[str, tuple[int, Mapping[str, int]]],
              sources: dict[str, int]) -> Spans:
        """What the frontier reads (``self.lock`` held)."""
        graph = self.rt.graph
        ops = [n for n in order if parents[n]]
        return Spans(ops, parents, {n: graph[n].children for n in ops}, self.points,
                     current, sources, {n: self.policy_of(n) for n in order}, self.sent,
                     self.trimmed)

    def _lowest_line(self, order: list[str], parents: dict[str, list[str]],
                     sources: dict[str, int], ops: list[str]) -> dict[str, Point] | None:
        sp = self.spans(order, parents, {}, sources)
        try:
            line = frontier(sp, set(order), live=False)[0]
        except RecoveryError:
            return None
        return None if consistent(sp, line, live=False) is not None else line

    def _fold(self, line: dict[str, Point]) -> None:
        """The lines' fold, the unlogged edges' times, and each checkpoint chain folded
        to its node's span on the low watermark now (an eager node's deltas would
        otherwise wait for its next checkpoint, a batch node's forever)."""
        super()._fold(line)
        trim_sent(self.sent, line)
        store = self.rt.store
        if store is not None:
            with self.rt.store_lock:
                for n, pt in line.items():
                    store.fold_upto(n, pt.time)

    def _recovery_line(self, order: list[str], parents: dict[str, list[str]], down: set[str],
                       current: dict[str, tuple[int, dict[str, int]]], sources: dict[str, int],
                       ) -> tuple[dict[str, Point], int | None] | str:
        graph = self.rt.graph
        matched = {choose(self.choice, graph[n])[1] for n in order}
        bad = unknown_names(self.choice, graph, {m for m in matched if m is not None})
        if bad is not None:
            return bad
        sp = self.spans(order, parents, current, sources)
        try:
            s, passes = frontier(sp, down)
        except RecoveryError as e:
            return f"no rollback frontier: {e}"
        line = {n: pt for n, pt in s.items() if pt is not TOP}
        self.last_frontier = {"passes": passes, "spans": {n: pt.time for n, pt in line.items()}}
        bad = consistent(sp, line)
        if bad is not None:
            return f"the rollback frontier found is not consistent on {bad}"
        return line, None

    def _forget_after(self, line: dict[str, Point]) -> None:
        super()._forget_after(line)
        for nid, pt in line.items():
            for c in self.rt.graph[nid].children:
                q = self.sent.get((nid, c))
                while q and q[-1] > pt.time:
                    q.pop()
