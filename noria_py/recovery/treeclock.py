"""Tree-clock recovery (Yuan): restore one failed node without touching any other.

For a failed node B with parents A_i and children C_j (docs/recovery.md walks through
an example):

1. Each child's last B-time t_j (the (C_j, B) entry of its clock) gives
   t_min = min t_j, and T* merges every diff in the children's logs up to t_min: its
   (B, A_i) entries are the A_i-times of the last A_i messages B had processed by then.
2. B' restarts at time t_min with clock T*. A stateful B' first restores its state as
   of t_min: from its newest checkpoint at or below t_min (``runtime/checkpoints.py``)
   plus what its parents' payload logs hold after the checkpoint's parent-times, up to
   T*[A_i]; without a usable checkpoint, from its parents' output up to T*[A_i] (their
   state, minus what their payload logs show they sent since). Nothing else is
   recomputed or purged.
   Once B' has replayed, its payload log to each child starts after t_min: a live
   stateful child whose newest checkpoint reflects less of B than that checkpoints
   then (``Runtime.parent_restarted``), or its own next recovery would find B's log
   short of its checkpoint and be rebuilt; a B' rebuilt from its parents checkpoints
   its rebuilt state at once (``Domain.restore_state``).
3. Each parent resends, from its payload log, what it sent B after T*[A_i].
4. Execution replay: the children's diffs after t_min say which (parent, time) B
   processed at each of its times; B' processes the resent messages in that order, so
   its output is the same message for message, and a child receives only what it has
   not seen (t > t_j). Inputs no child saw are processed in per-parent FIFO order.

Every node sends each child one message per input it processes (empty if need be), so
the children's logs record every B-time and the pins leave no gaps.

A B with no live witness (no children: a reader; or only failed readers) has nothing
downstream pinning its times: it comes back to its parents' output as it stands, with
T*[A_i] their current times, from its newest checkpoint (any time; B' restarts at the
checkpoint's time) plus what their payload logs hold since, or without one that the
logs reach, rebuilt from their output. (A reader over stateful parents takes no
checkpoints, ``checkpoints.rebuilt_from_parents``: always rebuilt, its last-seen times
its parents' current times, so what they sent at or below them and is still in flight
is dropped on arrival; a failed parent comes back first, ``recover``. A join over
stateful parents or bases takes none either: it has witnesses, and comes back by the
rebuild of step 2, from its parents' output up to T*[A_i].)

A failed stateful child C (a reader too) keeps its checkpoint when B' can regenerate
the B-times above the B-time p_C that checkpoint reflects exactly as before the
failure: B' then restarts at r = min(t_min, p_C) instead, its clock there being the
witnesses' logs up to r merged with the checkpoint's clock (whose (C, B, A) entries
are B's (B, A) at p_C), its state its own checkpoint at or below r or its parents'
output up to T*(r), and the B-times in (r, p_C] pinned by witnesses (or FIFO, for a B
with one parent). Invariants that make it reachable: a stateful node acknowledges no
further than its stable checkpoint (``Domain.progress_report``), so B's parents keep
their logs to B back to T*(p_C) and B's own stable checkpoint is at or below p_C; and
its children keep the diffs after that checkpoint (``Domain.sent_low``). Where they do
not hold (a log trimmed, no clock, times no witness pins), B restarts at t_min and C's
checkpoints are dropped: the B-times they reflect may name other messages in B' (its
output numbered afresh without witnesses, unpinned times executed in another order),
so C is rebuilt from B'. ``RecoveryReport.paths`` says which.
"""
from __future__ import annotations

import sys
import time as _time
from typing import NamedTuple, cast

import numpy as np

from treeclock import TreeClocks

from ..batch import Batch
from ..errors import RecoveryError
from ..graph import Graph
from ..runtime import Runtime
from ..runtime.checkpoints import Checkpoint
from ..runtime.messages import Message
from .base import recover_base, restarted
from .report import RecoveryReport


