"""A domain's tree-clock bookkeeping: diffs built as paths and applied when read,
acknowledgements only with clocks, a path from the wire checked on arrival."""
from dataclasses import replace

import numpy as np
import pytest

import noria_py
from noria_py import UnknownNodeError, tuning
from noria_py.batch import Batch
from noria_py.runtime import checkpoints as ck
from noria_py.runtime.messages import Message
from noria_py.tuning import ACK_EVERY, CLOCK_DEPTH, FLUSH_EVERY
from treeclock import TreeClockError


def _db(clocks: bool = True, seed=None, checkpoints: bool = True):
    db = noria_py.connect(clocks=clocks, seed=seed, checkpoints=checkpoints)
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE VIEW c AS SELECT article_id, COUNT(*) AS n FROM vote "
               "WHERE article_id = ? GROUP BY article_id")
    return db


def test_pending_paths_are_applied_when_the_clock_or_log_is_read():
    db = _db()
    vote = db.table("vote")
    for i in range(10):
        vote.insert([(i % 3, i)])
    doms = list(db.runtime.domains.values())
    assert any(d.pending for d in doms)          # nothing applied yet: no read so far
    for d in doms:
        if d.tc is None or not d.time:
            continue
        clock = d.clock                          # applies what is pending
        assert not d.pending
        assert clock[0] == d.time
        if not d.node.parents:                   # a base: its clock is its time alone
            assert len(clock) == 1 and len(d.diffs) == 0
            continue
        assert d.diffs.times.tolist() == list(range(1, d.time + 1))
        assert np.array_equal(clock, np.maximum(d.summary, d.diffs.rows.max(axis=0)))


def test_messages_carry_their_senders_diff_as_a_path():
    db = _db(seed=3)
    db.table("vote").insert([(1, 1), (2, 2)])
    pending = [m for q in db.runtime.edges.values() for m in q]
    assert pending, "a seeded runtime leaves some messages in flight"
    for m in pending:
        src = db.runtime.domains[m.src]
        assert type(m.clock) is tuple and len(m.clock) == CLOCK_DEPTH + 2
        assert all(type(x) is int for x in m.clock)
        assert m.clock[1] == m.time                # the sender's own time first
        src.tc.check_path(src.node.num, m.clock)     # a diff of the sender's layout
    db.wait()
    assert db.view("c").lookup(1) == [(1, 1)]


def test_no_acknowledgements_without_clocks():
    db = _db(clocks=False)
    vote = db.table("vote")
    for i in range(200):
        vote.insert([(i % 5, i)])
    for d in db.runtime.domains.values():
        assert d.progress == {} and d.payload_size() == 0
    assert db.view("c").lookup(2) == [(2, 40)]


@pytest.mark.parametrize("checkpoints", [False, True])
def test_acknowledgements_trim_logs_with_clocks(checkpoints, monkeypatch):
    # (intervals short enough that the reader's checkpoints trim its log in the run;
    # the reader checkpoints, as a cluster's: tests/recovery/test_rebuilt_from_parents.py
    # has the logs above a reader rebuilt from its parent)
    monkeypatch.setattr(tuning, "REBUILT_FROM_PARENTS", False)
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", 256)
    db = _db(checkpoints=checkpoints)
    vote = db.table("vote")
    for i in range(3000):
        vote.insert([(i % 5, i)])
    doms = db.runtime.domains
    assert any(d.progress for d in doms.values())
    logs = {(a, c): len(q) for a, d in doms.items() for c, q in d.payload.items() if q}
    reader = next(n for n, d in doms.items() if d.node.kind == "reader")
    agg = doms[reader].node.parents[0]
    # base -> aggregate: every message the reader has reflected is gone, as of its
    # clock's last flush: at most an acknowledgement's and a flush's worth is left; with
    # checkpoints, what came after the aggregate's stable checkpoint is kept too: its
    # newest at or below its low mark, which the reader's newest checkpoint holds back
    # (one every reader's interval: ``checkpoints.interval``), so at most an interval
    # of each below the reader's last acknowledgement
    base_edge = {k: n for k, n in logs.items() if k[1] == agg}
    every = {n: ck.interval(d.node.op)[0] for n, d in doms.items()}
    assert sum(base_edge.values()) <= (ACK_EVERY + FLUSH_EVERY
                                       + (every[agg] + every[reader] if checkpoints else 0))
    # aggregate -> reader: no log without checkpoints (a failed reader is rebuilt from
    # the aggregate); with them, what came after the reader's newest checkpoint, which
    # each acknowledgement carries: at most the reader's checkpoint interval (spaced,
    # ``checkpoints.interval``) and an acknowledgement
    to_reader = logs.get((agg, reader), 0)
    if checkpoints:
        assert every[reader] < 3000 and every[agg] < every[reader]
        assert 0 < to_reader <= every[reader] + ACK_EVERY
    else:
        assert to_reader == 0
    assert sum(logs.values()) == sum(base_edge.values()) + to_reader
    assert db.view("c").lookup(2) == [(2, 600)]


