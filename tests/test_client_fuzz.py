"""Random calls of the Python API with random values (issue 24, part 6): anything but a
``noria_py.Error`` or a right answer fails.

Each example opens a database with a small schema (``SCHEMA``) and makes random calls
of ``insert``, ``insert_arrow``, ``delete``, ``delete_keys``, ``lookup``,
``lookup_many``, ``execute``, ``table`` and ``view``, with values drawn from valid ones
and garbage (None, huge ints, infinities, lone surrogates, bytes, dates where numbers
go, time zones, nested lists, dicts, objects). A plain Python ``Model`` of the tables
says, for the calls whose rules are crisp, whether the call must be refused and with
which error class, and what it must return. After every call:

- the call raised nothing but a ``noria_py.Error`` (anything else fails the test);
- a refused call changed nothing, an accepted one exactly what the model changed: every
  table's rows and every view (read whole and by key) equal the model's, value types
  included (``1`` is not ``1.0`` nor ``True``);
- with a data directory (the slow variant), the database reopened holds the model's rows.

NaN is left out: what equality means for it is a question of its own (rows holding
NaN compare unequal to themselves in Python).
"""
from __future__ import annotations

import datetime
import math
from collections import Counter
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import noria_py
from noria_py import ArityError, DuplicateKeyError, Error, RowNotFoundError, TypeMismatchError
from sql_frontend.types import INT_MAX, INT_MIN, is_text

SCHEMA = [
    "CREATE TABLE t (a INT, b TEXT, c FLOAT)",
    "CREATE TABLE k (id INT PRIMARY KEY, s TEXT, d DATE)",
    "CREATE VIEW va AS SELECT a, b, c FROM t WHERE a = ?",
    "CREATE VIEW ks AS SELECT id, s FROM k WHERE s = ?",
    "CREATE VIEW n_by_a AS SELECT a, COUNT(*) AS n FROM t GROUP BY a",
    "CREATE VIEW joined AS SELECT t.a, t.b, k.s FROM t JOIN k ON t.a = k.id",
]
TYPES = {"t": ("INT", "TEXT", "FLOAT"), "k": ("INT", "TEXT", "DATE")}
NOT_NULL = {"t": (False, False, False), "k": (True, False, False)}
COLUMNS = {"t": ("a", "b", "c"), "k": ("id", "s", "d")}
UTC = datetime.timezone.utc


class Refused(Exception):
    """The model's word that a call must raise ``cls``."""

    def __init__(self, cls: type[Error]) -> None:
        self.cls = cls


# ---------------------------------------------------------------- the model