def recover(graph: Graph, rt: Runtime, node_id: str) -> RecoveryReport:
    start = _time.perf_counter()
    if rt.tc is None:
        raise RecoveryError("tree-clock recovery needs clocks: this database was opened with "
                            "connect(clocks=False); use strategy='lineage'")
    if rt.alive(node_id):
        raise RecoveryError(f"node {node_id} has not failed; nothing to recover")
    node = graph[node_id]
    if node.kind == "base":
        replayed = recover_base(graph, rt, node_id, _resume_low(graph, rt, node_id))
        return RecoveryReport(node=node_id, strategy="treeclock",
                              seconds=_time.perf_counter() - start, replayed_messages=replayed,
                              paths={node_id: "history"})
    # Adjacent failures: a failed parent comes back first (a base from its log, an
    # operator through its grandchildren's clocks, which depth 3 keeps).
    replayed = rows = 0
    paths: dict[str, str] = {}
    for p in node.parents:
        if not rt.alive(p):
            if graph[p].kind == "base":
                replayed += recover_base(graph, rt, p, _resume_low(graph, rt, p))
                paths[p] = "history"
            else:
                r, n, ck_p, _ = _recover_operator(graph, rt, p)
                replayed, rows = replayed + r, rows + n
                paths[p] = _path(graph, p, ck_p)
    r, n, ck_time, _ = _recover_operator(graph, rt, node_id)
    paths[node_id] = _path(graph, node_id, ck_time)
    return RecoveryReport(node=node_id, strategy="treeclock",
                          seconds=_time.perf_counter() - start,
                          replayed_messages=replayed + r, rows=rows + n, checkpoint=ck_time,
                          paths=paths)


def _path(graph: Graph, node_id: str, ck_time: int | None) -> str:
    """How a recovered operator got its state back (``RecoveryReport.paths``)."""
    if not graph[node_id].op.stateful:
        return "replayed"
    return "rebuilt" if ck_time is None else "checkpoint"


class _Witness:
    """What one child tells about the failed node B: its last B-time, its diffs, and
    where in them B's entries sit. A failed child is stood in for by its own children,
    reading the (grandchild, child, B) paths of their clocks."""

    def __init__(self, graph: Graph, rt: Runtime, via: list[str], b: str) -> None:
        tc = rt.tc
        assert tc is not None, "recover() checked the runtime has clocks"
        self.owner = via[0]
        self.prefix = tuple(graph[x].num for x in via) + (graph[b].num,)
        info = rt.info(self.owner)
        self.layout = tc.layout(graph[self.owner].num)
        self.last_seen = info.last_seen
        rows, diffs = info.log_rows, info.diff_rows
        assert rows is not None and diffs is not None, f"{self.owner} has no clock"  # alive
        self.rows: np.ndarray = rows
        self.diffs: np.ndarray = diffs
        self.col = self.layout.index.get(self.prefix)
        if self.col is None:
            raise RecoveryError(f"the clocks of {self.owner} are too shallow to recover {b} "
                                f"through {via[1:]}: use strategy='lineage'")

    def times(self, rows: np.ndarray) -> np.ndarray:
        return rows[:, self.col]

    def entry(self, path_from_b: tuple[int, ...]) -> int | None:
        return self.layout.index.get(self.prefix + path_from_b[1:])


def _witnesses(graph: Graph, rt: Runtime, b: str) -> tuple[list[_Witness], dict[str, int]]:
    """The witnesses of B, and per child the last B-time it is known to have taken (for a
    failed child: the resume point its own recovery will ask B for)."""
    tc = rt.tc
    assert tc is not None, "recover() checked the runtime has clocks"
    witnesses: list[_Witness] = []
    seen: dict[str, int] = {}
    for c in graph[b].children:
        if rt.alive(c):
            w = _Witness(graph, rt, [c], b)
            witnesses.append(w)
            seen[c] = w.last_seen.get(b, 0)
            continue
        grandchildren = graph[c].children
        if not grandchildren:
            continue          # a failed reader: nothing to pin (see ``_recover_operator``)
        if any(not rt.alive(g) for g in grandchildren):
            raise RecoveryError(
                f"nodes {b} and {c} have failed together with what lies below {c}: more "
                f"adjacent failures than depth-3 tree clocks recover; use strategy='lineage'")
        ws = [_Witness(graph, rt, [g, c], b) for g in grandchildren]
        t_c = min(w.last_seen.get(c, 0) for w in ws)
        t_star_c = tc.t_star(graph[c].num, {graph[w.owner].num: w.rows for w in ws}, t_c)
        seen[c] = int(t_star_c[tc.layout(graph[c].num).slot[graph[b].num]])
        witnesses.extend(ws)
    return witnesses, seen


