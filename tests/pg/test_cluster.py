"""The PostgreSQL front end over a cluster: ``noria-py serve --pg-port`` (which runs
``noria-py pg --server`` beside the controller), subscriptions and an exact AVG (the
storage codec's extension type 6 across the cluster's wire) and range parameters
included, described as the controller's plan says (``Result.plan_oids``)."""
from __future__ import annotations

import socket
import time
from decimal import Decimal

import pytest

from noria_py.runtime.cluster.launch import Cluster

psycopg = pytest.importorskip("psycopg")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_cluster_serves_postgres_clients() -> None:
    port = _free_port()
    with Cluster(workers=1, shards=2, extra=("--pg-port", str(port))) as cluster:
        for _ in range(300):
            try:
                conn = psycopg.connect(f"host=127.0.0.1 port={port} user=u dbname=noria",
                                       autocommit=True)
                break
            except psycopg.OperationalError:
                time.sleep(0.1)
        else:
            pytest.fail("noria-py pg --server did not start")
        with conn:
            conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, d DATE)")
            conn.execute("CREATE VIEW by_a AS SELECT a, COUNT(*) AS n, AVG(id) AS m FROM t "
                         "GROUP BY a")
            conn.cursor().executemany("INSERT INTO t (id, a, d) VALUES (%s, %s, %s)",
                                      [(i, i % 3, "2024-01-0%d" % (1 + i % 9)) for i in range(30)])
            with conn.transaction():
                conn.execute("INSERT INTO t (id, a) VALUES (%s, %s), (%s, %s)", (100, 7, 101, 7))
            for _ in range(3):
                got = conn.execute("SELECT n FROM by_a WHERE a = %s", (7,),
                                   prepare=True).fetchall()
                assert got == [(2,)]
            # AVG of integers crosses the cluster's wire exact: PostgreSQL's numeric
            for prepare in (False, True):
                cur = conn.execute("SELECT m FROM by_a WHERE a = %s", (7,), prepare=prepare)
                assert cur.fetchall() == [(Decimal("100.5000000000000000"),)]
                assert cur.description[0].type_code == 1700
            # described as the controller's plan says: numeric without a value too,
            # arithmetic on an AVG numeric, a cast of one to float8 double precision
            for prepare in (False, True):
                cur = conn.execute("SELECT m, m * 2, m::float8 FROM by_a WHERE a = %s", (99,),
                                   prepare=prepare)
                assert cur.fetchall() == []
                assert [d.type_code for d in cur.description] == [1700, 1700, 701]
            cur = conn.execute("SELECT m * 2 + 1, m::float8 FROM by_a WHERE a = %s", (7,))
            assert cur.fetchall() == [(Decimal("202.0000000000000000"), 100.5)]
            for binary in (False, True):        # (no key: the controller runs it)
                cur = conn.cursor(binary=binary).execute("SELECT AVG(a), AVG(a) / 3 FROM t "
                                                         "WHERE id < 0")
                assert cur.fetchall() == [(None, None)]
                assert [d.type_code for d in cur.description] == [1700, 1700]
            assert conn.execute("SELECT COUNT(*) FROM t WHERE d > %s",
                                ("2024-01-05",)).fetchone() == (12,)
            # range parameters (docs/sql.md): a parameter or a constant, one view a shape
            for prepare in (False, True):
                got = conn.execute("SELECT id FROM t WHERE a = %s AND id >= %s ORDER BY id",
                                   (1, 20), prepare=prepare).fetchall()
                assert got == [(22,), (25,), (28,)]
            for lo in (3, 27):
                got = conn.execute(f"SELECT id FROM t WHERE id BETWEEN {lo} AND {lo + 2} "
                                   "ORDER BY id").fetchall()
                assert got == [(lo,), (lo + 1,), (lo + 2,)]
            names = conn.execute("SELECT table_name FROM information_schema.tables "
                                 "WHERE table_schema = 'public' ORDER BY 1").fetchall()
            assert names == [("by_a",), ("t",)]
            with psycopg.connect(f"host=127.0.0.1 port={port} user=u dbname=noria",
                                 autocommit=True) as listener:
                with pytest.raises(psycopg.errors.QueryCanceled):
                    with listener.cursor().copy("COPY (SUBSCRIBE by_a) TO STDOUT") as copy:
                        rows = copy.rows()
                        snapshot = sorted(next(rows)[1:] for _ in range(4))
                        conn.execute("INSERT INTO t (id, a) VALUES (200, 7)")
                        changes = sorted(next(rows)[1:] for _ in range(2))
                        listener.cancel_safe()
                        for _ in rows:
                            pass
            assert snapshot == [("1", "0", "10", "13.5000000000000000"),
                                ("1", "1", "10", "14.5000000000000000"),
                                ("1", "2", "10", "15.5000000000000000"),
                                ("1", "7", "2", "100.5000000000000000")]
            assert changes == [("-1", "7", "2", "100.5000000000000000"),
                               ("1", "7", "3", "133.6666666666666667")]
        assert cluster.alive()
