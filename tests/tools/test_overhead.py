"""The Figure 3 harness (noria_tools/overhead.py), at a tiny size: its shape, not its speed."""
from __future__ import annotations

import gc

import pytest

import noria_py
from noria_py.runtime.checkpoints import rebuilt_from_parents
from noria_tools import overhead


@pytest.mark.parametrize("mode", ["default", "paused"])
def test_sweep_reports_both_settings_and_paired_costs(mode):
    was = gc.get_threshold(), gc.isenabled()
    try:
        r = overhead.sweep(articles=200, prefill=1000, seconds=0.05, fractions=[0.5, 1.0],
                           repeats=2, gc_mode=mode)
    finally:
        gc.set_threshold(*was[0])
    assert gc.isenabled() == was[1]         # "paused" turns the collector back on
    for c in (True, False):
        assert r[c]["max"] > 0 and len(r[c]["max_runs"]) == 4    # 2 turns, 2 again
        for f in (0.5, 1.0):
            point = r[c][f]
            assert point["rate"] == pytest.approx(f * point["top"]) and point["top"] > 0
            assert 0 < point["p50"] <= point["p95"] <= point["p99"]
            assert len(point["p50_runs"]) == 2
    assert set(r["paired"]) == {0.5, 1.0}


def test_sweep_can_measure_the_maximum_once():
    was = gc.get_threshold()
    try:
        r = overhead.sweep(articles=200, prefill=1000, seconds=0.05, fractions=[0.5, 1.0],
                           repeats=2, max_each=False)
    finally:
        gc.set_threshold(*was)
    assert len(r[True]["max_runs"]) == 2
    top = min(r[True]["max"], r[False]["max"])
    assert r[True][0.5]["rate"] == pytest.approx(0.5 * top)


def test_per_insert_pairs_on_and_off():
    was = gc.get_threshold()
    try:
        r = overhead.per_insert(batch=3, inserts=40, articles=200, prefill=1000)
    finally:
        gc.set_threshold(*was)
    assert gc.isenabled()
    assert r["on"] > 0 and r["off"] > 0 and isinstance(r["paired"], float)
    assert r["total"] > 0


@pytest.fixture
def made(monkeypatch):
    """(clocks, checkpoints) of every database the benchmark makes."""
    made: list[tuple[bool, bool]] = []
    real = overhead._db

    def db(clocks, articles, prefill, checkpoints=True):
        made.append((clocks, checkpoints))
        return real(clocks, articles, prefill, checkpoints)
    monkeypatch.setattr(overhead, "_db", db)
    return made


def test_per_insert_against_clocks_alone(made):
    """``against="no-checkpoints"``: both settings have clocks, one of them no
    checkpoints."""
    r = overhead.per_insert(batch=3, inserts=10, articles=200, prefill=0,
                            against="no-checkpoints")
    assert sorted(set(made)) == [(True, False), (True, True)] and r["total"] > 0
    with pytest.raises(noria_py.ArgumentError, match="against"):
        overhead.per_insert(batch=3, inserts=10, against="nothing")


def test_per_insert_against_itself_has_no_clocks_on_either_side(made):
    """``against="itself"`` (an A/A run, the harness's own bias): "on" is built as "off"
    is, without clocks, so neither side keeps clocks, logs or checkpoints."""
    r = overhead.per_insert(batch=3, inserts=10, articles=200, prefill=0, against="itself")
    assert len(made) == 4 and set(made) == {(False, False)} and r["total"] > 0


def test_per_insert_of_sizes_in_a_range_gives_both_settings_the_same(monkeypatch):
    """``batch=(lo, hi)``: each insert's size drawn from lo to hi, the same rows to on
    and off (as the open loop's inserts vary, small ones taking the row-by-row paths)."""
    sizes: dict[bool, list[int]] = {True: [], False: []}
    real = overhead._db

    def db(clocks, articles, prefill, checkpoints=True):
        d = real(clocks, articles, prefill, checkpoints)
        table = d.table

        def vote(name):
            t = table(name)
            insert = t.insert
            t.insert = lambda rows: (sizes[clocks].append(len(rows)), insert(rows))
            return t
        d.table = vote
        return d
    monkeypatch.setattr(overhead, "_db", db)
    r = overhead.per_insert(batch=(1, 60), inserts=60, articles=200, prefill=0)
    assert r["total"] > 0
    assert sizes[True] == sizes[False] and len(sizes[True]) == 60
    assert min(sizes[True]) >= 1 and max(sizes[True]) <= 60 and len(set(sizes[True])) > 5