def test_a_path_from_the_wire_is_checked_before_anything_changes():
    db = _db()
    db.table("vote").insert([(1, 1), (2, 2)])
    agg = next(d for d in db.runtime.domains.values() if d.node.parents and d.node.children)
    d = db.runtime.domains[agg.node.children[0]]
    m = Message(agg.id, d.id, None, agg.time, agg.last_diff, 0)   # as agg sent it
    assert m.clock[0] != 0
    d.check_incoming(m)                                   # the engine's own: fine
    before = (d.time, dict(d.last_seen), list(d.pending))
    leaf, *times = m.clock
    bad = [
        (leaf, *times[:-1], 7) if times[-1] == 0 else (leaf, *times[:1], 0, *times[2:]),
        (leaf, -1, *times[1:]),                           # a negative time
        (leaf, *times, 0),                                # one int too many
        (99, *times),                                     # no such entry
        (leaf, 1.5, *times[1:]),
    ]
    for clock in bad:
        with pytest.raises(TreeClockError, match="malformed"):
            d.check_incoming(Message(m.src, m.dst, m.batch, m.time, clock, m.low))
    with pytest.raises(UnknownNodeError, match="not a parent"):
        d.check_incoming(Message(m.dst, m.dst, m.batch, m.time, m.clock, m.low))
    assert (d.time, d.last_seen, d.pending) == before


def _join_db():
    """Two bases, a and b, under one join: the join's domain hears from two senders."""
    db = noria_py.connect()
    db.execute("CREATE TABLE a (k INT, x INT)")
    db.execute("CREATE TABLE b (k INT, y INT)")
    db.execute("CREATE VIEW j AS SELECT a.k, a.x, b.y FROM a JOIN b ON a.k = b.k "
               "WHERE a.k = ?")
    doms = db.runtime.domains
    join = next(d for d in doms.values() if d.node.kind == "join")
    a_id, b_id = join.node.parents
    db.table("a").insert([(1, 10)])
    db.table("b").insert([(1, 20)])
    assert join.last_seen == {a_id: 1, b_id: 1}
    return db, join, doms[a_id], doms[b_id]


def _sent(base, row) -> Message:
    """The message ``base`` sends the join for a write of ``row``, at its next time (the
    write goes no further: the test delivers it, or a copy at another time)."""
    [m] = base.write(Batch.inserts([row]))
    return m


def _deliver(db, m: Message) -> None:
    db.runtime.deliver(m)
    db.wait()


def test_a_message_at_or_below_the_last_seen_time_of_its_sender_is_dropped():
    db, join, a, b = _join_db()
    view = db.view("j")

    m_a = _sent(a, (1, 11))                      # a's time 2
    assert m_a.time == 2
    _deliver(db, replace(m_a, time=1))           # at a's last-seen time: a duplicate
    assert join.time == 2 and join.last_seen[a.id] == 1
    assert sorted(view.lookup(1)) == [(1, 10, 20)]

    _deliver(db, m_a)                            # one later: applied
    assert join.time == 3 and join.last_seen[a.id] == 2
    assert sorted(view.lookup(1)) == [(1, 10, 20), (1, 11, 20)]
    _deliver(db, m_a)                            # the same again: dropped
    assert join.time == 3
    assert sorted(view.lookup(1)) == [(1, 10, 20), (1, 11, 20)]

    # b's times are its own: at b's last-seen time, dropped; at 2, which a has
    # reached but b has not, applied
    m_b = _sent(b, (1, 21))
    assert m_b.time == 2
    _deliver(db, replace(m_b, time=1))
    assert join.time == 3 and join.last_seen == {a.id: 2, b.id: 1}
    assert sorted(view.lookup(1)) == [(1, 10, 20), (1, 11, 20)]
    _deliver(db, m_b)
    assert join.time == 4 and join.last_seen == {a.id: 2, b.id: 2}
    assert sorted(view.lookup(1)) == [(1, 10, 20), (1, 10, 21), (1, 11, 20), (1, 11, 21)]


