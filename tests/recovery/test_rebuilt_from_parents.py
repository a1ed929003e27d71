"""Nodes rebuilt from their parents take no checkpoints in the tree-clock regime
(``checkpoints.rebuilt_from_parents``).

A reader over stateful parents (a join, an aggregate, or a project over one): a lost
reader is rebuilt from its parent's output at the parent's current time, dropping what
that parent sent at or below it, and when the parent failed with it, the parent comes
back first. Its parent keeps no payload log to it, so the logs above it are trimmed at
every acknowledgement instead of at the reader's checkpoints.

A join over stateful parents or bases (the vote join, over the article table and
COUNT): its children pin its times, so it comes back as any node without a checkpoint
does, from its parents' output up to the times its children name, then the pinned
replay; its parents' logs to it are trimmed at its children's acknowledgements."""
from __future__ import annotations

import pytest

import noria_py
from noria_py import tuning
from noria_tools import workloads
from tests.recovery.test_checkpoint_recovery import _check_counts, _count_view


def _vote_db(seed: int | None = None, shards: int = 2):
    """The vote view; its first reader shard, the reader's parent (a project over the
    join with several shards, the join itself with one) and the join."""
    db = noria_py.connect(shards=shards, seed=seed)
    for sql in workloads.SCHEMA:
        db.execute(sql)
    db.execute(workloads.VIEW)
    db.table("article").insert(workloads.articles(8))
    g = {n["id"]: n for n in db.graph()}
    reader = next(n for n in g if g[n]["kind"] == "reader" and g[n]["shard"] in (None, 0))
    project = g[reader]["parents"][0]
    join = project if g[project]["kind"] == "join" else g[project]["parents"][0]
    assert (g[project]["kind"], g[join]["kind"]) == ("project" if shards > 1 else "join", "join")
    return db, reader, project, join


def _write(db, votes: list[tuple], start: int, n: int) -> None:
    for i in range(start, start + n):
        rows = [(i % 8, i), ((i * 3) % 8, i)]
        db.table("vote").insert(rows)
        votes.extend(rows)


def _right(db, votes: list[tuple]) -> None:
    db.wait()
    counts: dict[int, int] = {}
    for a, _ in votes:
        counts[a] = counts.get(a, 0) + 1
    for k in range(8):
        assert db.view(workloads.VIEW_NAME).lookup(k) == [(k, f"article {k}", counts.get(k))]


@pytest.mark.parametrize("seed,shards", [(None, 2), (3, 2), (4, 1)])
def test_a_reader_over_a_join_is_rebuilt_alone_and_with_its_parents(seed, shards):
    """The vote reader (over a project over the join) fails alone, with writes left in
    flight to it (``seed``: what its parent sent at or below the rebuild time arrives
    after the rebuild and must be dropped), then with its project, then with its join:
    each time the view is right, and the store never held a checkpoint of it."""
    db, reader, project, join = _vote_db(seed, shards)
    store = db.runtime.store
    votes: list[tuple] = []
    _write(db, votes, 0, 200)
    downs = [[reader], [reader], [project, reader], [join, reader]][:4 if shards > 1 else 3]
    for i, down in enumerate(downs):
        _write(db, votes, 1000 * (i + 1), 30)        # (some still in flight: seed)
        for n in down:
            db.fail(n)
        _write(db, votes, 1000 * (i + 1) + 500, 20)
        if len(down) > 1:
            reports = db.recover()                   # (the parent first)
            paths = {k: v for r in reports for k, v in r.paths.items()}
        else:
            paths = db.recover(reader, strategy="treeclock").paths
        assert paths[reader] == "rebuilt", paths
        assert not store.has(reader)
        _right(db, votes)
    # (the join, over the article table and COUNT, or with two shards over a sharder
    # of the table and a COUNT shard, is rebuilt from its parents too)
    assert not store.has(reader) and db.runtime.domains[join].store is None