def _resume_low(graph: Graph, rt: Runtime, b: str) -> int:
    """The oldest B-time from which a failed child of B (a base coming back) will ask
    for B's messages: the time its own witnesses pin it to, or for a stateful child the
    parent-time of the checkpoint it will start from, if lower. 0 (everything) when a
    failed child's witnesses cannot say: it then recovers with lineage, or from B's
    output."""
    try:
        _, seen = _witnesses(graph, rt, b)
    except RecoveryError:
        return 0
    low: int | None = None
    for c in graph[b].children:
        if rt.alive(c) or c not in seen:
            continue                    # (a failed reader is rebuilt from B's output)
        t = seen[c]
        if graph[c].op.stateful:
            try:
                _, below = _witnesses(graph, rt, c)
            except RecoveryError:
                return 0
            ck = rt.checkpoint(c, min(below.values())) if below else None
            if ck is not None:
                t = min(t, ck.parent_times.get(b, 0))
        low = t if low is None else min(low, t)
    return 0 if low is None else low


class _Plan(NamedTuple):
    """How B' restarts: at ``t_min`` with clock ``t_star``, having taken each parent's
    messages up to ``resume``; from checkpoint ``ck`` and ``inputs`` (what its parents
    sent it since), or rebuilt from ``inputs`` alone; then ``order`` replayed."""
    t_min: int
    t_star: np.ndarray
    resume: dict[str, int]
    ck: Checkpoint | None
    inputs: list[tuple[int, Batch]]
    order: list[Message]


class _Unpinned(RecoveryError):
    """Lowering B's restart to a failed child's checkpoint leaves B-times that no
    witness pins (``children``: the children whose checkpoints need them)."""

    def __init__(self, children: list[str]) -> None:
        super().__init__(f"no witness pins the times the checkpoints of {children} reflect")
        self.children = children


def _recover_operator(graph: Graph, rt: Runtime, node_id: str) -> tuple[int, int, int | None,
                                                                            dict[str, Checkpoint]]:
    """Recover one operator; returns (messages replayed, rows restored, the time of the
    checkpoint it came back from or None, the failed children whose checkpoints its
    restart kept usable)."""
    node = graph[node_id]
    down = [a for a in node.parents if not rt.alive(a)]
    if down:
        raise RecoveryError(f"node {node_id} and its parents {down} and theirs have failed "
                            "together: more adjacent failures than depth-3 tree clocks "
                            "recover; use strategy='lineage'")
    witnesses, seen = _witnesses(graph, rt, node_id)
    # Everything that can refuse (a neighbour failed too, a log already trimmed, logs
    # that disagree) is settled before B' is touched: a refusal leaves B failed, never
    # half restored (alive with part of its state, which no later recovery would fix).
    kept = _children_checkpoints(graph, rt, node_id, min(seen.values()) if witnesses else None)
    plan: _Plan | None = None
    while kept and plan is None:
        r = min(ck.parent_times.get(node_id, 0) for ck in kept.values())
        if witnesses:
            r = min(r, min(seen.values()))
        try:
            plan = _plan(graph, rt, node_id, witnesses, seen, r, kept)
        except _Unpinned as e:
            for c in e.children:
                del kept[c]
        except RecoveryError:
            kept = {}
    if plan is None:
        plan = _plan(graph, rt, node_id, witnesses, seen, None, {})

    # restart B' at t_min with clock T* and that state, then replay. A failed stateful
    # child whose checkpoint this restart does not regenerate B's times for (module
    # docstring) loses its checkpoints: it is rebuilt from B'.
    for c in node.children:
        if not rt.alive(c) and graph[c].op.stateful and c not in kept:
            rt.drop_checkpoints(c)
    ck = plan.ck
    rt.restore(node_id, plan.t_min, plan.t_star, plan.resume, plan.inputs, ck)
    rows = sum(len(batch) for _, batch in plan.inputs) + (0 if ck is None else ck.rows())
    rt.replay(node_id, plan.order, seen)
    # B's payload log to each child now starts after t_min: a live stateful child whose
    # newest checkpoint reflects less of B checkpoints now, or its own recovery would
    # find the log short of that checkpoint and be rebuilt (``Domain.parent_restarted``)
    restarted(graph, rt, node_id, plan.t_min)
    return len(plan.order), rows, None if ck is None else ck.time, kept


