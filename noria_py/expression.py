"""Compiles plan expressions into Python functions of a row.

An expression tree becomes one Python lambda (generated source, compiled once per
operator), so evaluating a row costs a few function calls rather than a walk of the
tree. SQL's three-valued logic: NULL is ``None``; comparisons with NULL are NULL;
AND/OR follow Kleene logic; a filter keeps a row only when its predicate is TRUE.
Integer arithmetic follows SQLite: INT / INT truncates toward zero, and division or
modulo by zero gives NULL. An INT result outside INT's 64 bits (``9223372036854775807 +
1``, ``CAST(1e30 AS INT)``) is NULL too, where SQLite would make it a REAL: an INT
column holds only 64-bit values (a base refuses others), and an expression over rows
runs in the dataflow after the write that brought the row was accepted, where there is
nobody to raise an error to; so SELECT, INSERT and UPDATE agree (PostgreSQL refuses
such a result in all three). For the same reason a CAST that has no answer
(``CAST('soon' AS DATE)`` over a row) is NULL: no expression raises on any row's values
(a rejected write must change nothing, and a view's error would come after its base took
the write). What the user wrote is checked when the statement is planned instead: a
literal that is not a date, an integer past 64 bits, types that do not fit.

FLOAT NaN follows PostgreSQL (noria_py.nan): where an operand of a comparison, IN or
NULLIF is FLOAT, the NaN-aware helpers are compiled in (NaN = NaN is TRUE, NaN is
above every other number), and a FLOAT computed here (arithmetic, ABS, CAST) has its
NaN made the one NaN. Other types compile to the plain helpers, at no cost.

The PostgreSQL front end's ``/`` and ``%`` (``pgdiv``, ``pgmod``) give the marker
``DIV0`` for a zero divisor instead of NULL, and every operator passes a marker
operand on (noria_py/divzero.py has the rules): arithmetic and ``<``-style comparisons
by the marker's own operators, at no cost to other values; ``=``, ``<>``, IN, NULLIF,
NOT, AND, OR and the NaN-aware helpers by a test of their own; CASE and IS NULL only in
an expression that divides so (elsewhere a CASE condition or IS NULL of a marker read
from another view's column is taken as not TRUE, not NULL: a documented limit). A
WHERE's top-level AND that divides so runs its conditions in the order PostgreSQL's
planner gives them, cheapest first by its cost model (``qual_order``): which one
divides first decides whether a row fails.
"""
from __future__ import annotations

import datetime
import math
import re
from functools import lru_cache
from operator import itemgetter
from typing import Any, Callable, cast

from sql_frontend.expr import Call, Col, Expr, Lit
from sql_frontend.typerules import parse_temporal
from sql_frontend.types import INT_MAX, INT_MIN, SqlType

from .divzero import DIV0
from .errors import UnsupportedError
from .nan import NAN
from .numeric import PgNumeric, as_float

_D = DIV0

RowFn = Callable[[tuple], Any]


# ---------------------------------------------------------------- runtime helpers

def _add(a, b):
    return None if a is None or b is None else a + b


def _sub(a, b):
    return None if a is None or b is None else a - b


def _mul(a, b):
    return None if a is None or b is None else a * b


def _div(a, b):
    if a is None or b is None or b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _pgdiv(a, b):
    if a is None or b is None:
        return None
    if b == 0:                  # (a float 0.0 too: PostgreSQL's float8 division errs)
        return _D
    return a / b if a is _D or b is _D else _div(a, b)


def _pgmod(a, b):
    if a is None or b is None:
        return None
    if b == 0:
        return _D
    return _D if a is _D or b is _D else _mod(a, b)


def _mod(a, b):
    if a is None or b is None or b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    # SQLite: with a REAL operand, both are truncated to integers and the remainder
    # of those is returned as a REAL (NULL when the divisor truncates to 0)
    try:
        ia, ib = int(a), int(b)
    except (OverflowError, ValueError):
        return None
    if ib == 0:
        return None
    r = abs(ia) % abs(ib)
    return float(r if ia >= 0 else -r)


def _iadd(a, b):
    if a is None or b is None:
        return None
    r = a + b
    return r if INT_MIN <= r <= INT_MAX else None


def _isub(a, b):
    if a is None or b is None:
        return None
    r = a - b
    return r if INT_MIN <= r <= INT_MAX else None