def engine_value(value: Any) -> Any:
    """``value`` as the engine takes it (noria_py/arguments.py's rules, written again):
    numpy scalars as Python's, a Decimal an int when integral (below 10**19), else a
    float (refused past a float's range)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Decimal):
        if value.is_nan():
            return math.nan
        if value.is_infinite():
            return math.copysign(math.inf, value)
        if value == value.to_integral_value() and abs(value) < 10 ** 19:
            return int(value)
        if math.isinf(float(value)):
            raise Refused(TypeMismatchError)
        return float(value)
    return value


def coerce(value: Any, typ: str, not_null: bool) -> Any:
    """A value as a column of ``typ`` stores it, or Refused (shared/CONTRACT.md's types)."""
    value = engine_value(value)
    if value is None:
        if not_null:
            raise Refused(TypeMismatchError)
        return None
    t = type(value)
    if typ == "INT" and t is int and INT_MIN <= value <= INT_MAX:
        return value
    if typ == "FLOAT" and (t is float or t is int and abs(value) <= 1.7976931348623157e308):
        return float(value)
    if typ == "TEXT" and t is str and is_text(value):
        return value
    if typ == "DATE" and t is datetime.date:
        return value
    raise Refused(TypeMismatchError)


def many(values: Any) -> list:
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise Refused(TypeMismatchError)
    return list(values)


def number_or_none(value: Any) -> bool:
    return value is None or isinstance(value, (int, float, Decimal, Fraction, np.number, np.bool_))


def key_value(value: Any) -> Any:
    """A key value as the engine looks it up (one it cannot convert as it is)."""
    try:
        return engine_value(value)
    except Refused:
        return value


class Model:
    """The tables as plain Python: t a multiset of rows, k its rows by primary key."""

    def __init__(self) -> None:
        self.t: Counter = Counter()
        self.k: dict[tuple, tuple] = {}

    def rows(self, table: str) -> list[tuple]:
        return list(self.t.elements()) if table == "t" else list(self.k.values())

    def checked(self, table: str, rows: Any) -> list[tuple]:
        out = []
        for row in many(rows):
            if not isinstance(row, (tuple, list)):
                raise Refused(TypeMismatchError)
            if len(row) != 3:
                raise Refused(ArityError)
            out.append(tuple(coerce(v, typ, nn) for v, typ, nn
                             in zip(row, TYPES[table], NOT_NULL[table])))
        return out

    def insert(self, table: str, rows: Any) -> Callable[[], None]:
        """What ``table.insert(rows)`` does, as a function to apply it; Refused if it
        must be refused."""
        new = self.checked(table, rows)
        if table == "t":
            return lambda: self.t.update(new)
        keys = [(r[0],) for r in new]
        if len(set(keys)) != len(keys) or any(key in self.k for key in keys):
            raise Refused(DuplicateKeyError)
        return lambda: self.k.update(zip(keys, new))

    def delete(self, table: str, rows: Any) -> Callable[[], None]:
        gone = self.checked(table, rows)
        have = Counter(self.rows(table))
        for r in gone:
            if have[r] <= 0:
                raise Refused(RowNotFoundError)
            have[r] -= 1

        def effect() -> None:
            for r in gone:
                if table == "t":
                    self.t[r] -= 1
                    if not self.t[r]:
                        del self.t[r]
                else:
                    del self.k[(r[0],)]
        return effect

    def delete_keys(self, keys: Any) -> Callable[[], None]:
        found = []
        for key in many(keys):
            kt = tuple(map(key_value, key if isinstance(key, (tuple, list)) else (key,)))
            try:
                hit = kt in self.k and kt not in found
            except TypeError:                                 # unhashable
                hit = False
            if not hit:
                if len(kt) != 1:
                    raise Refused(ArityError)
                if not number_or_none(kt[0]):
                    raise Refused(TypeMismatchError)
                raise Refused(RowNotFoundError)
            found.append(kt)

        def effect() -> None:
            for kt in found:
                del self.k[kt]
        return effect

    def lookup(self, view: str, key: Any) -> list[tuple]:
        """What ``db.view(view).lookup(key)`` returns (a view of one key column)."""
        key = key_value(key)
        if view == "va":
            hit = [r for r in self.t.elements() if r[0] is not None and _equal(r[0], key)]
            fits = number_or_none(key)
        else:
            hit = [(r[0], r[1]) for r in self.k.values() if r[1] is not None and _equal(r[1], key)]
            fits = key is None or isinstance(key, str)
        if not hit and not fits:
            raise Refused(TypeMismatchError)
        return hit

    def views(self) -> dict[str, list[tuple]]:
        """Every view read whole."""
        n = Counter(r[0] for r in self.t.elements())
        joined = [(r[0], r[1], self.k[(r[0],)][1]) for r in self.t.elements()
                  if r[0] is not None and (r[0],) in self.k]
        return {"n_by_a": list(n.items()), "joined": joined,
                "va": list(self.t.elements()), "ks": [(r[0], r[1]) for r in self.k.values()]}


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except TypeError:
        return False


def typed(rows: list) -> Counter:
    """Rows as a multiset that tells 1 from 1.0 and True (and -0.0 from nothing)."""
    return Counter((tuple(r), tuple(type(v).__name__ for v in r)) for r in rows)


def check(db, model: Model) -> None:
    """The database equals the model: tables, views whole and by key."""
    db.wait()
    for table in ("t", "k"):
        assert typed(db.table(table).rows()) == typed(model.rows(table)), table
    expected = model.views()
    for view, rows in expected.items():
        assert typed(db.view(view).all()) == typed(rows), view
    for a in {r[0] for r in model.t} | {0, 1}:
        assert typed(db.view("va").lookup(a)) == typed(model.lookup("va", a)), a


# ---------------------------------------------------------------- values

garbage_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.integers(-2 ** 70, 2 ** 70),
    st.sampled_from([INT_MAX, INT_MIN, INT_MAX + 1, 10 ** 400]),
    st.floats(allow_nan=False), st.sampled_from([0.0, -0.0, 1.0, math.inf]),
    st.text(max_size=4), st.sampled_from(["x", "y", "\ud800", "a\udfff", "\U0001f600"]),
    st.binary(max_size=3), st.dates(), st.datetimes(), st.datetimes(timezones=st.just(UTC)),
    st.decimals(allow_nan=False, places=1, min_value=-3, max_value=3),
    st.fractions(min_value=-3, max_value=3, max_denominator=2),
    st.builds(object),
)
garbage = st.recursive(garbage_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner, inner),
    st.dictionaries(st.text(max_size=2), inner, max_size=2)), max_leaves=4)
