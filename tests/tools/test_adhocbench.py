"""noria-py bench adhoc: inserts timed in turns against a reference database (the same
batches to both, the first going first every other turn, the ratio taken turn by turn),
and a tiny run end to end."""
from __future__ import annotations

from noria_tools import adhocbench
from noria_tools.adhocbench import main, paired_insert_ms


class _Clock:
    """A fake ``time.perf_counter``: each table's insert advances it by that table's cost."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Table:
    def __init__(self, clock: _Clock, cost: float, log: list) -> None:
        self.clock, self.cost, self.log, self.rows = clock, cost, log, []

    def insert(self, batch: list) -> None:
        self.clock.now += self.cost
        self.rows.extend(batch)
        self.log.append(self)


def test_paired_inserts_alternate_and_take_the_ratio_turn_by_turn(monkeypatch):
    clock, log = _Clock(), []
    monkeypatch.setattr(adhocbench.time, "perf_counter", clock)
    a, b = _Table(clock, 0.004, log), _Table(clock, 0.001, log)
    ms, ratio, nxt = paired_insert_ms([(None, a), (None, b)], 10, rows=5, runs=4)
    assert nxt == 30 and a.rows == b.rows and [r[0] for r in a.rows] == list(range(10, 30))
    assert log == [a, b, b, a, a, b, b, a]
    assert ms == [4.0, 1.0] and ratio == 4.0


def test_bench_adhoc_prints_each_mark_against_the_reference(capsys):
    for shape in ("range", "key"):
        assert main(["--rows", "500", "--queries", "16", "--runs", "3", "--shape", shape]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == ["queries", "insert", "ms", "ref", "ms", "over", "ref",
                                  "nodes", "queries", "s"]
        assert [line.split()[0] for line in out[1:4]] == ["0", "1", "16"]
        assert [line.split()[4] for line in out[1:4]] == ["1", "2", "2"]     # nodes
        assert out[4].startswith("after each mark over after the first query: 16: ")