def _imul(a, b):
    if a is None or b is None:
        return None
    r = a * b
    return r if INT_MIN <= r <= INT_MAX else None


def _int64(v):
    """An INT result as it is kept: NULL outside 64 bits (the module doc says why)."""
    return v if v is None or INT_MIN <= v <= INT_MAX else None


def _neg(a):
    return None if a is None else -a


def _eq(a, b):
    if a is None or b is None:
        return None
    return a == b if a is not _D and b is not _D else _D


def _ne(a, b):
    if a is None or b is None:
        return None
    return a != b if a is not _D and b is not _D else _D


def _lt(a, b):
    return None if a is None or b is None else a < b


def _le(a, b):
    return None if a is None or b is None else a <= b


def _gt(a, b):
    return None if a is None or b is None else a > b


def _ge(a, b):
    return None if a is None or b is None else a >= b


def _nan_lt(a, b) -> bool:
    """a < b for two non-NULL numbers, NaN above every other one (the marker if
    either is it)."""
    if a is _D or b is _D:
        return _D
    if b != b:
        return a == a
    return a < b              # (False when a is NaN: nothing is above it but NaN)


def _feq(a, b):
    if a is None or b is None:
        return None
    if a is _D or b is _D:
        return _D
    return a == b or (a != a and b != b)


def _fne(a, b):
    if a is None or b is None:
        return None
    if a is _D or b is _D:
        return _D
    return not (a == b or (a != a and b != b))


def _flt(a, b):
    return None if a is None or b is None else _nan_lt(a, b)


def _fle(a, b):
    if a is None or b is None:
        return None
    return _D if a is _D or b is _D else not _nan_lt(b, a)


def _fgt(a, b):
    return None if a is None or b is None else _nan_lt(b, a)


def _fge(a, b):
    if a is None or b is None:
        return None
    return _D if a is _D or b is _D else not _nan_lt(a, b)


def _fin(x, *values):
    if x is None or x is _D:
        return x
    saw_null = False
    for v in values:
        if v is None:
            saw_null = True
        elif v is _D:
            return _D
        elif x == v or (x != x and v != v):
            return True
    return None if saw_null else False


def _fnullif(a, b):
    if b is _D:
        return _D
    return None if a is not None and b is not None and (a == b or (a != a and b != b)) else a


def _isnull(v):
    return _D if v is _D else v is None


def _isnotnull(v):
    return _D if v is _D else v is not None


def _canon(v):
    """A FLOAT result with its NaN made the one NaN (None and numbers unchanged)."""
    return NAN if v != v else v


def _not(a):
    return None if a is None else a if a is _D else not a


def _and(*args):
    """AND as PostgreSQL evaluates it, left to right: the first FALSE decides, and a
    marker met before one is the marker (PostgreSQL fails there)."""
    result = True
    for a in args:
        if a is None:
            result = None
        elif a is _D:
            return _D
        elif not a:
            return False
    return result


def _or(*args):
    """OR, left to right: the first TRUE decides, a marker before it is the marker."""
    result = False
    for a in args:
        if a is None:
            result = None
        elif a is _D:
            return _D
        elif a:
            return True
    return result


def _all(*args):
    """A WHERE's top-level AND where no condition divides as PostgreSQL does: any
    FALSE decides, wherever it stands (a marker, read from another view's column,
    counts only without a FALSE)."""
    result = True
    for a in args:
        if a is None:
            if result is True:
                result = None
        elif a is _D:
            result = _D
        elif not a:
            return False
    return result


def _quals(*args):
    """A WHERE's top-level AND as PostgreSQL's ``ExecQual`` runs its conditions, in the
    order given (cheapest first: ``qual_order``): the first FALSE or NULL rejects the
    row, a marker before it is the marker (PostgreSQL fails there)."""
    for a in args:
        if a is _D:
            return _D
        if a is not True:
            return False
    return True


def _in(x, *values):
    if x is None or x is _D:
        return x
    saw_null = False
    for v in values:
        if v is None:
            saw_null = True
        elif v is _D:
            return _D
        elif x == v:
            return True
    return None if saw_null else False


def _coalesce(*args):
    for a in args:
        if a is not None:
            return a
    return None