def _children_checkpoints(graph: Graph, rt: Runtime, b: str,
                          t_min: int | None) -> dict[str, Checkpoint]:
    """The failed stateful children of B, each with the checkpoint its own recovery
    will start from, that B' could keep usable by restarting at or below the B-time it
    reflects: one with its clock (then B' can restart there), or at or above ``t_min``
    (B's restart point without it; None: B has no witness). A child whose other
    parents' logs no longer reach back to its checkpoint is left out (it is rebuilt)."""
    kept: dict[str, Checkpoint] = {}
    for c in graph[b].children:
        node = graph[c]
        if rt.alive(c) or not node.op.stateful:
            continue
        try:
            _, below = _witnesses(graph, rt, c)
        except RecoveryError:
            continue
        ck = rt.checkpoint(c, min(below.values()) if below else sys.maxsize)
        if ck is None:
            continue
        p = ck.parent_times.get(b, 0)
        if t_min is None or p < t_min:
            tc = cast(TreeClocks, rt.tc)
            layout = tc.layout(node.num)
            slot = layout.slot[graph[b].num]
            if ck.clock is None or len(ck.clock) != layout.size or ck.clock[slot] != p:
                continue
        if all(_reaches(rt, d, c, ck.parent_times.get(d, 0))
               for d in node.parents if d != b):
            kept[c] = ck
    return kept


def _clock_at(rt: Runtime, a: str, t: int) -> np.ndarray | None:
    """``a``'s clock as of its time ``t``, from its log (the merge of its diffs up to
    there); None where that is not known: ``a`` failed, or its log's summary of
    compacted diffs goes past ``t``."""
    if not rt.alive(a):
        return None
    rows = rt.info(a).log_rows
    if rows is None or not len(rows) or int(rows[0, 0]) > t:
        return None
    upto = rows[rows[:, 0] <= t]
    return cast(np.ndarray, upto.max(axis=0)) if len(upto) else None


def _reaches(rt: Runtime, a: str, c: str, since: int) -> bool:
    """Whether ``a`` (alive) still holds every message it sent ``c`` after ``since``."""
    if not rt.alive(a):
        return False
    msgs, a_time = rt.payload_after(a, c, since)
    return len(msgs) == a_time - since