def test_a_reader_and_its_aggregate_failed_together_parent_first():
    """A reader directly over COUNT, both failed: recovering the reader brings the
    aggregate back first (from its checkpoint), then rebuilds the reader from it."""
    db, reader, agg = _count_view(seed=5)
    assert db.graph_[agg].kind == "aggregate"
    votes: list[tuple] = []
    for i in range(300):
        db.table("vote").insert([(i % 8, i)])
        votes.append((i % 8, i))
    db.fail(reader)
    db.fail(agg)
    for i in range(300, 340):
        db.table("vote").insert([(i % 8, i)])
        votes.append((i % 8, i))
    report = db.recover(reader, strategy="treeclock")
    assert report.paths == {agg: "checkpoint", reader: "rebuilt"}, report
    _check_counts(db, votes)


def test_the_logs_above_a_rebuilt_reader_stay_short(monkeypatch):
    """No payload log to the reader, and the join's log to the project is trimmed at
    every acknowledgement (at most ``ACK_EVERY`` batches behind, and the lag of the
    clock it reads), where a checkpointing reader held it back to its stable checkpoint
    (a checkpoint interval of batches)."""
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", 64)
    longest = {}
    for rebuilt in (True, False):
        monkeypatch.setattr(tuning, "REBUILT_FROM_PARENTS", rebuilt)
        db, reader, project, join = _vote_db()
        votes: list[tuple] = []
        most = 0
        for i in range(400):
            _write(db, votes, i, 1)
            most = max(most, len(db.runtime.domains[join].payload.get(project, ())))
            assert not db.runtime.domains[project].payload.get(reader) or not rebuilt
        longest[rebuilt] = most
        _right(db, votes)
    # (the clock an acknowledgement reads lags up to FLUSH_EVERY receipts)
    assert longest[True] <= tuning.ACK_EVERY + tuning.FLUSH_EVERY < longest[False], longest


@pytest.mark.parametrize("seed", [3, 7, 11])
def test_a_rebuilt_reader_stays_in_arrays_with_messages_in_flight_above_it(seed):
    """The reader is rebuilt from its parent's output while the join has sent the
    project messages it has not taken yet (``seed``: delivered lazily): the join's
    snapshot comes as columns, then each of those messages undone, newest first
    (``output_through``), so every batch the reader takes is a state the output once
    was, one row a key, and its arrays take each (undone oldest first, a key's count
    would be removed at a value it no longer holds: the arrays refuse it, and the
    state leaves them for good). The view is right."""
    db, reader, project, join = _vote_db(seed, shards=2)
    op = db.graph_[reader].op
    votes: list[tuple] = []
    for i in range(3):
        _write(db, votes, 100 * i, 40)
        db.fail(reader)
        _write(db, votes, 100 * i + 50, 30)
        assert db.recover(reader, strategy="treeclock").paths == {reader: "rebuilt"}
        assert op.state.form == "dense"
        _right(db, votes)


@pytest.mark.parametrize("seed,shards", [(None, 1), (3, 1), (8, 1), (3, 2), (6, 2)])
def test_a_join_over_a_table_and_an_aggregate_is_rebuilt_alone_and_with_its_neighbours(
        seed, shards):
    """The vote join (one shard: over the article table and COUNT; two: each shard over
    a sharder of the table and a COUNT shard) takes no checkpoints. It fails alone,
    with writes in flight to it and to its child (``seed``: delivered lazily) and votes
    while it is down, then with COUNT, with its other parent (the table, or its
    sharder) and with the reader below it (``db.recover()``: the parents first, the
    reader after it): each time it is rebuilt from its parents' output up to the times
    its child names, and the view is right. Votes go to articles not written
    yet too, and two are written after each recovery: their rows join the counts the
    rebuilt join holds, so a count side rebuilt past its child's times (a vote counted
    twice) shows."""
    db, reader, project, join = _vote_db(seed, shards=shards)
    g = db.graph_
    count = next(p for p in g[join].parents if g[p].kind == "aggregate")
    article = next(p for p in g[join].parents if p != count)
    assert g[article].kind == ("base" if shards == 1 else "sharder")
    store = db.runtime.store
    counts: dict[int, int] = {}

    def vote(start: int, n: int) -> None:
        for i in range(start, start + n):
            rows = [(i % 20, i), ((i * 3) % 20, i)]
            db.table("vote").insert(rows)
            for a, _ in rows:
                counts[a] = counts.get(a, 0) + 1

    vote(0, 200)
    for i, down in enumerate([[join], [join], [count, join], [article, join],
                              [join, reader], [join]]):
        vote(1000 * (i + 1), 30)                     # (some still in flight: seed)
        for n in down:
            db.fail(n)
        vote(1000 * (i + 1) + 500, 20)
        paths = {k: v for r in db.recover() for k, v in r.paths.items()}
        assert paths[join] == "rebuilt", paths
        assert paths.get(count, "checkpoint") == "checkpoint", paths
        assert not store.has(join)
        db.table("article").insert([(k, f"article {k}") for k in (8 + 2 * i, 9 + 2 * i)])
        db.wait()
        view = db.view(workloads.VIEW_NAME)
        for k in range(10 + 2 * i):
            assert view.lookup(k) == [(k, f"article {k}", counts.get(k))], (k, down)
    assert db.runtime.domains[count].store is not None and store.has(count)


