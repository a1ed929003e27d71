"""Fixtures of the PostgreSQL front end's tests: an engine served by ``PgServer``, and a
real PostgreSQL to compare it with (started and stopped here)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import noria_py
from noria_py.pg import PgServer
from tests import needs


@pytest.fixture
def served() -> Iterator[tuple[Any, PgServer]]:
    """An empty embedded database and a server of it on a free port."""
    db = noria_py.connect()
    server = PgServer(db, port=0).start()
    yield db, server
    server.stop()
    db.close()


@pytest.fixture
def conninfo(served: tuple[Any, PgServer]) -> str:
    return f"host=127.0.0.1 port={served[1].port} user=tester dbname=noria"


@pytest.fixture
def conn(conninfo: str) -> Iterator[Any]:
    """A psycopg connection in autocommit mode."""
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(conninfo, autocommit=True) as c:
        yield c


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A real PostgreSQL 15, for one test session."""
    server = needs.postgres()
    yield server
    server.stop()
