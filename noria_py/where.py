"""A DELETE's or an UPDATE's WHERE over a base table's rows (``matching``): tested on
the table's columns where they are kept as columns, and on row tuples elsewhere.

A table without a primary key that was written in columns (``insert_columns``,
``insert_arrow``, Spark loads) keeps its rows as columnar ``Batch``es
(noria_py/ops/base.py). The row path (``expression.compile_condition``) tests a
tuple, so every row of such a table would be made a tuple first (~140 ms of a
~310 ms DELETE over 1e6 rows of two INTs, profiled; the test most of the rest). Here
the WHERE is computed a whole column at a time with numpy instead, and only the rows it
keeps become tuples (docs/benchmarks.md, "A DELETE's WHERE on the columns": 5.7 ms).

**What is done column-wise.** Columns of INT, FLOAT and BOOL (int64, float64 arrays;
object arrays of those values and NULLs), literals of those types and NULL, ``+ - *``,
``/`` and ``%`` (the engine's and the PostgreSQL front end's), unary minus, ABS, the six
comparisons, AND, OR, NOT, IS [NOT] NULL and IN (BETWEEN is an AND of two comparisons).
Everything else (CASE, COALESCE, NULLIF, CAST, LIKE, text, dates, ...) falls back to
the row path for that table: those are either not numbers (a string column is a
column of Python objects: nothing to gain) or rare in a DELETE's WHERE, and each one
done here is one more place the two paths could disagree.

**Invariant: the same answer as the row path, row for row.** Each value is three
arrays: its values, where it is NULL, where it is the division-by-zero marker ``DIV0``
(noria_py/divzero.py; never both), and each operator follows its helper in
noria_py/expression.py exactly:

- NULL beats the marker in an operator (``_add(None, DIV0)`` is NULL); a comparison
  is NULL where an operand is, else the marker where an operand is.
- INT arithmetic is exact in 64 bits: a result outside them is NULL (``_iadd``,
  ``_int64``), told by the wrapped result's sign (``+``, ``-``) or by dividing it back
  (``*``); INT / INT truncates toward zero. An operator whose operands' kinds disagree
  with its SQL type (an INT sum typed FLOAT) falls back: the row path keeps such a
  result as a Python int of any size.
- A FLOAT operand makes a comparison, IN, NaN-aware as the row path's ``_f*`` helpers
  are (NaN = NaN, NaN above every number); an INT compared with a FLOAT compares
  exactly, as Python does (the float comparison is exact but where the int rounds to
  the float, and those are compared as integers).
- ``%`` with a FLOAT truncates both operands to integers (SQLite); a value past 64 bits
  there falls back (Python's exact big-integer remainder).
- AND and OR go left to right as ``_and``, ``_or`` do (the first FALSE or TRUE decides,
  a marker before it is the marker); a WHERE's top-level AND as ``compile_condition``
  has it: ``_all`` (any FALSE decides), or where it divides as PostgreSQL does,
  ``_quals`` over ``expression.qual_order``'s order. Constant operands are folded by
  ``expression.folded``, the same function the row path's compiler calls.
- The row path evaluates every operand of every operator (no short cut), and no helper
  raises for the values taken here, so computing each operand over every row changes
  nothing. (The engine's ``%`` over a marker would raise there: a tree that divides as
  PostgreSQL does and holds the engine's ``%`` falls back.)

A marker anywhere makes ``matching`` None (PostgreSQL fails the statement), as the row
path does. Whatever cannot be done exactly raises ``_Fallback``; the chunk, and every
later one, then takes the row path (the chunks done are right as they are).
"""
from __future__ import annotations

from typing import Iterable, Iterator, cast

import numpy as np

from sql_frontend.expr import Call, Col, Expr, Lit
from sql_frontend.types import INT_MAX, INT_MIN, SqlType

from .batch import Batch
from .expression import compile_condition, folded, pg_divides, qual_order
from .nan import column_list


class _Fallback(Exception):
    """This WHERE, or this chunk's columns, cannot be computed here exactly."""


class _V:
    """One expression's value over a chunk's ``n`` rows: ``val`` (int64, float64 or bool;
    an array, or a numpy scalar for a constant), its ``kind`` (``i``, ``f``, ``b``), and
    where it is NULL (``null``) and the marker (``d``): bool arrays of ``n``, or None
    for nowhere; a row is NULL, else the marker, else ``val`` (the two never overlap)."""

    __slots__ = ("kind", "val", "null", "d")

    def __init__(self, kind: str, val, null: np.ndarray | None = None,
                 d: np.ndarray | None = None) -> None:
        self.kind, self.val, self.null, self.d = kind, val, null, d