VALID = {
    "INT": st.one_of(st.integers(-3, 3), st.integers(INT_MIN, INT_MAX)),
    "FLOAT": st.one_of(st.floats(allow_nan=False), st.integers(-3, 3)),
    "TEXT": st.one_of(st.sampled_from(["x", "y", "é"]), st.text(max_size=3)),
    "DATE": st.dates(),
}


#: per type, values at its edge: a value near it that it must refuse, or must take
EDGE = {
    "INT": st.sampled_from([INT_MAX + 1, INT_MIN - 1, True, 1.0, Decimal(1), Fraction(2, 1), "1",
                            Decimal("1.5"), Decimal("1E+19"), np.int64(2), np.uint64(2 ** 64 - 1),
                            np.bool_(True), np.float64(1.0)]),
    "FLOAT": st.sampled_from([math.inf, -math.inf, 10 ** 400, 2 ** 63, True, Decimal("0.5"), "1.5",
                              Decimal("1e400"), Decimal("NaN"), np.float32(0.5), np.int8(-3)]),
    "TEXT": st.sampled_from(["\ud800", "a\udfff", "\U0001f600", "", b"x", 1, np.str_("x")]),
    "DATE": st.sampled_from([datetime.datetime(2024, 1, 1), datetime.date.max, "2024-01-01",
                             np.datetime64("2024-01-02")]),
}


def value(typ: str) -> st.SearchStrategy:
    return st.one_of(VALID[typ], VALID[typ], st.none(), EDGE[typ], garbage)


def row(table: str) -> st.SearchStrategy:
    """Mostly rows the table takes (so that writes of several rows are accepted too)."""
    types = TYPES[table]
    valid = st.tuples(*(st.one_of(VALID[t], VALID[t], st.none()) for t in types))
    exact = st.tuples(*(value(t) for t in types))
    return st.one_of(valid, valid, valid, exact, exact.map(list),
                     st.lists(value(types[0]), max_size=4), garbage)


def rows(table: str) -> st.SearchStrategy:
    return st.one_of(st.lists(row(table), max_size=4), st.lists(row(table), max_size=2).map(tuple),
                     garbage)


def arrow_table(table: str) -> st.SearchStrategy:
    """A pyarrow.Table whose columns are of random Arrow types and names (the table's,
    case changed, one missing, one extra or twice), or garbage."""
    kinds = {"int64": (pa.int64(), VALID["INT"]), "int32": (pa.int32(), st.integers(-3, 3)),
             "uint64": (pa.uint64(), st.integers(0, 2 ** 64 - 1)),
             "float64": (pa.float64(), VALID["FLOAT"].map(float)), "string": (pa.string(), VALID["TEXT"]),
             "bool": (pa.bool_(), st.booleans()), "date32": (pa.date32(), VALID["DATE"]),
             "timestamp_tz": (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(UTC)))}

    @st.composite
    def build(draw):
        n = draw(st.integers(0, 3))
        names = [draw(st.sampled_from([c, c.upper()])) for c in COLUMNS[table]]
        shape = draw(st.sampled_from(["right", "right", "missing", "extra", "twice"]))
        if shape == "missing":
            names.pop(draw(st.integers(0, 2)))
        elif shape == "extra":
            names.append("zz")
        elif shape == "twice":
            names.append(names[0].swapcase())
        arrays = []
        for _ in names:
            typ, values = kinds[draw(st.sampled_from(sorted(kinds)))]
            arrays.append(pa.array(draw(st.lists(st.one_of(values, st.none()), min_size=n, max_size=n)), type=typ))
        return pa.Table.from_arrays(arrays, names=names)
    return st.one_of(build(), build(), garbage)


# ---------------------------------------------------------------- calls

def arrow_rows(table: str, arrow: Any) -> list[tuple]:
    """The rows ``insert_arrow(arrow)`` stands for, or Refused (arrowio's rules)."""
    if not isinstance(arrow, pa.Table):
        raise Refused(TypeMismatchError)
    names = [c.lower() for c in arrow.column_names]
    if sorted(names) != sorted(COLUMNS[table]):
        raise Refused(ArityError)
    columns = [arrow.column(names.index(c)).to_pylist() for c in COLUMNS[table]]
    return list(zip(*columns))


