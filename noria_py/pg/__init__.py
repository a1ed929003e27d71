"""A PostgreSQL wire-protocol front end: psql, psycopg, asyncpg, SQLAlchemy and any
PostgreSQL client reach the engine's tables and views (docs/postgres.md).

- ``protocol``: the messages, as bytes; ``scram``: the login; ``types``: values in
  PostgreSQL's text and binary formats;
- ``catalog``: settings and the catalog queries drivers send;
- ``session``: one client's statements, portals and transaction;
- ``server``: ``PgServer`` and ``noria-py pg``.
"""
from .server import PgServer

__all__ = ["PgServer"]
