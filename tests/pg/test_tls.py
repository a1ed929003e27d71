"""TLS on the PostgreSQL front end: an SSLRequest is answered ``S`` and the connection
upgraded when the server has a certificate, ``N`` when it has none; a login and
queries work over it, SCRAM included."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import noria_py
from noria_py.errors import ArgumentError
from noria_py.pg import PgServer

psycopg = pytest.importorskip("psycopg")


def _dsn(server: PgServer, **extra: str) -> str:
    more = " ".join(f"{k}={v}" for k, v in extra.items())
    return f"host=127.0.0.1 port={server.port} user=tester dbname=noria {more}"


def test_a_client_that_asks_for_tls_gets_it_and_is_served(certificate: Any) -> None:
    db = noria_py.connect()
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    with PgServer(db, port=0, tls=certificate) as server:
        with psycopg.connect(_dsn(server, sslmode="require"), autocommit=True) as conn:
            assert conn.pgconn.ssl_in_use
            conn.execute("INSERT INTO t VALUES (%s, %s)", (1, 10))
            big = [(i, i % 7) for i in range(2, 3000)]     # many TLS records
            conn.cursor().executemany("INSERT INTO t VALUES (%s, %s)", big)
            assert conn.execute("SELECT COUNT(*), SUM(a) FROM t").fetchone() == (
                2999, 10 + sum(a for _, a in big))
        with psycopg.connect(_dsn(server, sslmode="disable"), autocommit=True) as conn:
            assert not conn.pgconn.ssl_in_use     # TLS is offered, not imposed
            assert conn.execute("SELECT COUNT(*) FROM t").fetchone() == (2999,)
    db.close()


def test_scram_over_tls(certificate: Any) -> None:
    db = noria_py.connect()
    with PgServer(db, port=0, token="s3cret", password_on_loopback=True,
                  tls=certificate) as server:
        with psycopg.connect(_dsn(server, sslmode="require", password="s3cret")) as conn:
            assert conn.pgconn.ssl_in_use and conn.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(_dsn(server, sslmode="require", password="wrong"))
    db.close()


def test_without_a_certificate_tls_is_refused_and_plain_text_goes_on() -> None:
    db = noria_py.connect()
    with PgServer(db, port=0) as server:
        with pytest.raises(psycopg.OperationalError, match="SSL"):
            psycopg.connect(_dsn(server, sslmode="require"))
        with psycopg.connect(_dsn(server, sslmode="prefer")) as conn:
            assert not conn.pgconn.ssl_in_use
            assert conn.execute("SELECT 1").fetchone() == (1,)
    db.close()


def test_a_bad_certificate_is_an_argument_error(tmp_path: Path, certificate: Any) -> None:
    db = noria_py.connect()
    with pytest.raises(ArgumentError, match="cannot use TLS certificate"):
        PgServer(db, port=0, tls=(str(tmp_path / "none.pem"), certificate[1]))
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(ArgumentError, match="cannot use TLS certificate"):
        PgServer(db, port=0, tls=(str(tmp_path / "junk.pem"), certificate[1]))
    db.close()