@st.composite
def a_call(draw, model: Model) -> tuple[str, Callable, Callable]:
    """(description, what to call on the db, what the model says: a function that applies
    the call's effect and returns its result, or raises Refused)."""
    t_rows, k_rows = list(model.t), list(model.k.values())
    kind = draw(st.sampled_from(["insert", "insert", "insert_arrow", "delete", "delete_keys",
                                 "lookup", "lookup_many", "execute_insert", "execute_select",
                                 "execute_delete", "execute_update", "names", "sql"]))
    table = draw(st.sampled_from(["t", "k"]))
    if kind == "insert":
        arg = draw(rows(table))
        return (f"{table}.insert({arg!r})", lambda db: db.table(table).insert(arg),
                lambda: model.insert(table, arg))
    if kind == "insert_arrow":
        arg = draw(arrow_table(table))
        return (f"{table}.insert_arrow({arg!r})", lambda db: db.table(table).insert_arrow(arg),
                lambda: model.insert(table, arrow_rows(table, arg)))
    if kind == "delete":
        existing = t_rows if table == "t" else k_rows
        one = st.sampled_from(existing) if existing else row(table)
        arg = draw(st.one_of(st.lists(st.one_of(one, one, row(table)), max_size=3), rows(table)))
        return (f"{table}.delete({arg!r})", lambda db: db.table(table).delete(arg),
                lambda: model.delete(table, arg))
    if kind == "delete_keys":
        ids = [r[0] for r in k_rows]
        key = st.one_of(st.sampled_from(ids), st.sampled_from(ids).map(lambda i: (i,))) if ids else VALID["INT"]
        arg = draw(st.one_of(st.lists(st.one_of(key, key, value("INT")), max_size=3), garbage))
        return (f"k.delete_keys({arg!r})", lambda db: db.table("k").delete_keys(arg),
                lambda: model.delete_keys(arg))
    view = draw(st.sampled_from(["va", "ks"]))
    present = [r[0] for r in t_rows] if view == "va" else [r[1] for r in k_rows]
    valid = value("INT") if view == "va" else value("TEXT")
    key = st.one_of(st.sampled_from(present), st.sampled_from(present), valid, garbage) \
        if present else st.one_of(valid, garbage)
    if kind == "lookup":
        args = draw(st.one_of(st.tuples(key), st.tuples(key), st.lists(key, max_size=3).map(tuple)))
        return (f"{view}.lookup(*{args!r})", lambda db: db.view(view).lookup(*args),
                lambda: model.lookup(view, args[0]) if len(args) == 1 else _refuse(ArityError))
    if kind == "lookup_many":
        arg = draw(st.one_of(st.lists(key, max_size=4), garbage))
        return (f"{view}.lookup_many({arg!r})", lambda db: db.view(view).lookup_many(arg),
                lambda: [model.lookup(view, k) for k in many(arg)])
    shape = {"execute_insert": ("INT", "TEXT", "FLOAT"), "execute_update": ("TEXT", "INT")}.get(
        kind, ("INT",))
    typical = st.tuples(*(value(t) for t in shape))
    params = draw(st.one_of(typical, typical, st.lists(value("INT"), max_size=3), st.tuples(key),
                            typical.map(list), garbage))
    if kind == "execute_insert":
        sql = "INSERT INTO t VALUES (?, ?, ?)"
        return (f"execute[insert]({sql!r}, {params!r})", lambda db: db.execute(sql, params) and None,
                lambda: model.insert("t", [_params(params)]))
    if kind == "execute_select":
        sql = "SELECT a, b, c FROM t WHERE a = ?"
        return (f"execute[select]({sql!r}, {params!r})", lambda db: db.execute(sql, params).fetchall(),
                lambda: model.lookup("va", _one(params)))
    if kind == "execute_delete":
        sql = "DELETE FROM t WHERE a = ?"
    elif kind == "execute_update":
        sql = "UPDATE k SET s = ? WHERE id = ?"
    elif kind == "names":
        name = draw(garbage)
        return (f"db.table/view({name!r})", lambda db: (db.table(name), db.view(name)) and None,
                lambda: _refuse(Error))
    else:
        sql = draw(st.one_of(st.text(max_size=30), st.lists(st.sampled_from(
            ["SELECT", "a", "b", "c", "FROM", "t", "k", "va", "WHERE", "=", "?", "(", ")", ",",
             "1", "'x'", "+", "*", "/", "AND", "OR", "NOT", "NULL", "CAST", "AS", "INT", "TEXT",
             "DATE", "GROUP", "BY", "ORDER", "LIMIT", "COUNT(*)", "SUM(a)", "MIN", "JOIN", "ON",
             "IS", "IN", "LIKE", "-", "9223372036854775807", "1e999", "''", "'\ud800'"]),
            min_size=1, max_size=12).map(lambda words: "SELECT " + " ".join(words))))
        return (f"execute[random]({sql!r}, {params!r})", lambda db: db.execute(sql, params) and None,
                lambda: None)                   # a read: any answer, no change
    return (f"{kind.replace('_', '[')}]({sql!r}, {params!r})",
            lambda db: db.execute(sql, params) and None, lambda: _written(model, kind, params))