def _plan(graph: Graph, rt: Runtime, node_id: str, witnesses: list[_Witness],
          seen: dict[str, int], low: int | None, kept: dict[str, Checkpoint]) -> _Plan:
    """Settle how B' restarts, without touching it (RecoveryError: it cannot). ``low``:
    restart at that B-time, at or below the children's pins, from the witnesses' logs
    up to there and the clocks of the ``kept`` children's checkpoints; None: at the
    children's pins (t_min), or without witnesses, from the parents as they stand."""
    tc = cast(TreeClocks, rt.tc)
    node = graph[node_id]
    parents = list(node.parents)
    layout = tc.layout(node.num)
    if witnesses or low is not None:
        pinned_at = min(seen.values()) if witnesses else None
        t_min: int = low if low is not None else cast(int, pinned_at)
        t_star = tc.zero(node.num)
        for w in witnesses:          # T*: merge what every witness logged up to t_min
            logged = w.rows[(w.times(w.rows) <= t_min)]
            if not len(logged):
                continue
            for i, path in enumerate(layout.paths[1:], 1):
                pos = w.entry(path)
                if pos is not None:
                    t_star[i] = max(t_star[i], int(logged[:, pos].max()))
        # a kept child's checkpoint at B-time t_min holds B's clock as of then, as far
        # as the child's depth reaches: (child, B, A) is T*'s (B, A), exactly
        for c, c_ck in kept.items():
            if c_ck.parent_times.get(node_id, 0) == t_min and c_ck.clock is not None:
                c_layout = tc.layout(graph[c].num)
                head = (graph[c].num,)
                for i, path in enumerate(layout.paths[1:], 1):
                    pos = c_layout.index.get(head + path)
                    if pos is not None:
                        t_star[i] = max(t_star[i], int(c_ck.clock[pos]))
        t_star[0] = t_min
        resume = {a: int(t_star[layout.slot[graph[a].num]]) for a in parents}
        pins = _pins(graph, witnesses, node_id, t_min)
        if len(parents) > 1:
            # B' must regenerate every B-time a child reflects exactly; with several
            # parents, only the pins say which message each one was
            if pinned_at is not None and any(t not in pins for t in range(t_min + 1, pinned_at + 1)):
                raise RecoveryError(f"no witness pins {node_id}'s times after {t_min}")
            unpinned = [c for c, c_ck in kept.items()
                        if any(t not in pins
                               for t in range(t_min + 1, c_ck.parent_times.get(node_id, 0) + 1))]
            if unpinned:
                raise _Unpinned(unpinned)
    else:
        # Nobody downstream: back to the parents' output as it stands now (below: from
        # the newest checkpoint, restarting at its time, or rebuilt, restarting at 0),
        # recording in its clock what each parent had then (as ``Domain.settle`` does
        # for a new node): should a parent fail later, this node is its witness.
        t_min = 0
        t_star = tc.zero(node.num)
        infos = {a: rt.info(a) for a in parents}
        resume = {a: i.time for a, i in infos.items()}
        pins = {}

    # 2. B's state as of t_min: its checkpoint and the parents' messages since, or each
    #    parent's output up to T*[A_i]; 3. what the parents resend (after T*[A_i])
    buffers: dict[str, list[Message]] = {}
    ck: Checkpoint | None = (
        rt.checkpoint(node_id, t_min if witnesses or low is not None else sys.maxsize)
        if node.op.stateful else None)
    inputs = _since_checkpoint(rt, node_id, ck, resume, buffers) if ck is not None else None
    if inputs is None:
        ck = None
        inputs = [(port, part) for port, a in enumerate(parents)
                  for part in output_through(graph, rt, a, node_id, resume[a])
                  ] if node.op.stateful else []
    if witnesses or low is not None:
        if ck is not None and ck.clock is not None:
            # what B had by its checkpoint it still had at t_min: its clock then holds
            # its parents' parents' times too, some learnt at its settle (a view made
            # over tables that held rows), which no witness logged; without them B'
            # would resume a parent restarted later before what its state reflects (a
            # join, restored with its child two deep, took an article sharder's whole
            # table again: a reader row twice in a cluster)
            np.maximum(t_star, ck.clock, out=t_star)
        # B had, by its last message from A_i (A_i-time T*[A_i]), A_i's clock as of
        # then under A_i: entries deeper than any witness's clock reaches (a witness
        # itself restored earlier may hold them only from an old checkpoint). Without
        # them B' would be a witness that names too early a time of a grandparent, and
        # a failed parent two deep below it would replay messages taken already
        had_from = {a: _clock_at(rt, a, resume[a]) for a in parents}
    else:
        if ck is not None:
            t_min = ck.time             # (B' goes on numbering from its checkpoint)
        had_from = {a: info.clock for a, info in infos.items()}   # (resumed as they stand)
    for a, at in had_from.items():
        if at is not None:
            tc.merge_into(node.num, t_star, tc.make_diff(node.num, graph[a].num, at, t_min + 1))
    t_star[0] = t_min
    for a in parents:
        if a not in buffers:
            buffers[a] = _log_after(rt, a, node_id, resume[a])

    # 4. execution replay, in the order the children's diffs pin
    heads = {a: 0 for a in parents}
    pinned = set(pins.values())
    order: list[Message] = []
    t = t_min
    while any(heads[a] < len(buffers[a]) for a in parents):
        t += 1
        if t in pins:
            a, want = pins[t]
            buf = buffers[a]
            if heads[a] >= len(buf) or buf[heads[a]].time != want:
                raise RecoveryError(f"replay of {node_id} found no message of {a} at its time "
                                    f"{want} for time {t}; the logs disagree")
        else:
            unpinned_head = next((p for p in parents if heads[p] < len(buffers[p])
                                  and (p, buffers[p][heads[p]].time) not in pinned), None)
            if unpinned_head is None:
                raise RecoveryError(f"replay of {node_id}: no unpinned message for time {t}")
            a = unpinned_head
        order.append(buffers[a][heads[a]])
        heads[a] += 1
    return _Plan(t_min, t_star, resume, ck, inputs, order)


