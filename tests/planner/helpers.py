"""Plain helpers for the planner tests: a database or a bare planner over the same two
tables, and accessors that read ``db.graph()`` as statements about plan shape."""
from __future__ import annotations

import noria_py
from noria_py.graph import Graph
from noria_py.planner import Planner
from sql_frontend import CreateView, DictCatalog, parse

TABLES = ("CREATE TABLE t (a INT, b INT, c TEXT)", "CREATE TABLE u (x INT, y INT)")
T_ROWS = [(i % 5, i % 3, "abc"[i % 3]) for i in range(30)] + [(None, 1, None), (2, None, "z")]
U_ROWS = [(i % 4, i) for i in range(8)]


def connect(shards: int = 1, rows: bool = False) -> noria_py.Database:
    """A database with tables t and u (filled with T_ROWS and U_ROWS if ``rows``)."""
    db = noria_py.connect(shards=shards)
    for sql in TABLES:
        db.execute(sql)
    if rows:
        db.table("t").insert(T_ROWS)
        db.table("u").insert(U_ROWS)
    return db


class Bare:
    """A planner on a graph of its own, with no runtime: views planned from SQL over the
    tables t and u, whose base operators are written to directly."""

    def __init__(self, shards: int = 1) -> None:
        self.graph = Graph()
        self.planner = Planner(self.graph, shards, on_add=lambda node: None)
        self.catalog = DictCatalog()
        self.base: dict[str, str] = {}
        for sql in TABLES:
            schema = parse(sql, self.catalog).schema
            self.catalog.tables[schema.name] = schema
            self.base[schema.name] = self.planner.add_table(schema)
        self.planner.take_fresh()

    def write(self, table: str, rows) -> None:
        op = self.graph[self.base[table]].op
        op.process(0, op.prepare(inserts=rows))

    def add_view(self, sql: str) -> list[str]:
        """The view's reader ids (its new nodes are left in ``planner.fresh``)."""
        st = parse(sql, self.catalog)
        assert isinstance(st, CreateView)
        return self.planner.add_view(st.name, st.query)


def of_kind(db, kind: str) -> list[dict]:
    return [n for n in db.graph() if n["kind"] == kind]


def readers(db, view: str) -> list[dict]:
    return [n for n in db.graph() if n["kind"] == "reader" and n["view"] == view]


def upstream(db, view: str) -> set[str]:
    """The ids of every node a view reads through, its readers included."""
    g = {n["id"]: n for n in db.graph()}
    todo = [n["id"] for n in readers(db, view)]
    seen: set[str] = set()
    while todo:
        nid = todo.pop()
        if nid not in seen:
            seen.add(nid)
            todo.extend(g[nid]["parents"])
    return seen