def _refuse(cls: type[Error]):
    raise Refused(cls)


def _params(params: Any) -> tuple:
    if params is None:
        return ()
    if isinstance(params, (list, tuple)):
        return tuple(params)
    if isinstance(params, (str, bytes, dict, set, frozenset)) or hasattr(params, "__iter__"):
        raise Refused(TypeMismatchError)
    return (params,)


def _one(params: Any) -> Any:
    p = _params(params)
    if len(p) != 1:
        raise Refused(ArityError)
    return p[0]


def _written(model: Model, kind: str, params: Any):
    """DELETE and UPDATE by SQL: the model does not say whether the front end takes the
    parameter's type; it says what the statement does if it is taken (``Model.accepted``
    applies this only then)."""
    p = _params(params)

    def effect() -> None:
        if kind == "execute_delete":
            for r in [r for r in model.t if r[0] is not None and _equal(r[0], p[0])]:
                del model.t[r]
        else:
            for kt, r in list(model.k.items()):
                if _equal(r[0], p[1]):
                    model.k[kt] = (r[0], p[0], r[2])
    return _Maybe(effect)


class _Maybe:
    """An effect the database may refuse (then nothing changes) or apply."""

    def __init__(self, effect: Callable[[], None]) -> None:
        self.effect = effect


# ---------------------------------------------------------------- the run

def run(db, model: Model, draw) -> None:
    desc, call, predict = draw(a_call(model))
    try:
        expected = predict()
        refused = None
    except Refused as r:
        expected, refused = None, r.cls
    what = desc.split("(")[0]
    try:
        got = call(db)
    except Error as err:
        event(f"{what}: {type(err).__name__}")
        assert refused is not None or isinstance(expected, _Maybe) or expected is None and \
            desc.startswith(("execute", "db.")), f"{desc} refused: {err!r}"
        if refused is not None:
            assert isinstance(err, refused), f"{desc}: {err!r}, expected {refused.__name__}"
    else:
        event(f"{what}: accepted")
        assert refused is None, f"{desc} accepted, expected {refused.__name__}"
        if isinstance(expected, _Maybe):
            expected.effect()
        elif callable(expected):
            expected()                                        # a write the model applies
        elif isinstance(expected, list) and desc.startswith(("va.lookup(", "ks.lookup(", "execute[select]")):
            assert typed(got) == typed(expected), desc
        elif isinstance(expected, list) and "lookup_many" in desc:
            assert [typed(g) for g in got] == [typed(e) for e in expected], desc
    check(db, model)


def fuzz(draw, shards: int, data_dir: str | None, calls: int) -> None:
    db = noria_py.connect(shards=shards, data_dir=data_dir)
    for sql in SCHEMA:
        db.execute(sql)
    model = Model()
    try:
        for _ in range(calls):
            run(db, model, draw)
    finally:
        db.close()
    if data_dir is not None:
        with noria_py.connect(data_dir=data_dir) as again:
            check(again, model)


SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large])


@pytest.mark.parametrize("shards", [1, 2])
@settings(max_examples=25, **SETTINGS)
@given(data=st.data())
def test_random_api_calls_raise_only_noria_errors_and_refusals_change_nothing(shards, data):
    fuzz(data.draw, shards, None, calls=12)


@pytest.mark.slow
@pytest.mark.parametrize("shards", [1, 3])
@settings(max_examples=400, **SETTINGS)
@given(data=st.data())
def test_random_api_calls_many(shards, data):
    fuzz(data.draw, shards, None, calls=40)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(data=st.data())
def test_random_api_calls_with_a_data_dir_survive_a_restart(data, tmp_path_factory):
    fuzz(data.draw, 1, str(tmp_path_factory.mktemp("fuzz")), calls=25)