def test_run_at_offers_half_reads_half_votes():
    db = overhead._db(False, 100, 0)
    r = overhead.run_at(db, None, 400, 100, seed=1)
    assert len(r["lat"]) == 200 and r["ops"] > 0
    assert db.execute("SELECT COUNT(*) FROM vote").fetchall() == [(200,)]
    db.close()


def test_unknown_gc_mode_is_refused():
    with pytest.raises(noria_py.ArgumentError, match="gc mode"):
        overhead.sweep(10, 0, 0.01, [0.5], 1, gc_mode="sometimes")


@pytest.mark.parametrize("checkpoints", [True, False])
def test_on_is_clocks_with_checkpoints_and_off_neither(checkpoints):
    """Figure 3's "on" is the engine as it ships: clocks and the stateful nodes'
    checkpoints (clocks alone with ``checkpoints=False``); "off" has neither."""
    on = overhead._db(True, 100, 1000, checkpoints)
    off = overhead._db(False, 100, 1000, checkpoints)
    try:
        assert on.runtime.tc is not None and off.runtime.tc is None
        # (a reader over stateful parents is rebuilt from them, never checkpointed)
        stateful = [d for d in on.runtime.domains.values() if d.node.op.checkpoint_form
                    and not rebuilt_from_parents(on.runtime.graph, d.node)]
        assert stateful and all((d.store is not None) == checkpoints for d in stateful)
        store = on.runtime.store
        assert (store is not None) == checkpoints
        assert store is None or all(store.has(d.id) for d in stateful)
        assert off.runtime.store is None
    finally:
        on.close()
        off.close()


def test_checkpoint_storage_reports_store_and_live_rows(monkeypatch):
    """``bench vote --checkpoint-report``'s storage lines: the store holds the state
    (plus the keys changed above the low mark), per checkpointed node, once a
    checkpoint has been taken since the votes came (one at each message here)."""
    from noria_py import tuning
    from noria_tools.bench import checkpoint_storage
    monkeypatch.setattr(tuning, "ACK_EVERY", 1)
    monkeypatch.setattr(tuning, "CHECKPOINT_EVERY", 1)
    db = overhead._db(True, 100, 1000)
    try:
        got = {kind: (held, deltas, live) for _, kind, held, deltas, live
               in checkpoint_storage(db)}
        assert got["aggregate"][2] == 100               # groups
        assert "join" not in got and "reader" not in got   # rebuilt from their parents
        assert all(live <= held <= 2 * live for held, _, live in got.values())
    finally:
        db.close()
    assert checkpoint_storage(overhead._db(False, 100, 0)) == []


def test_sweep_against_clocks_alone(made):
    """The sweep's "off" can be clocks alone too (the checkpoints' own cost)."""
    was = gc.get_threshold()
    try:
        r = overhead.sweep(articles=200, prefill=0, seconds=0.02, fractions=[0.5], repeats=2,
                           against="no-checkpoints")
    finally:
        gc.set_threshold(*was)
    assert sorted(set(made)) == [(True, False), (True, True)]
    assert r[True][0.5]["ops"] > 0 and r[False][0.5]["ops"] > 0


def test_per_insert_from_the_command_line_takes_prefill(monkeypatch, capsys):
    """``bench overhead --per-insert ... --prefill N`` builds its databases from N votes
    (the 80% point's state: every article counted), and from 100,000 without it."""
    from noria_tools.cli import main
    prefills: list[int] = []
    real = overhead._db

    def db(clocks, articles, prefill, checkpoints=True):
        prefills.append(prefill)
        return real(clocks, articles, min(prefill, 1000), checkpoints)
    monkeypatch.setattr(overhead, "_db", db)
    args = ["bench", "overhead", "--per-insert", "3", "--inserts", "10", "--articles", "200"]
    assert main([*args, "--prefill", "600"]) == 0
    assert set(prefills) == {600} and "600 votes first" in capsys.readouterr().out
    prefills.clear()
    assert main(args) == 0
    assert set(prefills) == {100_000} and "100,000 votes first" in capsys.readouterr().out