def test_a_join_and_a_reader_checkpoint_at_their_spacing(monkeypatch):
    """``checkpoints.interval``: a join's and a reader's shards go their spacing times
    the interval between checkpoints, an aggregate's once. In the vote view a vote
    changes one row of COUNT's input and two of the join's and the reader's (a count's
    old row out, its new one in), so at a spacing of two all three checkpoint about
    equally often by rows (an interval of 600 rows: every six inserts of 100 votes,
    one message each, checked at every acknowledgement)."""
    monkeypatch.setattr(tuning, "CHECKPOINT_ROWS", 600)
    monkeypatch.setattr(tuning, "ACK_EVERY", 1)
    monkeypatch.setattr(tuning, "REBUILT_FROM_PARENTS", False)    # (as a cluster's reader)
    db = noria_py.connect()
    db.execute("CREATE TABLE article (id INT PRIMARY KEY, title TEXT)")
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    db.execute("CREATE VIEW v AS SELECT article.id, article.title, c.n FROM article "
               "LEFT JOIN (SELECT article_id, COUNT(*) AS n FROM vote GROUP BY article_id) "
               "AS c ON article.id = c.article_id WHERE article.id = ?")
    db.table("article").insert([(i, f"a{i}") for i in range(1000)])
    doms = db.runtime.domains
    taken: dict[str, int] = {}
    for nid, d in doms.items():
        def counted(d=d, nid=nid, take=d.checkpoint):
            taken[nid] = taken.get(nid, 0) + 1
            take()
        d.checkpoint = counted          # type: ignore[method-assign]
    rng = np.random.default_rng(0)
    vote = db.table("vote")
    for i in range(120):
        vote.insert([(int(k), i) for k in rng.choice(1000, 100, replace=False)])
    kinds = {doms[n].node.kind: n for n in taken}
    assert set(kinds) == {"aggregate", "join", "reader"}
    for kind, spacing in (("join", tuning.JOIN_CHECKPOINT_SPACING),
                          ("reader", tuning.READER_CHECKPOINT_SPACING)):
        assert ck.interval(doms[kinds[kind]].node.op) == (
            spacing * tuning.CHECKPOINT_EVERY, spacing * 600)
    count = taken[kinds["aggregate"]]
    assert 15 <= count <= 25                    # (120 inserts of 100 rows: every 6)
    for kind in ("join", "reader"):
        # two rows a vote (one for an article's first): up to 2 * 100 rows an insert
        # against 2 * 600 (at a spacing of one, about twice COUNT's checkpoints)
        assert count - 4 <= taken[kinds[kind]] <= count, (kind, taken, count)
    assert db.view("v").lookup(7)[0][0] == 7


def _shared_count_db(seed=None):
    """Votes counted once for two views (the count shared: it has two children, the
    reader of ``c`` and the join of ``v``), the counts checkpointing often."""
    db = noria_py.connect(seed=seed)
    db.execute("CREATE TABLE article (id INT PRIMARY KEY, title TEXT)")
    db.execute("CREATE TABLE vote (article_id INT, user_id INT)")
    counts = "SELECT article_id, COUNT(*) AS n FROM vote GROUP BY article_id"
    db.execute(f"CREATE VIEW c AS {counts}")
    db.execute(f"CREATE VIEW v AS SELECT article.id, article.title, c.n FROM article "
               f"LEFT JOIN ({counts}) AS c ON article.id = c.article_id WHERE article.id = ?")
    db.table("article").insert([(i, f"a{i}") for i in range(40)])
    return db


def _ack_state(db) -> list:
    """What the acknowledgements decide, per node: its low marks, its stable checkpoint
    and the lengths of its payload logs."""
    return sorted((d.id, d.low, d.sent_low, d.ck_stable_time, sorted(d.parent_low.items()),
                   sorted((c, len(q)) for c, q in d.payload.items()))
                  for d in db.runtime.domains.values())