def _since_checkpoint(rt: Runtime, node_id: str, ck: Checkpoint, resume: dict[str, int],
                      buffers: dict[str, list[Message]]) -> list[tuple[int, Batch]] | None:
    """What B took after its checkpoint ``ck`` up to T* (per port, from the parents'
    payload logs), filling ``buffers`` with what comes after T*; None when a parent's
    log no longer reaches back to the checkpoint (a parent that was itself restarted
    since): then B is rebuilt from its parents' output instead."""
    taken: list[tuple[int, Batch]] = []
    logs: dict[str, list[Message]] = {}
    for port, (a, upto) in enumerate(resume.items()):
        since = ck.parent_times.get(a, 0)
        if since > upto:
            return None
        try:
            msgs = _log_after(rt, a, node_id, since)
        except RecoveryError:
            return None
        if len(msgs) < upto - since:
            raise RecoveryError(
                f"parent {a} has sent {node_id} only up to its time {since + len(msgs)}, "
                f"short of the {upto} it is to resume at; the logs disagree")
        logs[a] = msgs[upto - since:]
        taken.extend((port, m.batch) for m in msgs[:upto - since])
    buffers.update(logs)
    return taken


def _log_after(rt: Runtime, a: str, node_id: str, since: int) -> list[Message]:
    """Every message ``a`` sent ``node_id`` after its time ``since``, from its payload
    log (one per time: a node sends each child a message per input); RecoveryError
    when the log no longer reaches back that far."""
    msgs, a_time = rt.payload_after(a, node_id, since)
    if len(msgs) != a_time - since:
        raise RecoveryError(
            f"parent {a} no longer holds the messages it sent {node_id} after its time "
            f"{since} (it has {len(msgs)} of {a_time - since}); use strategy='lineage'")
    return msgs


def _pins(graph: Graph, witnesses: list[_Witness], node_id: str,
          t_min: int) -> dict[int, tuple[str, int]]:
    """B-time -> (parent, parent time) for every B-time after t_min a witness recorded."""
    node = graph[node_id]
    pins: dict[int, tuple[str, int]] = {}
    for w in witnesses:
        later = w.diffs[w.times(w.diffs) > t_min]
        if not len(later):
            continue
        positions = {a: w.entry((node.num, graph[a].num)) for a in node.parents}
        for row in later:
            t = int(row[w.col])
            for a, pos in positions.items():
                if pos is not None and row[pos] > 0:
                    pins[t] = (a, int(row[pos]))
                    break
    return pins


def output_through(graph: Graph, rt: Runtime, node_id: str, child: str,
                   upto: int) -> list[Batch]:
    """Everything ``node_id`` sent ``child`` up to its time ``upto``, as batches to
    apply in order (empty ones left out).

    A stateful node's snapshot is its output up to now; a stateless one is its
    operator applied to its parents' output up to what it has taken from them. Either
    way, undoing what its payload log shows it sent after ``upto``, newest first
    (``Batch.undoing``), gives the output up to ``upto``. The batches are that output
    and then those undoings, not one consolidated batch: each undoing takes a state
    the node's output once was to the one before it, so a child applying them in order
    only ever holds states it held before (a dense child's arrays take each: one row a
    key), and a columnar snapshot (``Join.snapshot``) reaches the child as columns,
    with no Python step per row.
    """
    node = graph[node_id]
    if not rt.alive(node_id):
        raise RecoveryError(f"node {node_id} has failed too; recover it first")
    op = node.op
    snapshot, later, time, last_seen = rt.output_info(node_id, child, upto)
    if len(later) != time - upto:
        raise RecoveryError(
            f"node {node_id} no longer holds the messages it sent {child} after its time "
            f"{upto}; use strategy='lineage'")
    if op.stateful:
        assert snapshot is not None, "a runtime gives a stateful node's snapshot"
        parts = [snapshot]
    else:
        parts = []
        for port, p in enumerate(node.parents):
            for got in output_through(graph, rt, p, node_id, last_seen.get(p, 0)):
                out = op.process(port, got)
                if op.splits:       # (a sharder: ``process`` gives one batch per shard)
                    out = cast("list[Batch]", out)[cast(int, graph[child].shard)]
                parts.append(out)
    parts.extend(m.batch.undoing() for m in reversed(later))
    return [b for b in parts if b]
