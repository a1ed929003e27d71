"""Plain helpers for the sql_frontend tests (fixtures are in conftest.py): a catalog of
the tables the tests query, and small accessors so tests read as statements about
plan shape."""
from __future__ import annotations

from sql_frontend import CreateView, DictCatalog, Expr, Project, Query, Rel, Select, parse


def make_catalog() -> DictCatalog:
    """The tables every test can query (t, u, w, article, vote), and no views."""
    cat = DictCatalog()
    for ddl in (
        "CREATE TABLE t (a INT PRIMARY KEY, b INT, c TEXT, d FLOAT)",
        "CREATE TABLE u (x INT NOT NULL, y TEXT, z DATE)",
        "CREATE TABLE w (p INT, q INT, r TIMESTAMP)",
        "CREATE TABLE article (id INT PRIMARY KEY, title TEXT)",
        "CREATE TABLE vote (article_id INT, user_id INT)",
    ):
        st = parse(ddl, cat)
        cat.tables[st.schema.name] = st.schema
    return cat


def add_view(cat: DictCatalog, sql: str) -> CreateView:
    """Plan a CREATE VIEW and add the view to ``cat``."""
    st = parse(sql, cat)
    assert isinstance(st, CreateView)
    cat.views[st.name] = st.query
    return st


def query(sql: str, cat: DictCatalog, params: tuple = ()) -> Query:
    st = parse(sql, cat, params)
    assert isinstance(st, Select)
    return st.query


def select_exprs(sql: str, cat: DictCatalog) -> tuple[Expr, ...]:
    """The expressions of the top Project of a plain SELECT."""
    q = query(sql, cat)
    root = q.root
    while not isinstance(root, Project):
        root = root.input
    return root.exprs


def expr(sql_expr: str, cat: DictCatalog, table: str = "t") -> Expr:
    return select_exprs(f"SELECT {sql_expr} FROM {table}", cat)[0]


def find(rel: Rel, cls: type) -> list:
    """All nodes of type ``cls`` in a plan tree, top-down."""
    out = []
    stack = [rel]
    while stack:
        r = stack.pop()
        if isinstance(r, cls):
            out.append(r)
        for attr in ("input", "left", "right"):
            if hasattr(r, attr):
                stack.append(getattr(r, attr))
        if hasattr(r, "inputs"):
            stack.extend(r.inputs)
    return out
