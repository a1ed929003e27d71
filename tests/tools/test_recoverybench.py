"""``noria-py bench recovery --node KIND`` (noria_tools/recoverybench.py), at a tiny size:
that it runs, prints a row per kind, and that its result check catches a wrong answer."""
from __future__ import annotations

import re

import pytest

from noria_tools import bench, recoverybench

TINY = ["--sizes", "2e3", "--articles", "500", "--shards", "2", "--rounds", "1"]


def test_node_mode_times_and_checks_two_kinds(capsys, tmp_path):
    plot = tmp_path / "nodes.png"
    assert bench.run_recovery(["--node", "aggregate,topk", *TINY, "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.split()[2:3] == ["2,000"]]
    assert [r[0] for r in rows] == ["aggregate", "topk"]
    for r in rows:
        assert float(r[3]) > 0 and float(r[4]) > 0      # treeclock, lineage seconds
    assert plot.stat().st_size > 0


def test_the_check_catches_a_wrong_count_and_a_wrong_top():
    bed = recoverybench.vote_bed(2000, articles=50, shards=2, top="topk")
    recoverybench.check(bed)
    bed.counts[:] += 1
    with pytest.raises(AssertionError, match="ArticleWithVoteCount"):
        recoverybench.check(bed)
    bed.counts[:] -= 1
    bed.written.append(bed.written[0][:50] + [0, 1])   # users the view never saw
    with pytest.raises(AssertionError, match="top3"):
        recoverybench.check(bed)
    bed.db.close()


def test_the_check_catches_a_missing_and_a_doubled_distinct_row():
    bed = recoverybench.vote_bed(2000, articles=50, shards=2, top="distinct")
    bed.written.append(bed.written[0][:5])              # votes again: the same rows
    recoverybench.check(bed)
    bed.written.append(bed.written[0][:50] + [0, 1])    # users the view never saw
    with pytest.raises(AssertionError, match="voters"):
        recoverybench.check(bed)
    bed.db.close()


def test_alternating_rounds_time_every_strategy_and_check_every_round(capsys):
    argv = ["--node", "distinct", *TINY[:-1], "3"]
    assert bench.run_recovery(argv) == 0
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if line.startswith("  distinct"))
    assert float(row[3]) > 0 and float(row[4]) > 0
    assert float(row[6]) == pytest.approx(float(row[3]) / float(row[4]), rel=0.01)
    rounds = next(line for line in out.splitlines() if line.strip().startswith("rounds:"))
    tc, lin = rounds.split(":")[1].split(";")
    # every round timed; a tree-clock round says how the DISTINCT shard came back
    assert re.fullmatch(r" treeclock( \d+\.\d{4} \((ck|rebuilt)\)){3}", tc), tc
    assert re.fullmatch(r" lineage( \d+\.\d{4}){3}", lin), lin


@pytest.mark.parametrize("kind,want", [("sharder", "n3"), ("aggregate", "n4.0"),
                                       ("join", "n6.0"), ("reader", "n8.0")])
def test_pick_node_finds_the_vote_path(kind, want):
    bed = recoverybench.vote_bed(100, articles=10, shards=2)
    assert recoverybench.pick_node(bed.db.graph(), kind) == want
    with pytest.raises(ValueError, match="no topk node"):
        recoverybench.pick_node(bed.db.graph(), "topk")
    bed.db.close()


def test_unknown_kind_is_refused():
    with pytest.raises(SystemExit, match="unknown --node"):
        bench.run_recovery(["--node", "filter", *TINY])


def test_a_failing_spark_is_reported_and_the_others_go_on(monkeypatch, capsys):
    from noria_py.client import Database
    from noria_py.errors import RecoveryError
    real = Database.recover

    def recover(self, node_id=None, strategy="treeclock"):
        if strategy == "spark":
            raise RecoveryError("no Spark here")
        return real(self, node_id, strategy)
    monkeypatch.setattr(Database, "recover", recover)
    argv = ["--node", "join", *TINY, "--strategies", "treeclock,spark,lineage"]
    assert bench.run_recovery(argv) == 0
    out = capsys.readouterr().out
    assert "spark failed recovering n6.0: RecoveryError: no Spark here" in out
    row = next(line.split() for line in out.splitlines() if line.startswith("      join"))
    assert row[4] == "-" and float(row[3]) > 0 and float(row[5]) > 0


def test_a_database_is_closed_once_no_later_kind_runs_on_it(monkeypatch):
    """At 1e7 votes a database holds gigabytes: each goes as soon as the kinds left
    need another (the vote database is kept past topk for the reader)."""
    made: list = []
    closed: list = []
    real = recoverybench.vote_bed

    def bed(*args, **kwargs):
        b = real(*args, **kwargs)
        made.append(b.top)
        close = b.db.close
        b.db.close = lambda: (closed.append(b.top), close())[1]
        return b

    monkeypatch.setattr(recoverybench, "vote_bed", bed)
    assert bench.run_recovery(["--node", "aggregate,topk,reader", *TINY,
                               "--strategies", "treeclock"]) == 0
    assert made == [None, "topk"]
    assert closed == ["topk", None]


def test_a_pair_fails_together_and_the_child_comes_back_from_its_checkpoint(capsys):
    """``--node sharder+aggregate``: the sharder and its first COUNT shard fail together;
    every round is checked, and tree clocks bring the shard back from its checkpoint."""
    bed = recoverybench.vote_bed(100, articles=10, shards=2)
    assert recoverybench.pick_pair(bed.db.graph(), "aggregate+join") == ("n4.0", "n6.0")
    bed.db.close()
    assert bench.run_recovery(["--node", "sharder+aggregate", *TINY]) == 0
    out = capsys.readouterr().out
    assert any(line.split()[:2] == ["sharder+aggregate", "n3+n4.0"] for line in out.splitlines())
    rounds = next(line for line in out.splitlines() if line.strip().startswith("rounds:"))
    assert "treeclock" in rounds and "(ck)" in rounds and "rebuilt" not in rounds, rounds


def test_since_fails_the_shard_that_many_messages_past_its_checkpoint(capsys, monkeypatch):
    """``--since K``: the COUNT shard's checkpoint by hand, then K inserts before the
    round's; its recovery comes back from that checkpoint and replays what came since
    (``Domain.restore_state`` is given at least K of its parent's messages), every
    round checked; the schedule's interval is back afterwards. Refused for a pair."""
    from noria_py import tuning
    from noria_py.runtime.domain import Domain
    given: list[int] = []
    restore = Domain.restore_state
    monkeypatch.setattr(Domain, "restore_state", lambda self, ck, inputs: (
        given.append(len(inputs)), restore(self, ck, inputs))[1])
    every = tuning.CHECKPOINT_EVERY
    assert bench.run_recovery(["--node", "aggregate", *TINY, "--since", "40",
                               "--strategies", "treeclock"]) == 0
    out = capsys.readouterr().out
    assert "its checkpoint, 40 inserts of 100 votes" in out
    rounds = next(line for line in out.splitlines() if line.strip().startswith("rounds:"))
    assert "(ck)" in rounds, rounds
    assert given and min(given) >= 40, given
    assert tuning.CHECKPOINT_EVERY == every
    with pytest.raises(SystemExit):
        bench.run_recovery(["--node", "sharder+aggregate", *TINY, "--since", "5"])