def test_a_joins_parents_logs_to_it_are_trimmed_at_its_childs_acknowledgements(monkeypatch):
    """COUNT's payload log to a rebuilt join is trimmed as to a stateless node (at most
    ``ACK_EVERY`` batches behind, and the lag of the clock it reads), where a
    checkpointing join held it back to its stable checkpoint."""
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", 64)
    longest = {}
    for rebuilt in (True, False):
        monkeypatch.setattr(tuning, "REBUILT_FROM_PARENTS", rebuilt)
        db, reader, project, join = _vote_db(shards=1)
        count = next(p for p in db.graph_[join].parents if db.graph_[p].kind == "aggregate")
        votes: list[tuple] = []
        most = 0
        for i in range(400):
            _write(db, votes, i, 1)
            most = max(most, len(db.runtime.domains[count].payload.get(join, ())))
        longest[rebuilt] = most
        assert (db.runtime.domains[join].store is None) == rebuilt
        _right(db, votes)
    assert longest[True] <= tuning.ACK_EVERY + tuning.FLUSH_EVERY < longest[False], longest


@pytest.mark.parametrize("seed", [None, 3, 9])
def test_a_reader_over_the_union_of_aggregate_shards_is_rebuilt(seed):
    """Bids per auction, COUNT sharded by auction, the reader keyed by the count: it
    sits on the union that merges the COUNT shards (as NEXMark's views do,
    ``noria_tools/nexmark.py``), so it takes no checkpoints and the union keeps no log
    to it. It fails alone, with writes in flight (``seed``), then with the union, then
    with a COUNT shard; then the shard and the union fail without it: each time the
    reader holds no checkpoint and the view is right."""
    db = noria_py.connect(shards=2, seed=seed)
    db.execute("CREATE TABLE bid (auction INT, price INT)")
    db.execute("CREATE VIEW hot AS SELECT auction, COUNT(*) AS n FROM bid GROUP BY auction")
    g = db.graph_
    reader = next(n for n in g.nodes if g[n].kind == "reader")
    union = g[reader].parents[0]
    assert g[union].kind == "union" and len(g[union].parents) == 2
    shard = g[union].parents[0]
    assert g[shard].kind == "aggregate"
    assert db.runtime.domains[reader].store is None      # (no checkpoints of it)
    bids: list[tuple] = []

    def write(start: int, n: int) -> None:
        for i in range(start, start + n):
            rows = [(i % 11, i), ((i * 7) % 11, i + 1)]
            db.table("bid").insert(rows)
            bids.extend(rows)

    write(0, 100)
    for i, down in enumerate([[reader], [union, reader], [shard, reader], [shard, union]]):
        write(1000 * (i + 1), 20)                    # (some still in flight: seed)
        for n in down:
            db.fail(n)
        write(1000 * (i + 1) + 500, 15)
        paths = {k: v for r in db.recover() for k, v in r.paths.items()}
        assert paths.get(reader, "rebuilt") == "rebuilt", paths
        assert not db.runtime.store.has(reader)
        assert not db.runtime.domains[union].payload.get(reader)
        db.wait()
        counts: dict[int, int] = {}
        for a, _ in bids:
            counts[a] = counts.get(a, 0) + 1
        assert sorted(db.view("hot").all()) == sorted(counts.items()), down
