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
    with Storage(tmp_path, sync=sync, snapshot_max_bytes=1 << 40) as st:
        lsn = benchmark(st.append, "vote", ROWS, ())
        assert lsn == st.lsn


def test_recover_100k_rows_from_log(benchmark, tmp_path):
    """Restart time when everything is still in the log (no snapshot)."""
    with Storage(tmp_path, sync=False) as st:
        for _ in range(100):
            st.append("vote", ROWS, ())

    def reopen() -> int:
        with Storage(tmp_path, sync=False) as st:
            return len(st.load().tables["vote"])

    assert benchmark.pedantic(reopen, rounds=5, iterations=1) == 100_000


def test_recover_100k_rows_from_snapshot(benchmark, tmp_path):
    with Storage(tmp_path, sync=False) as st:
        st.append("vote", ROWS * 100, ())
        st.snapshot({"vote": ROWS * 100})

    def reopen() -> int:
        with Storage(tmp_path, sync=False) as st:
            return len(st.load().tables["vote"])

    assert benchmark.pedantic(reopen, rounds=5, iterations=1) == 100_000