def test_a_report_handed_out_again_is_the_one_built_anew(monkeypatch):
    """A checkpointing node's acknowledgement is built once per stable checkpoint and
    handed out again until the next (``Domain.report_memo``): at every acknowledgement
    it equals the report built from scratch, and it moves with the stable checkpoint."""
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", 64)
    db = _shared_count_db()
    doms = db.runtime.domains
    built: dict[str, list] = {}
    def checked(d, report=type(next(iter(doms.values()))).progress_report):
        got = report(d)
        d.report_memo = None
        assert report(d) == got, d.id           # (built anew)
        if built.setdefault(d.id, [])[-1:] != [got]:
            built[d.id].append(got)
        return got
    for d in doms.values():
        d.progress_report = lambda d=d: checked(d)   # type: ignore[method-assign]
    rng = np.random.default_rng(0)
    vote = db.table("vote")
    for i in range(600):
        vote.insert([(int(k), i) for k in rng.integers(0, 40, int(rng.integers(1, 5)))])
    agg = next(n for n, d in doms.items() if d.node.kind == "aggregate")
    assert len(doms[agg].node.children) == 2 and doms[agg].store is not None
    # several stable checkpoints, each reported once to a run of acknowledgements
    assert 3 <= len(built[agg]) < db.runtime.domains[agg].time // ACK_EVERY
    assert db.view("v").lookup(7) == [(7, "a7", dict(db.view("c").all())[7])]


@pytest.mark.parametrize("seed", [None, 5])
def test_a_report_the_parent_holds_changes_nothing(seed, monkeypatch):
    """A parent passes over a report it already holds (``on_progress``): its low marks,
    stable checkpoint and logs are at every step what they are when it takes every
    report whole."""
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", 64)
    dbs = [_shared_count_db(seed), _shared_count_db(seed)]
    held = [0]
    for d in dbs[0].runtime.domains.values():
        def counted(child, time, paths, trim, d=d, take=d.on_progress):
            held[0] += trim is None and d.progress.get(child) == (time, paths)
            return take(child, time, paths, trim)
        d.on_progress = counted                  # type: ignore[method-assign]
    for d in dbs[1].runtime.domains.values():
        def whole(child, *rest, d=d, take=d.on_progress):
            d.progress.pop(child, None)          # (as if never reported: taken whole)
            return take(child, *rest)
        d.on_progress = whole                    # type: ignore[method-assign]
    rng = np.random.default_rng(1)
    for i in range(500):
        rows = [(int(k), i) for k in rng.integers(0, 40, int(rng.integers(1, 5)))]
        for db in dbs:
            db.table("vote").insert(rows)
        assert _ack_state(dbs[0]) == _ack_state(dbs[1]), i
    for db in dbs:
        db.wait()
    assert _ack_state(dbs[0]) == _ack_state(dbs[1])
    assert sorted(dbs[0].view("c").all()) == sorted(dbs[1].view("c").all())
    assert held[0] > 20                          # (reports passed over: most of them)


def test_pending_paths_are_applied_at_the_acknowledgements(monkeypatch):
    """Unread, the diffs pile up only until an acknowledgement finds ``FLUSH_EVERY``
    of them (``Domain.progress_report``): fewer than that and an acknowledgement's
    worth are pending at any time; at a checkpointing node, until its checkpoint reads
    its clock: at most its interval and an acknowledgement's worth."""
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", 4 * FLUSH_EVERY)
    db = _db()
    vote = db.table("vote")
    doms = [d for d in db.runtime.domains.values() if d.node.parents]
    assert {d.store is not None for d in doms} == {True, False}    # (both kinds)
    width = CLOCK_DEPTH + 2
    most = {d.id: 0 for d in doms}
    for i in range(20 * FLUSH_EVERY):
        vote.insert([(i % 3, i)])
        for d in doms:
            most[d.id] = max(most[d.id], len(d.pending))
            every = ck.interval(d.node.op)[0] if d.store is not None else FLUSH_EVERY
            assert len(d.pending) < (every + ACK_EVERY) * width, d.id
    for d in doms:                  # (in bulk, not one by one)
        every = ck.interval(d.node.op)[0] if d.store is not None else FLUSH_EVERY
        assert most[d.id] >= (every - 1) * width, d.id
    assert db.view("c").lookup(1) == [(1, len(range(1, 20 * FLUSH_EVERY, 3)))]