_KINDS = {SqlType.INT: "i", SqlType.FLOAT: "f", SqlType.BOOL: "b"}
_DTYPES = {"i": np.dtype(np.int64), "f": np.dtype(np.float64), "b": np.dtype(bool)}
_ZERO = {"i": np.int64(0), "f": np.float64(0.0), "b": np.bool_(False)}
_ARITH = frozenset({"add", "sub", "mul", "div", "mod", "pgdiv", "pgmod"})
_COMPARE = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
_TWO63 = 2.0 ** 63


def _or(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    return a if b is None else a | b


def _less(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    """``a`` without ``b``."""
    return a if a is None or b is None else a & ~b


class _Chunk:
    """A WHERE computed over one columnar batch's columns."""

    def __init__(self, cols: tuple[np.ndarray, ...], pg: bool) -> None:
        self.cols = cols
        self.n = len(cols[0])
        self.pg = pg
        self.seen: dict[int, _V] = {}

    def full(self, x) -> np.ndarray:
        """``x`` as an array of ``n`` (a view where it is a scalar)."""
        return np.broadcast_to(x, (self.n,)) if np.ndim(x) == 0 else x

    def mask(self, m) -> np.ndarray | None:
        """A mask as a ``_V`` holds it: None for nowhere."""
        if m is None:
            return None
        if np.ndim(m) == 0:
            return np.ones(self.n, dtype=bool) if m else None
        return m if m.any() else None

    # ------------------------------------------------------------ leaves

    def column(self, e: Col) -> _V:
        got = self.seen.get(e.index)
        if got is not None:
            return got
        kind = _KINDS.get(e.type)
        if kind is None:
            raise _Fallback
        a = self.cols[e.index]
        want = _DTYPES[kind]
        if a.dtype == want:
            got = _V(kind, a)
        elif a.dtype == object:         # values of the column's type, and NULLs
            null = a == None      # noqa: E711 - elementwise, over objects
            filled = a
            if null.any():
                filled = a.copy()
                filled[null] = _ZERO[kind]
            try:
                got = _V(kind, filled.astype(want), self.mask(null))
            except (TypeError, ValueError, OverflowError):
                raise _Fallback from None
        else:
            raise _Fallback
        self.seen[e.index] = got
        return got

    def literal(self, e: Lit) -> _V:
        v = e.value
        if v is None:
            kind = _KINDS.get(e.type, "i")
            return _V(kind, _ZERO[kind], np.ones(self.n, dtype=bool))
        t = type(v)
        if t is bool:
            return _V("b", np.bool_(v))
        if t is int and INT_MIN <= v <= INT_MAX:
            return _V("i", np.int64(v))
        if t is float:
            return _V("f", np.float64(v))
        raise _Fallback

    # ------------------------------------------------------------ calls

    def value(self, e: Expr) -> _V:
        if isinstance(e, Col):
            return self.column(e)
        if isinstance(e, Lit):
            return self.literal(e)
        if not isinstance(e, Call):
            raise _Fallback
        op = e.op
        if op in ("and", "or"):
            args = folded(e)
            if isinstance(args, bool):
                return _V("b", np.bool_(args))
            return self.connective(op, [self.value(a) for a in args])
        if op == "not":
            a = self.value(e.args[0])
            return _V("b", ~self.truth(a), a.null, a.d)
        if op in ("is_null", "is_not_null"):
            a = self.value(e.args[0])
            null = np.zeros(self.n, dtype=bool) if a.null is None else a.null
            # (``_isnull``: the marker stays the marker; outside PostgreSQL's division
            # there is none)
            return _V("b", null if op == "is_null" else ~null, None, a.d)
        if op in _COMPARE:
            return self.compare(e)
        if op == "in":
            return self.among(e)
        if op in _ARITH:
            return self.arith(e)
        if op in ("neg", "abs"):
            return self.unary(e)
        raise _Fallback

    def truth(self, a: _V) -> np.ndarray:
        """Where ``a`` is truthy (Python's ``not``: a number other than 0)."""
        return self.full(a.val if a.kind == "b" else a.val != 0)

    def connective(self, op: str, args: list[_V]) -> _V:
        """``_and`` / ``_or``: left to right, the first FALSE (TRUE) decides, a marker
        before it is the marker; then NULL if one was NULL."""
        n = self.n
        open_ = np.ones(n, dtype=bool)          # rows not decided yet
        decided = np.zeros(n, dtype=bool)       # decided by a FALSE (AND) / TRUE (OR)
        d = np.zeros(n, dtype=bool)
        saw = np.zeros(n, dtype=bool)
        for a in args:
            if a.d is not None:
                hit = a.d & open_
                d |= hit
                open_ &= ~hit
            t = self.truth(a)
            hit = open_ & (~t if op == "and" else t)
            if a.null is not None:
                hit &= ~a.null
                saw |= a.null & open_
            decided |= hit
            open_ &= ~hit
        null = open_ & saw
        val = (open_ & ~saw) if op == "and" else decided
        return _V("b", val, self.mask(null), self.mask(d))

    def compare(self, e: Call) -> _V:
        a, b = self.value(e.args[0]), self.value(e.args[1])
        nan_aware = any(x.type is SqlType.FLOAT for x in e.args)
        lt, gt, eq = self.order(a, b, nan_aware)
        val = {"eq": eq, "ne": ~eq, "lt": lt, "gt": gt, "le": ~gt, "ge": ~lt}[e.op]
        null = _or(a.null, b.null)
        return _V("b", val, null, _less(_or(a.d, b.d), null))

    def order(self, a: _V, b: _V, nan_aware: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where ``a < b``, ``a > b``, ``a = b``, as the row path's helpers compare two
        non-NULL values (``_lt``..., or ``_flt``... where ``nan_aware``)."""
        x = self.full(a.val if a.kind != "b" else a.val.astype(np.int64))
        y = self.full(b.val if b.kind != "b" else b.val.astype(np.int64))
        fx, fy = a.kind == "f", b.kind == "f"
        if not (fx or fy):
            return x < y, x > y, x == y
        if not nan_aware:
            raise _Fallback     # (a FLOAT value under an operator typed without one)
        if fx and fy:
            lt, gt, eq = x < y, x > y, x == y
        elif fy:
            lt, gt, eq = _int_float(x, y)
        else:
            gt, lt, eq = _int_float(y, x)
        xn = np.isnan(x) if fx else np.zeros(self.n, dtype=bool)
        yn = np.isnan(y) if fy else np.zeros(self.n, dtype=bool)
        # NaN is above every number, and equal to NaN (``_nan_lt``, ``_feq``)
        return np.where(yn, ~xn, lt), np.where(xn, ~yn, gt), eq | (xn & yn)

    def among(self, e: Call) -> _V:
        """``_in`` / ``_fin``: x NULL or the marker is that; else the values left to
        right: a NULL noted, a marker decides, an equal one decides TRUE; then NULL if
        a NULL was seen, else FALSE."""
        x = self.value(e.args[0])
        nan_aware = any(a.type is SqlType.FLOAT for a in e.args)
        n = self.n
        open_ = np.ones(n, dtype=bool)
        for m in (x.null, x.d):
            if m is not None:
                open_ &= ~m
        found = np.zeros(n, dtype=bool)
        d = np.zeros(n, dtype=bool) if x.d is None else x.d.copy()
        saw = np.zeros(n, dtype=bool)
        for arg in e.args[1:]:
            v = self.value(arg)
            live = open_
            if v.null is not None:
                saw |= v.null & open_
                live = open_ & ~v.null
            if v.d is not None:
                hit = live & v.d
                d |= hit
                open_ &= ~hit
                live = live & ~v.d
            hit = live & self.order(x, v, nan_aware)[2]
            found |= hit
            open_ &= ~hit
        return _V("b", found, self.mask(_or(x.null, open_ & saw)), self.mask(d))

    def arith(self, e: Call) -> _V:
        a, b = self.value(e.args[0]), self.value(e.args[1])
        op = e.op
        if "b" in (a.kind, b.kind):
            raise _Fallback
        if op == "mod" and self.pg:
            raise _Fallback         # (``_mod`` of a marker raises in the row path)
        ints = a.kind == "i" and b.kind == "i"
        if e.type is not (SqlType.INT if ints else SqlType.FLOAT):
            raise _Fallback
        x, y = a.val, b.val
        null = _or(a.null, b.null)
        d = _or(a.d, b.d)
        if op in ("div", "pgdiv", "mod", "pgmod"):
            zero = self.mask(self.full(y == 0))
            zero = _less(zero, b.d)                 # (the marker is not 0)
            if op in ("div", "mod"):    # the engine's: NULL, even of a marker (``_div``)
                null = _or(null, zero)
            else:                       # PostgreSQL's: the marker (``_pgdiv``)
                d = _or(d, zero)
        d = _less(d, null)
        # ``over``: where the result is NULL though no operand is (past 64 bits, or
        # ``_mod``'s NaN, infinity or divisor truncated to 0); the marker stays
        if ints:
            r, over = _int_op(op, self.full(x), self.full(y))
        elif op in ("mod", "pgmod"):
            r, over = self.float_mod(a, b, _or(null, d))
        else:
            x = x.astype(np.float64) if a.kind == "i" else x
            y = y.astype(np.float64) if b.kind == "i" else y
            if op == "add":
                r = x + y
            elif op == "sub":
                r = x - y
            elif op == "mul":
                r = x * y
            else:
                r = x / np.where(self.full(y) == 0, 1.0, y)
            over = None
        null = _or(null, _less(self.mask(over), d))
        return _V("i" if ints else "f", r, self.mask(null), self.mask(d))

    def float_mod(self, a: _V, b: _V, skip: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """``_mod`` with a FLOAT operand: both truncated to integers, the remainder of
        those (sign of the dividend) as a FLOAT; NULL for NaN, an infinity, or a
        divisor that truncates to 0. ``skip``: rows already NULL or the marker."""
        parts = []
        bad = np.zeros(self.n, dtype=bool)
        for v in (a, b):
            x = self.full(v.val)
            if v.kind == "i":
                parts.append(x)
                continue
            fin = np.isfinite(x)
            bad |= ~fin
            t = np.trunc(np.where(fin, x, 0.0))
            big = np.abs(t) >= _TWO63
            if skip is not None:
                big &= ~skip
            if big.any():
                raise _Fallback         # (Python's exact remainder of a big integer)
            parts.append(np.where(np.abs(t) >= _TWO63, 0.0, t).astype(np.int64))
        ia, ib = parts
        bad |= ib == 0
        r = np.fmod(ia, np.where((ib == 0) | (ib == -1), 1, ib)).astype(np.float64)
        return r, self.mask(bad)

    def unary(self, e: Call) -> _V:
        a = self.value(e.args[0])
        if a.kind == "b" or e.type is not (SqlType.INT if a.kind == "i" else SqlType.FLOAT):
            raise _Fallback
        x = self.full(a.val)
        r = -x if e.op == "neg" else np.abs(x)
        null = a.null
        if a.kind == "i":               # -INT_MIN, ABS(INT_MIN): past 64 bits, NULL
            over = self.mask(x == INT_MIN)
            null = _or(null, _less(over, a.d))
        return _V(a.kind, r, null, a.d)

    # ------------------------------------------------------------ the WHERE

    def where(self, e: Expr) -> tuple[np.ndarray, bool]:
        """Where ``e`` is TRUE as ``compile_condition``'s test has it, and whether it is
        the marker for some row."""
        n = self.n
        if isinstance(e, Call) and e.op == "and":
            args = folded(e)
            if isinstance(args, bool):
                return np.full(n, args), False
            if self.pg:                 # ``_quals``: the first not TRUE decides
                open_ = np.ones(n, dtype=bool)
                d = np.zeros(n, dtype=bool)
                for a in (self.value(x) for x in qual_order(args)):
                    if a.d is not None:
                        hit = a.d & open_
                        d |= hit
                        open_ &= ~hit
                    if a.kind != "b":
                        open_[:] = False
                    else:
                        open_ &= self.full(a.val)
                        if a.null is not None:
                            open_ &= ~a.null
                return open_, bool(d.any())
            # ``_all``: any FALSE decides; else the marker, else NULL, else TRUE
            false = np.zeros(n, dtype=bool)
            other = np.zeros(n, dtype=bool)     # NULL or the marker
            anyd = np.zeros(n, dtype=bool)
            for a in (self.value(x) for x in args):
                f = ~self.truth(a)
                for m in (a.null, a.d):
                    if m is not None:
                        other |= m
                        f &= ~m
                if a.d is not None:
                    anyd |= a.d
                false |= f
            return ~false & ~other, bool((anyd & ~false).any())
        v = self.value(e)
        if v.kind != "b":               # (``5 is True`` is False)
            true = np.zeros(n, dtype=bool)
        else:
            true = self.full(v.val) & True
            for m in (v.null, v.d):
                if m is not None:
                    true &= ~m
        return true, v.d is not None and bool(v.d.any())


def _int_float(i: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where ``i < f``, ``i > f``, ``i = f`` exactly (int64 against float64, as Python
    compares an int with a float; a NaN is none of them). Rounding is monotone, so the
    float comparison is right wherever ``float(i) != f``; where they are equal, ``f`` is
    a whole number in [-2**63, 2**63], compared as an integer."""
    fi = i.astype(np.float64)
    lt, gt, eq = fi < f, fi > f, fi == f
    at = np.flatnonzero(eq)
    if len(at):
        ii, ff = i[at], f[at]
        top = ff >= _TWO63                  # (2**63: above every int64)
        fint = np.where(top, 0.0, ff).astype(np.int64)
        lt[at] = top | (ii < fint)
        gt[at] = ~top & (ii > fint)
        eq[at] = ~top & (ii == fint)
    return lt, gt, eq


def _int_op(op: str, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """INT ``x op y`` in 64 bits, and where the exact result is outside them (NULL:
    ``_iadd``, ``_int64``); ``/`` truncates toward zero, ``%`` takes the dividend's sign
    (SQLite); a zero divisor's rows are left to the caller (a value of 0 there)."""
    if op == "add":
        r = x + y
        return r, ((x ^ r) & (y ^ r)) < 0
    if op == "sub":
        r = x - y
        return r, ((x ^ y) & (x ^ r)) < 0
    if op == "mul":
        r = x * y
        minus = x == -1
        xs = np.where((x == 0) | minus, 1, x)
        return r, np.where(minus, y == INT_MIN, (x != 0) & (r // xs != y))
    minus = y == -1
    ys = np.where((y == 0) | minus, 1, y)
    if op in ("mod", "pgmod"):
        return np.fmod(x, ys), None                 # (x % -1 is 0, as x % 1)
    q = x // ys
    q += ((x - q * ys) != 0) & ((x < 0) != (ys < 0))    # floor to truncation
    return np.where(minus, -x, q), minus & (x == INT_MIN)


def _runs(parts: Iterable[Batch]) -> Iterator[Batch]:
    """The parts with each run of columnar ones (of one width) joined into one batch, so
    that a table kept as many small batches is computed in a few numpy calls."""
    run: list[Batch] = []
    for p in parts:
        if p.cols and not (run and len(run[0].cols) != len(p.cols)):   # type: ignore[arg-type]
            run.append(p)
            continue
        if run:
            yield _joined(run)
            run = []
        if p.cols:
            run.append(p)
        else:
            yield p
    if run:
        yield _joined(run)


def _joined(run: list[Batch]) -> Batch:
    return run[0] if len(run) == 1 else Batch.stacked(run)


def matching(parts: Iterable[Batch], where: Expr | None) -> list[tuple] | None:
    """The rows of a table given as ``parts`` (batches of insertions that add up to it:
    ``Base.parts``) for which ``where`` is TRUE (None: every row), each as many times
    as its count, in the parts' order: a DELETE's or an UPDATE's rows. None if it is
    the division-by-zero marker for one of them (PostgreSQL fails the write).
    Columnar parts are tested column-wise (the module doc), the others row by row."""
    test = None
    vector = True
    pg = where is not None and pg_divides(where)
    rows: list[tuple] = []
    for part in _runs(parts):
        if part.cols and vector:
            cols, signs = part.cols, cast(np.ndarray, part.sign_array)
            if where is None:
                at = None
            else:
                try:
                    with np.errstate(all="ignore"):
                        true, div0 = _Chunk(cols, pg).where(where)
                except (_Fallback, RecursionError):
                    vector = False
                else:
                    if div0:
                        return None
                    at = np.flatnonzero(true)
            if vector:
                got = list(zip(*[column_list(c if at is None else c[at]) for c in cols]))
                counts = signs if at is None else signs[at]
                if len(counts) and bool((counts == 1).all()):
                    rows.extend(got)
                else:
                    for r, c in zip(got, counts.tolist()):
                        rows.extend([r] * c)
                continue
        if test is None:
            test = compile_condition(where) if where is not None else (lambda r: True)
        for r, c in zip(part.to_rows(), part.signs):   # (not kept on a base's chunk)
            t = test(r)
            if t is True:
                rows.extend([r] * c)
            elif t:
                return None
    return rows
