"""Small accessors so tests read as statements about plan shape."""
from sql_frontend import Project, Select, parse


def query(sql, cat, params=()):
    st = parse(sql, cat, params)
    assert isinstance(st, Select)
    return st.query


def select_exprs(sql, cat):
    """The expressions of the top Project of a plain SELECT."""
    q = query(sql, cat)
    root = q.root
    while not isinstance(root, Project):
        root = root.input
    return root.exprs


def expr(sql_expr, cat, table="t"):
    return select_exprs(f"SELECT {sql_expr} FROM {table}", cat)[0]


def find(rel, cls):
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
