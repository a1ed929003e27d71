"""Cost of making one write batch durable: the per-batch price every base
write pays with ``data_dir`` set. The no-fsync case isolates encoding and
framing from the disk."""

from __future__ import annotations

import pytest

from noria_py.storage import Storage

ROWS = [(i, i * 7) for i in range(1000)]


@pytest.mark.parametrize("sync", [True, False], ids=["fsync", "no-fsync"])
def test_append_1000_row_batch(benchmark, tmp_path, sync):
    benchmark.group = "storage append (1000 rows of two ints)"
    calls = [0]
    with Storage(tmp_path, sync=sync, snapshot_max_bytes=1 << 40) as st:
        def append() -> int:
            calls[0] += 1
            return st.append("vote", ROWS, ())

        lsn = benchmark(append)
        assert lsn == st.lsn == calls[0]
    with Storage(tmp_path, sync=False) as st:        # every batch is in the log
        rows = st.load().tables["vote"]
    assert len(rows) == len(ROWS) * calls[0]
    assert list(rows[:len(ROWS)]) == ROWS and list(rows[-len(ROWS):]) == ROWS


def test_recover_100k_rows_from_log(benchmark, tmp_path):
    """Restart time when everything is still in the log (no snapshot)."""
    with Storage(tmp_path, sync=False) as st:
        for _ in range(100):
            st.append("vote", ROWS, ())

    def reopen():
        with Storage(tmp_path, sync=False) as st:
            return st.load().tables["vote"]

    assert list(benchmark.pedantic(reopen, rounds=5, iterations=1)) == ROWS * 100


def test_recover_100k_rows_from_snapshot(benchmark, tmp_path):
    with Storage(tmp_path, sync=False) as st:
        st.append("vote", ROWS * 100, ())
        st.snapshot({"vote": ROWS * 100})

    def reopen():
        with Storage(tmp_path, sync=False) as st:
            return st.load().tables["vote"]

    assert list(benchmark.pedantic(reopen, rounds=5, iterations=1)) == ROWS * 100