def _nullif(a, b):
    if b is _D:
        return _D
    return None if a is not None and b is not None and a == b else a


def _abs(a):
    return None if a is None else abs(a)


def _concat(a, b):
    if a is None or b is None:
        return None
    return _D if a is _D or b is _D else _text(a) + _text(b)


def _lower(a):
    return None if a is None else a if a is _D else a.lower()


def _upper(a):
    return None if a is None else a if a is _D else a.upper()


def _length(a):
    return None if a is None else a if a is _D else len(a)


@lru_cache(maxsize=1024)
def _like_regex(pattern: str) -> re.Pattern:
    out = []
    for ch in pattern:
        if ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


def _like(a, pattern):
    if a is None or pattern is None:
        return None
    if a is _D or pattern is _D:
        return _D
    return _like_regex(pattern).fullmatch(a) is not None


def _text(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        # a TIMESTAMPTZ (in UTC) as PostgreSQL and DuckDB show it: '2026-01-02 03:04:05+00',
        # '2026-01-02 03:04:05.5+00' (no trailing zeros in the fraction)
        text = str(v.astimezone(datetime.timezone.utc).replace(tzinfo=None))
        if v.microsecond:
            text = text.rstrip("0")
        return text + "+00"
    return str(v)


_NUM_PREFIX = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _cast_int(v):
    if v is None or v is _D:
        return v
    if isinstance(v, (bool, int)):
        return _int64(int(v))
    if isinstance(v, float):
        return _int64(int(v)) if math.isfinite(v) else None
    if isinstance(v, str):
        m = _NUM_PREFIX.match(v)
        if not m:
            return 0
        s = m.group(0)
        return _int64(int(s)) if "." not in s and m.group(3) is None else _cast_int(float(s))
    return None


#: text that CAST to FLOAT reads as NaN or an infinity (PostgreSQL's spellings, any case)
_SPECIAL_FLOATS = {"nan": NAN, "+nan": NAN, "-nan": NAN, "inf": math.inf,
                   "+inf": math.inf, "infinity": math.inf, "+infinity": math.inf,
                   "-inf": -math.inf, "-infinity": -math.inf}


def _cast_float(v):
    if v is None or v is _D:
        return v
    if isinstance(v, PgNumeric):        # (the PostgreSQL front end's numeric: its value)
        return as_float(v)
    if isinstance(v, (bool, int, float)):
        return float(v)
    if isinstance(v, str):
        m = _NUM_PREFIX.match(v)
        if m:
            return float(m.group(0))
        return _SPECIAL_FLOATS.get(v.strip().lower(), 0.0)
    return None


def _cast_text(v):
    return v if v is None or v is _D else _text(v)


def _cast_bool(v):
    if v is None or v is _D:
        return v
    if isinstance(v, str):
        return v.strip().lower() in ("1", "t", "true", "yes", "y", "on")
    return bool(v)


_UTC = datetime.timezone.utc


def _cast_date(v):
    if v is None or v is _D or type(v) is datetime.date:
        return v
    if isinstance(v, datetime.datetime):
        return v.date() if v.tzinfo is None else v.astimezone(_UTC).date()     # (UTC's)
    if isinstance(v, str):
        return parse_temporal(v, SqlType.DATE)      # (as the front end reads a literal)
    return None


def _cast_timestamp(v):
    if v is None or v is _D:
        return v
    if isinstance(v, datetime.datetime):
        return v if v.tzinfo is None else v.astimezone(_UTC).replace(tzinfo=None)  # (UTC's)
    if isinstance(v, datetime.date):
        return datetime.datetime(v.year, v.month, v.day)
    if isinstance(v, str):
        return parse_temporal(v, SqlType.TIMESTAMP)
    return None


def _cast_timestamptz(v):
    """A TIMESTAMPTZ, in UTC: a TIMESTAMP, a DATE (its midnight) or text without an
    offset read as UTC (there is no session time zone)."""
    if v is None or v is _D:
        return v
    if isinstance(v, datetime.datetime):
        return v.replace(tzinfo=_UTC) if v.tzinfo is None else v.astimezone(_UTC)
    if isinstance(v, datetime.date):
        return datetime.datetime(v.year, v.month, v.day, tzinfo=_UTC)
    if isinstance(v, str):
        return parse_temporal(v, SqlType.TIMESTAMPTZ, as_utc=True)
    return None


_CASTS = {
    SqlType.INT: "_cast_int", SqlType.FLOAT: "_cast_float", SqlType.TEXT: "_cast_text",
    SqlType.BOOL: "_cast_bool", SqlType.DATE: "_cast_date", SqlType.TIMESTAMP: "_cast_timestamp",
    SqlType.TIMESTAMPTZ: "_cast_timestamptz",
}

_FUNCS = {
    "add": "_add", "sub": "_sub", "mul": "_mul", "div": "_div", "mod": "_mod", "neg": "_neg",
    "pgdiv": "_pgdiv", "pgmod": "_pgmod",
    "eq": "_eq", "ne": "_ne", "lt": "_lt", "le": "_le", "gt": "_gt", "ge": "_ge",
    "and": "_and", "or": "_or", "not": "_not", "in": "_in", "coalesce": "_coalesce",
    "nullif": "_nullif", "abs": "_abs", "like": "_like", "concat": "_concat",
    "lower": "_lower", "upper": "_upper", "length": "_length",
}

#: the NaN-aware helper of an operator, where an operand is FLOAT
_FLOAT_FUNCS = {"eq": "_feq", "ne": "_fne", "lt": "_flt", "le": "_fle", "gt": "_fgt",
                "ge": "_fge", "in": "_fin", "nullif": "_fnullif"}
#: operators whose FLOAT result may be a new NaN object
_MAKES_FLOATS = frozenset({"add", "sub", "mul", "div", "mod", "pgdiv", "pgmod", "neg", "abs",
                           "cast"})
# INT-typed calls that can leave 64 bits: add, sub and mul have checked helpers of
# their own (they are the common ones); the rest have their result passed to _int64
_INT_FUNCS = {"add": "_iadd", "sub": "_isub", "mul": "_imul"}
_INT_CHECKED = frozenset({"neg", "abs", "div", "pgdiv"})

_NAMESPACE: dict[str, Any] = {name: obj for name, obj in globals().items() if name.startswith("_")}


# ---------------------------------------------------------------- compiler

class _Compiler:
    """The source of one generated function. Python's parser takes at most 200 nested
    parentheses, so a subexpression ``NEST`` calls deep (or a CASE's ``NEST``-th WHEN)
    becomes a function of its own, called from here: any tree the front end passes
    compiles, however deep its calls or long its CASE."""

    NEST = 50          # calls deep in one function (a call is at most two parentheses)

    def __init__(self, pg: bool = False) -> None:
        self.consts: list[Any] = []
        self.pg = pg            # the tree divides as PostgreSQL does: CASE, IS NULL see DIV0

    def const(self, value: Any) -> str:
        self.consts.append(value)
        return f"_k[{len(self.consts) - 1}]"

    def src(self, e: Expr, depth: int = 0) -> str:
        if isinstance(e, Col):
            return f"r[{e.index}]"
        if isinstance(e, Lit):
            v = e.value
            if v is None or isinstance(v, bool):   # an inlined int would warn in "5 is None"
                return repr(v)
            return self.const(v)
        if isinstance(e, Call):
            if depth >= self.NEST:
                return f"{self.const(compile_expr(e, self.pg))}(r)"
            op = e.op
            inner = depth + 1
            if op == "is_null":
                if self.pg:
                    return f"_isnull({self.src(e.args[0], inner)})"
                return f"({self.src(e.args[0], inner)} is None)"
            if op == "is_not_null":
                if self.pg:
                    return f"_isnotnull({self.src(e.args[0], inner)})"
                return f"({self.src(e.args[0], inner)} is not None)"
            if op == "case":
                return self._case(e, depth)
            if op in ("and", "or"):     # (folding changes no value but a marker's)
                args_or_value = folded(e)
                if isinstance(args_or_value, bool):
                    return repr(args_or_value)
                e = Call(op, args_or_value, e.type)
            if op == "cast":
                fn = _CASTS.get(e.type)
                if fn is None:
                    raise UnsupportedError(f"CAST to {e.type.value}")
                out = f"{fn}({self.src(e.args[0], inner)})"
            else:
                is_int = e.type is SqlType.INT
                fn = (is_int and _INT_FUNCS.get(op)) or _FUNCS.get(op)
                if fn is None:
                    raise UnsupportedError(f"the expression operator {op!r}")
                if op in _FLOAT_FUNCS and any(a.type is SqlType.FLOAT for a in e.args):
                    fn = _FLOAT_FUNCS[op]
                args = []
                for a in e.args:        # (a loop, not a generator: one frame a level)
                    args.append(self.src(a, inner))
                out = f"{fn}({', '.join(args)})"
                if is_int and op in _INT_CHECKED:
                    out = f"_int64({out})"
            if e.type is SqlType.FLOAT and op in _MAKES_FLOATS:
                return f"_canon({out})"
            return out
        raise UnsupportedError(f"the expression {e!r}")

    def _case(self, e: Call, depth: int) -> str:
        """``(v1 if c1 is True else (v2 if ...))``: each WHEN nests one level, so the
        WHENs past ``NEST`` go on as a CASE of their own (a function of its own)."""
        args = e.args
        room = max(1, self.NEST - depth)
        pairs = [(args[i], args[i + 1]) for i in range(0, min(len(args) - 1, 2 * room), 2)]
        rest = args[2 * len(pairs):]         # the WHENs left, and the ELSE if there is one
        if len(rest) > 1:
            out = self.src(Call("case", rest, e.type), depth + len(pairs))
        elif rest:
            out = self.src(rest[0], depth + len(pairs))
        else:
            out = "None"
        for k in reversed(range(len(pairs))):
            cond, val = pairs[k]
            level = depth + k + 1
            if self.pg:     # a condition that is DIV0 makes the CASE DIV0
                out = (f"({self.src(val, level)} if (_c := {self.src(cond, level)}) is True "
                       f"else _D if _c is _D else {out})")
            else:
                out = f"({self.src(val, level)} if {self.src(cond, level)} is True else {out})"
        return out


def _constant(e: Expr) -> bool:
    """Whether ``e`` reads no column (a literal, or operators over literals). A loop,
    not a recursion: a tree may be deeper than Python's stack."""
    todo = [e]
    while todo:
        x = todo.pop()
        if isinstance(x, Col):
            return False
        if isinstance(x, Call):
            todo.extend(x.args)
    return True


def folded(e: Call) -> tuple[Expr, ...] | bool:
    """An AND's or OR's operands as PostgreSQL's planner leaves them (its constant
    folding, before any row): a constant TRUE decides an OR (``x OR TRUE`` is TRUE
    whatever ``x``, even a division by zero), a constant FALSE an AND; the other
    constants are dropped, but for one NULL. Returns the operands left, or the value."""
    decisive = e.op == "or"
    kept: list[Expr] = []
    null = False
    for a in e.args:
        if not _constant(a):
            kept.append(a)
            continue
        v = compile_expr(a, True)(())
        if v is _D:
            kept.append(a)
        elif v is None:
            if not null:
                kept.append(Lit(None, SqlType.BOOL))
                null = True
        elif bool(v) is decisive:
            return decisive
    return tuple(kept) if kept else not decisive


def pg_divides(e: Expr) -> bool:
    """Whether ``e`` holds the PostgreSQL front end's ``/`` or ``%``."""
    if isinstance(e, Call):
        return e.op in ("pgdiv", "pgmod") or any(pg_divides(a) for a in e.args)
    return False


def compile_expr(e: Expr, pg: bool | None = None) -> RowFn:
    """A function row -> value computing ``e``."""
    if isinstance(e, Col):
        i = e.index
        return lambda r: r[i]
    c = _Compiler(pg_divides(e) if pg is None else pg)
    body = c.src(e)
    ns = dict(_NAMESPACE)
    ns["_k"] = c.consts
    return eval(f"lambda r: {body}", ns)  # noqa: S307 - source is generated from a typed tree


def columns_getter(cols: tuple[int, ...]) -> Callable[[tuple], tuple]:
    """row -> the tuple of its ``cols`` (``()`` for no columns), without generated code."""
    if not cols:
        return lambda r: ()
    if len(cols) == 1:
        c = cols[0]
        return lambda r: (r[c],)
    return itemgetter(*cols)


def compile_row(exprs: tuple[Expr, ...]) -> Callable[[tuple], tuple]:
    """A function row -> tuple of every expression's value (one generated lambda)."""
    if all(isinstance(e, Col) for e in exprs):
        return columns_getter(tuple(cast(Col, e).index for e in exprs))
    c = _Compiler(any(pg_divides(e) for e in exprs))
    parts = [c.src(e) for e in exprs]
    ns = dict(_NAMESPACE)
    ns["_k"] = c.consts
    return eval(f"lambda r: ({', '.join(parts)},)", ns)  # noqa: S307


def compile_predicate(e: Expr) -> RowFn:
    """A function row -> bool that is True exactly when ``e`` is TRUE."""
    c = _Compiler(pg_divides(e))
    body = c.src(e)
    ns = dict(_NAMESPACE)
    ns["_k"] = c.consts
    return eval(f"lambda r: {body} is True", ns)  # noqa: S307


#: operators PostgreSQL's cost model charges nothing for (``cost_qual_eval``: boolean
#: connectives, CASE, COALESCE and IS NULL cost only their operands)
_FREE_OPS = frozenset({"and", "or", "not", "case", "coalesce", "is_null", "is_not_null"})
#: operators whose INT operand PostgreSQL casts to ``double precision`` beside a FLOAT
#: one (a function call: one more operator's cost), there being no mixed operator
_MIXED_CASTS = frozenset({"add", "sub", "mul", "div", "pgdiv", "mod", "pgmod", "eq", "ne",
                          "lt", "le", "gt", "ge"})


def _qual_cost(e: Expr) -> float:
    """What PostgreSQL's planner estimates a condition costs per row, in operators
    (``cost_qual_eval``: each operator or function call one, with a column or a
    constant free; ``IN`` of n values half of n comparisons; an INT column beside a
    FLOAT one its cast). A loop, not a recursion: a tree may be deeper than the stack."""
    cost = 0.0
    todo = [e]
    while todo:
        x = todo.pop()
        if not isinstance(x, Call):
            continue
        todo.extend(x.args)
        if x.op == "in":
            cost += 0.5 * (len(x.args) - 1)
        elif x.op not in _FREE_OPS:
            cost += 1
            if x.op in _MIXED_CASTS and any(a.type is SqlType.FLOAT for a in x.args):
                cost += sum(1 for a in x.args if a.type is SqlType.INT and not _constant(a))
    return cost


def qual_order(args: tuple[Expr, ...]) -> list[Expr]:
    """A WHERE's top-level conditions (nested ANDs flattened) in the order PostgreSQL
    evaluates them: cheapest first (``order_qual_clauses``: a stable sort), where they
    cost the same as written, but the equalities (``x = y``, ``a + 1 = 5``) after the
    rest: PostgreSQL's planner takes them into equivalence classes and makes them
    conditions again after the others (``generate_base_implied_equalities``)."""
    flat: list[Expr] = []
    todo = list(reversed(args))
    while todo:
        a = todo.pop()
        if isinstance(a, Call) and a.op == "and":
            todo.extend(reversed(a.args))
        else:
            flat.append(a)
    flat.sort(key=lambda a: isinstance(a, Call) and a.op == "eq")
    return sorted(flat, key=_qual_cost)


def compile_condition(e: Expr) -> RowFn:
    """A function row -> True when ``e`` is TRUE, ``DIV0`` when it is the
    division-by-zero marker (noria_py/divzero.py), else False: a WHERE's test, which
    must not drop a row silently where PostgreSQL would have failed. Its top-level AND,
    where it divides as PostgreSQL does, runs its conditions as PostgreSQL does, cheapest
    first (``qual_order``, ``_quals``); otherwise any FALSE operand decides (``_all``:
    the same answer where no condition can be the marker); a nested AND or OR goes
    left to right."""
    c = _Compiler(pg_divides(e))
    if isinstance(e, Call) and e.op == "and":
        args = folded(e)
        if isinstance(args, bool):
            return (lambda r: True) if args else (lambda r: False)
        if c.pg:
            body = f"_quals({', '.join(c.src(a) for a in qual_order(args))})"
        else:
            body = f"_all({', '.join(c.src(a) for a in args)})"
    else:
        body = c.src(e)
    ns = dict(_NAMESPACE)
    ns["_k"] = c.consts
    return eval(f"lambda r: (_v := {body}) is True or (_v is _D and _D)", ns)  # noqa: S307


def evaluate_constant(e: Expr) -> Any:
    return compile_expr(e)(())
