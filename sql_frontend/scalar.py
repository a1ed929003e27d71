"""Scalar expressions: sqlglot nodes to typed ``Expr`` over a scope.

Type checking happens here, while the sqlglot node is at hand, so a mismatch can be
reported with the offending text and its position. Aggregate calls are not
evaluated here: inside a grouped query they become ``AggRef`` markers that the
query builder later replaces with columns of the Aggregate's output.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable

from sqlglot import exp

from .errors import SqlError, TypeMismatchError, UnknownColumnError
from .expr import Call, Col, Expr, Lit
from .parse import PG_AVG
from .resolve import Context, Scope
from .typerules import (
    TEMPORAL,
    arithmetic,
    comparable,
    declared_type,
    family,
    not_temporal,
    parse_temporal,
    read_bool,
    unify,
    value_type,
)
from .types import INT_MAX, INT_MIN, ColumnInfo, SqlType

# ---------------------------------------------------------------- aggregates

@dataclass(frozen=True)
class AggRef:
    """Stands for the ``slot``-th aggregate of a grouped query until the Aggregate exists."""
    slot: int
    type: SqlType


@dataclass(frozen=True)
class AggSpec:
    func: str                  # count_star, count, sum, avg, pgavg, min, max
    arg: Expr | None           # over the pre-aggregation scope
    distinct: bool
    type: SqlType
    name: str                  # SQL text, for the output column name


class AggCollector:
    """The distinct aggregate calls of one grouped query, in first-use order."""

    def __init__(self) -> None:
        self.specs: list[AggSpec] = []

    def add(self, spec: AggSpec) -> int:
        for i, s in enumerate(self.specs):
            if (s.func, s.arg, s.distinct) == (spec.func, spec.arg, spec.distinct):
                return i
        self.specs.append(spec)
        return len(self.specs) - 1


AGG_FUNCS = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}


def _is_pg_avg(node: exp.Expr) -> bool:
    """``PG_AVG(x)``: the PostgreSQL front end's AVG (``parse.postgres_division``)."""
    return isinstance(node, exp.Anonymous) and node.name.upper() == PG_AVG


def contains_aggregate(node: exp.Expr | None) -> bool:
    """Whether ``node`` calls an aggregate outside any subquery."""
    if node is None:
        return False
    for n in node.walk(prune=lambda n: isinstance(n, (exp.Subquery, exp.Select, exp.Window))):
        if isinstance(n, exp.AggFunc) or _is_pg_avg(n):
            return True
    return False


# ---------------------------------------------------------------- errors

def mismatch(ctx: Context, message: str, node: exp.Expr | None) -> TypeMismatchError:
    pos = ctx.pos(node)
    if pos is not None:
        message = f"{message} (at line {pos[0]}, column {pos[1]})"
    err = TypeMismatchError(message)
    err.position = pos  # type: ignore[attr-defined]
    return err


# ---------------------------------------------------------------- translation

_ARITH = {exp.Add: "add", exp.Sub: "sub", exp.Mul: "mul", exp.Div: "div", exp.Mod: "mod"}
#: the PostgreSQL front end's division (``postgres_division`` writes ``a / b`` so)
_PG_ARITH = {"PG_DIV": "pgdiv", "PG_MOD": "pgmod"}
#: the CAST targets that are floating point (not DECIMAL/NUMERIC): ``float8``, ``real``
_FLOAT_TYPES = frozenset({exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT})
_CMP = {exp.EQ: "eq", exp.NEQ: "ne", exp.LT: "lt", exp.LTE: "le", exp.GT: "gt", exp.GTE: "ge"}
_TEXT_FUNCS = {exp.Lower: ("lower", SqlType.TEXT), exp.Upper: ("upper", SqlType.TEXT),
               exp.Length: ("length", SqlType.INT)}


class Translator:
    """Translates expressions of one clause.

    ``aggs``: where aggregate calls are allowed (grouped SELECT list, HAVING, ORDER BY),
    the collector they are registered with; None elsewhere. ``aliases``: SELECT-list
    aliases a bare name may fall back to (HAVING and ORDER BY, as SQLite allows).
    """

    def __init__(self, ctx: Context, scope: Scope, *, aggs: AggCollector | None = None,
                 clause: str = "WHERE", aliases: dict[str, exp.Expr] | None = None,
                 sub=None) -> None:
        self.ctx = ctx
        self.scope = scope
        self.aggs = aggs
        self.clause = clause
        self.aliases = dict(aliases or {})
        # where subqueries are allowed: the SubqueryJoiner that adds their columns
        self.sub = sub

    def __call__(self, node: exp.Expr) -> Expr:
        return self.expr(node)

    def condition(self, node: exp.Expr) -> Expr:
        """A WHERE/ON/HAVING condition: any expression that can be TRUE."""
        return self._boolean(self.expr(node), node)

    # -- dispatch
    def expr(self, node: exp.Expr) -> Expr:
        handler = self._handler(node)
        if handler is None:
            raise self._unsupported_node(node)
        return handler(node)

    def _handler(self, node: exp.Expr) -> Callable[[Any], Expr] | None:
        if isinstance(node, exp.Anonymous) and node.name.upper() in _PG_ARITH:
            return self._pg_arith
        if _is_pg_avg(node):
            return self._pg_avg
        for cls, fn in (
            (exp.Paren, lambda n: self.expr(n.this)),
            (exp.Alias, lambda n: self.expr(n.this)),
            (exp.Column, self._column),
            (exp.Literal, self._literal),
            (exp.Null, lambda n: Lit(None, SqlType.NULL)),
            (exp.Boolean, lambda n: Lit(bool(n.this), SqlType.BOOL)),
            (exp.Placeholder, self._placeholder),
            (exp.Neg, self._neg),
            (exp.IntDiv, self._intdiv),
            (exp.And, self._logic), (exp.Or, self._logic),
            (exp.Not, self._not),
            (exp.Is, self._is),
            (exp.Case, self._case),
            (exp.Coalesce, self._coalesce),
            (exp.Nullif, self._nullif),
            (exp.Abs, self._abs),
            (exp.In, self._in),
            (exp.Between, self._between),
            (exp.Like, self._like),
            (exp.DPipe, self._concat),
            (exp.Cast, self._cast),
            (exp.AggFunc, self._aggregate),
            (exp.Exists, self._exists),
            (exp.Subquery, self._scalar_subquery),
        ):
            if isinstance(node, cls):
                return fn
        for table in (_ARITH, _CMP, _TEXT_FUNCS):
            for table_cls in table:
                if type(node) is table_cls:
                    if table is _ARITH:
                        return self._arith
                    if table is _CMP:
                        return self._compare_node
                    return self._text_func
        return None

    def _unsupported_node(self, node: exp.Expr) -> SqlError:
        ctx = self.ctx
        if isinstance(node, exp.Window):
            return ctx.unsupported(f"window function {node.this.sql()} OVER (...)", node)
        if isinstance(node, exp.Exists):
            return ctx.unsupported("EXISTS subquery", node)
        if isinstance(node, (exp.Subquery, exp.Select, exp.SetOperation)):
            return ctx.unsupported("subquery in an expression", node)
        if isinstance(node, exp.Escape):
            return ctx.unsupported("LIKE ... ESCAPE", node)
        if isinstance(node, exp.Anonymous):
            return ctx.unsupported(f"function {node.name.upper()}()", node)
        if isinstance(node, exp.Func):
            return ctx.unsupported(f"function {_written_name(ctx.sql, node)}()", node)
        if isinstance(node, exp.Star):
            return ctx.unsupported("* in an expression", node)
        return ctx.unsupported(f"{node.key.upper()} expression {node.sql()}", node)

    # -- leaves
    def _column(self, node: exp.Column) -> Expr:
        if isinstance(node.this, exp.Star):
            raise self.ctx.unsupported(f"{node.sql()} in an expression", node)
        try:
            i = self.scope.resolve(self.ctx, node)
        except UnknownColumnError:
            alias = None if node.table else self.aliases.get(node.name.lower())
            if alias is None:
                raise
            sub = Translator(self.ctx, self.scope, aggs=self.aggs, clause=self.clause,
                             aliases={k: v for k, v in self.aliases.items()
                                      if k != node.name.lower()}, sub=self.sub)
            return sub.expr(alias)
        f = self.scope.fields[i]
        return Col(i, f.type, f.name)

    def _literal(self, node: exp.Literal) -> Expr:
        text = node.this
        if node.is_string:
            return Lit(text, SqlType.TEXT)
        try:
            value = int(text)
        except ValueError:
            pass
        else:
            return self._int_literal(value, node)
        try:
            return Lit(float(text), SqlType.FLOAT)
        except ValueError:
            raise self.ctx.unsupported(f"numeric literal {text}", node) from None

    def _int_literal(self, value: int, node: exp.Expr) -> Lit:
        """An integer in the SQL text: an INT, refused past INT's 64 bits (as INSERT refuses
        such a value, and PostgreSQL a BIGINT), where SQLite would silently make it a REAL."""
        if not INT_MIN <= value <= INT_MAX:
            raise mismatch(self.ctx, f"integer {value} is out of the INT range ({INT_MIN} to "
                                     f"{INT_MAX}); write {value}.0 for a FLOAT", node)
        return Lit(value, SqlType.INT)

    def _placeholder(self, node: exp.Placeholder) -> Expr:
        if node.this:
            raise self.ctx.unsupported(f"named parameter :{node.this}", node)
        if id(node) not in self.ctx.bound:
            raise self.ctx.unsupported(
                "parameter ? here (in a query, ? may only appear as a top-level "
                "WHERE conjunct `column = ?`)", node)
        value = self.ctx.bound[id(node)]
        t = value_type(value)
        if t is None:
            raise mismatch(self.ctx, f"parameter of unsupported Python type "
                                     f"{type(value).__name__}: {value!r}", node)
        return Lit(value, t)

    # -- arithmetic
    def _neg(self, node: exp.Neg) -> Expr:
        inner = node.this
        if isinstance(inner, exp.Literal) and not inner.is_string and inner.this.isdigit():
            return self._int_literal(-int(inner.this), node)     # -9223372036854775808 fits
        a = self.expr(inner)
        if family(a.type) not in ("number", "null"):
            raise mismatch(self.ctx, f"cannot negate {a.type.value} in {node.sql()}", node)
        t = SqlType.INT if a.type == SqlType.BOOL else a.type
        if (isinstance(a, Lit) and a.value is not None and not isinstance(a.value, bool)
                and (t is not SqlType.INT or a.value != INT_MIN)):   # (-INT_MIN: no INT; NULL)
            return Lit(-a.value, t)
        return Call("neg", (a,), t)

    def _arith(self, node: exp.Binary) -> Expr:
        a, b = self.expr(node.this), self.expr(node.expression)
        t = arithmetic(a.type, b.type)
        if t is None:
            raise mismatch(self.ctx, f"arithmetic on {a.type.value} and {b.type.value} "
                                     f"in {node.sql()}", node)
        return Call(_ARITH[type(node)], (a, b), t)

    def _pg_arith(self, node: exp.Anonymous) -> Expr:
        """``PG_DIV(a, b)``, ``PG_MOD(a, b)``: ``a / b`` and ``a % b``, a zero divisor
        giving the division-by-zero marker (noria_py/divzero.py)."""
        name = node.name.upper()
        if len(node.expressions) != 2:
            raise self.ctx.unsupported(f"{name} with {len(node.expressions)} arguments "
                                       "(it takes two)", node)
        a, b = self.expr(node.expressions[0]), self.expr(node.expressions[1])
        t = arithmetic(a.type, b.type)
        if t is None:
            raise mismatch(self.ctx, f"arithmetic on {a.type.value} and {b.type.value} "
                                     f"in {node.sql()}", node)
        return Call(_PG_ARITH[name], (a, b), t)

    def _pg_avg(self, node: exp.Anonymous) -> Expr:
        """``PG_AVG(x)``: ``AVG(x)``, exact over integers (``pgavg``)."""
        if len(node.expressions) != 1:
            raise self.ctx.unsupported(f"{PG_AVG} with {len(node.expressions)} arguments "
                                       "(it takes one)", node)
        return self._aggregate(exp.Avg(this=node.expressions[0].copy()), "pgavg")

    def _intdiv(self, node: exp.IntDiv) -> Expr:
        a, b = self.expr(node.this), self.expr(node.expression)
        t = arithmetic(a.type, b.type)
        if t is None:
            raise mismatch(self.ctx, f"arithmetic on {a.type.value} and {b.type.value} "
                                     f"in {node.sql()}", node)
        if t == SqlType.FLOAT:
            return Call("cast", (Call("div", (a, b), t),), SqlType.INT)
        return Call("div", (a, b), t)

    # -- comparisons and logic
    def _compare_node(self, node: exp.Binary) -> Expr:
        return self.compare(_CMP[type(node)], self.expr(node.this),
                            self.expr(node.expression), node)

    def compare(self, op: str, a: Expr, b: Expr, node: exp.Expr) -> Expr:
        a, b = self._coerce_literal(a, b, node), self._coerce_literal(b, a, node)
        a, b = _promoted(a, b.type), _promoted(b, a.type)
        if not comparable(a.type, b.type):
            hint = ("; there is no session time zone: CAST one to the other's type (a CAST "
                    "reads a DATE or TIMESTAMP as UTC)"
                    if {family(a.type), family(b.type)} == {"time", "instant"} else "")
            raise mismatch(self.ctx, f"cannot compare {a.type.value} with {b.type.value} "
                                     f"in {node.sql()}{hint}", node)
        return Call(op, (a, b), SqlType.BOOL)

    def _coerce_literal(self, a: Expr, other: Expr, node: exp.Expr) -> Expr:
        """A text literal compared with a value of another type is read as one of that
        type, as PostgreSQL reads an untyped literal (and DuckDB and SQLite's affinity
        agree): ``int_col = '5'`` is ``int_col = 5``, ``d > '2020-01-01'`` a date; text
        that is not one is an error."""
        if not (isinstance(a, Lit) and a.type == SqlType.TEXT and isinstance(a.value, str)):
            return a
        t = other.type
        if t in TEMPORAL:
            v = parse_temporal(a.value, t)
            if v is None:
                raise mismatch(self.ctx, f"{not_temporal(a.value, t)} in {node.sql()}", node)
            return Lit(v, t)
        reader = _LITERAL_READERS.get(t)
        if reader is None:
            return a
        try:
            return Lit(reader(a.value.strip()), t)
        except ValueError:
            raise mismatch(self.ctx, f"invalid input for {t.value}: {a.value!r} "
                                     f"in {node.sql()}", node) from None

    def _boolean(self, e: Expr, node: exp.Expr) -> Expr:
        if family(e.type) not in ("number", "null"):
            raise mismatch(self.ctx, f"{e.type.value} used as a condition: {node.sql()}", node)
        return e

    def _logic(self, node: exp.Connector) -> Expr:
        op = "and" if isinstance(node, exp.And) else "or"
        cls = type(node)
        parts: list[exp.Expr] = []
        stack = [node]
        while stack:                       # flatten a AND b AND c into one call
            n = stack.pop()
            if type(n) is cls:
                stack.append(n.expression)
                stack.append(n.this)
            else:
                parts.append(n)
        args = tuple(self._boolean(self.expr(p), p) for p in parts)
        return Call(op, args, SqlType.BOOL)

    def _not(self, node: exp.Not) -> Expr:
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            return Call("is_not_null", (self.expr(inner.this),), SqlType.BOOL)
        a = self._boolean(self.expr(node.this), node.this)
        return Call("not", (a,), SqlType.BOOL)

    def _is(self, node: exp.Is) -> Expr:
        if not isinstance(node.expression, exp.Null):
            raise self.ctx.unsupported(f"IS {node.expression.sql()} (only IS [NOT] NULL)", node)
        return Call("is_null", (self.expr(node.this),), SqlType.BOOL)

    def _negated(self, e: Expr, node: exp.Expr) -> Expr:
        return Call("not", (e,), SqlType.BOOL) if node.args.get("negate") else e

    def _no_subquery(self, what: str, node: exp.Expr) -> SqlError:
        return self.ctx.unsupported(f"{what} in {self.clause}", node)

    def _exists(self, node: exp.Exists) -> Expr:
        if self.sub is None:
            raise self._no_subquery("EXISTS subquery", node)
        return self.sub.exists(node)

    def _scalar_subquery(self, node: exp.Subquery) -> Expr:
        if self.sub is None:
            raise self._no_subquery("subquery in an expression", node)
        return self.sub.scalar(node)

    def _in(self, node: exp.In) -> Expr:
        if node.args.get("unnest") is not None or node.args.get("field") is not None:
            raise self.ctx.unsupported(f"IN form {node.sql()}", node)
        if node.args.get("query") is not None:
            if self.sub is None:
                raise self._no_subquery("IN (subquery)", node)
            x = self.expr(node.this)
            return self._negated(self.sub.in_(x, node.args["query"], node), node)
        x = self.expr(node.this)
        if not node.expressions:
            # x IN () is FALSE even for a NULL x (SQLite allows the empty list)
            return self._negated(Lit(False, SqlType.BOOL), node)
        values = []
        for v in node.expressions:
            ev = _promoted(self._coerce_literal(self.expr(v), x, v), x.type)
            if ev.type == SqlType.TIMESTAMP and x.type == SqlType.DATE:
                x = _promoted(x, ev.type)
            if not comparable(x.type, ev.type):
                raise mismatch(self.ctx, f"cannot compare {x.type.value} with "
                                         f"{ev.type.value} in {node.sql()}", v)
            values.append(ev)
        return self._negated(Call("in", (x, *values), SqlType.BOOL), node)

    def _between(self, node: exp.Between) -> Expr:
        if node.args.get("symmetric"):
            raise self.ctx.unsupported("BETWEEN SYMMETRIC", node)
        x = self.expr(node.this)
        lo = self.compare("ge", x, self.expr(node.args["low"]), node)
        hi = self.compare("le", x, self.expr(node.args["high"]), node)
        return self._negated(Call("and", (lo, hi), SqlType.BOOL), node)

    def _like(self, node: exp.Like) -> Expr:
        a, p = self.expr(node.this), self.expr(node.expression)
        for e in (a, p):
            if e.type not in (SqlType.TEXT, SqlType.NULL):
                raise mismatch(self.ctx, f"LIKE needs text, got {e.type.value} in "
                                         f"{node.sql()}", node)
        return self._negated(Call("like", (a, p), SqlType.BOOL), node)

    # -- conditional
    def _unified(self, exprs: list[Expr], node: exp.Expr, what: str) -> SqlType:
        t = unify([e.type for e in exprs])
        if t is None:
            shown = ", ".join(sorted({e.type.value for e in exprs}))
            raise mismatch(self.ctx, f"{what} mixes incompatible types ({shown}) in "
                                     f"{node.sql()}", node)
        return t

    def _case(self, node: exp.Case) -> Expr:
        subject = self.expr(node.this) if node.this is not None else None
        args: list[Expr] = []
        values: list[Expr] = []
        for when in node.args.get("ifs") or []:
            if subject is not None:         # simple CASE x WHEN v: x = v
                cond = self.compare("eq", subject, self.expr(when.this), when)
            else:
                cond = self._boolean(self.expr(when.this), when.this)
            val = self.expr(when.args["true"])
            args += [cond, val]
            values.append(val)
        default = node.args.get("default")
        else_ = self.expr(default) if default is not None else Lit(None, SqlType.NULL)
        values.append(else_)
        t = self._unified(values, node, "CASE")
        args = [a if i % 2 == 0 else _promoted(a, t) for i, a in enumerate(args)]
        return Call("case", (*args, _promoted(else_, t)), t)

    def _coalesce(self, node: exp.Coalesce) -> Expr:
        args = [self.expr(node.this)] + [self.expr(e) for e in node.expressions]
        t = self._unified(args, node, "COALESCE")
        return Call("coalesce", tuple(_promoted(a, t) for a in args), t)

    def _nullif(self, node: exp.Nullif) -> Expr:
        a, b = self.expr(node.this), self.expr(node.expression)
        if not comparable(a.type, b.type):
            raise mismatch(self.ctx, f"cannot compare {a.type.value} with {b.type.value} "
                                     f"in {node.sql()}", node)
        return Call("nullif", (a, b), a.type)

    def _abs(self, node: exp.Abs) -> Expr:
        a = self.expr(node.this)
        if family(a.type) not in ("number", "null"):
            raise mismatch(self.ctx, f"ABS of {a.type.value} in {node.sql()}", node)
        return Call("abs", (a,), SqlType.INT if a.type == SqlType.BOOL else a.type)

    # -- text
    def _concat(self, node: exp.DPipe) -> Expr:
        args = []
        for n in (node.this, node.expression):
            e = self.expr(n)
            if e.type not in (SqlType.TEXT, SqlType.NULL):
                e = Call("cast", (e,), SqlType.TEXT)
            args.append(e)
        return Call("concat", tuple(args), SqlType.TEXT)

    def _text_func(self, node: exp.Func) -> Expr:
        op, t = _TEXT_FUNCS[type(node)]
        if node.expressions:
            raise self.ctx.unsupported(f"{node.sql_name()} with several arguments", node)
        a = self.expr(node.this)
        if a.type not in (SqlType.TEXT, SqlType.NULL):
            raise mismatch(self.ctx, f"{op.upper()} needs text, got {a.type.value} in "
                                     f"{node.sql()}", node)
        return Call(op, (a,), t)

    def _cast(self, node: exp.Cast) -> Expr:
        target = declared_type(node.to)
        if target is None:
            raise self.ctx.unsupported(f"CAST to {node.to.sql()}", node)
        a = self.expr(node.this)
        if isinstance(a, Lit):
            if a.value is None:
                return Lit(None, target)
            if target in TEMPORAL and a.type == SqlType.TEXT:
                v = parse_temporal(a.value, target, as_utc=True)
                if v is None:
                    raise mismatch(self.ctx, f"{a.value!r} is not a {target.value}", node)
                return Lit(v, target)
        if a.type == target and not (target is SqlType.FLOAT and not isinstance(a, Lit)
                                     and node.to.this in _FLOAT_TYPES):
            return a
        # (a FLOAT cast to double precision or real is kept: the PostgreSQL front end's
        # AVG of integers is a FLOAT that is ``numeric``, made a plain float so)
        return Call("cast", (a,), target)

    # -- aggregates
    def _aggregate(self, node: exp.AggFunc, func: str | None = None) -> Expr:
        func = func or AGG_FUNCS.get(type(node))
        if func is None:
            raise self._unsupported_node(node)
        if self.aggs is None:
            raise self.ctx.error(SqlError, f"aggregate {node.sql()} is not allowed in "
                                           f"{self.clause}", node)
        if node.expressions:
            raise self.ctx.unsupported(f"{node.sql_name()} with several arguments", node)
        arg_node = node.this
        distinct = False
        if isinstance(arg_node, exp.Distinct):
            if len(arg_node.expressions) != 1:
                raise self.ctx.unsupported(f"{node.sql()} (DISTINCT over several columns)",
                                           node)
            distinct = True
            arg_node = arg_node.expressions[0]
        if func == "count" and (arg_node is None or isinstance(arg_node, exp.Star)):
            if distinct:
                raise self.ctx.unsupported("COUNT(DISTINCT *)", node)
            spec = AggSpec("count_star", None, False, SqlType.INT, node.sql())
            # an AggRef stands in for an Expr until aggregates.post replaces it with a Col
            return AggRef(self.aggs.add(spec), SqlType.INT)  # type: ignore[return-value]
        if arg_node is None:
            raise self.ctx.error(SqlError, f"{node.sql_name()} needs an argument", node)
        inner = Translator(self.ctx, self.scope, aggs=None,
                           clause="an aggregate's argument", aliases=self.aliases)
        arg = inner.expr(arg_node)
        if func == "count":
            t = SqlType.INT
        elif func in ("sum", "avg", "pgavg"):
            if family(arg.type) not in ("number", "null"):
                raise mismatch(self.ctx, f"{node.sql_name()} of {arg.type.value} in "
                                         f"{node.sql()}", node)
            if func != "sum":
                t = SqlType.FLOAT
            else:
                t = SqlType.INT if arg.type == SqlType.BOOL else arg.type
        else:
            t = arg.type
            distinct = False           # MIN/MAX(DISTINCT x) = MIN/MAX(x)
        spec = AggSpec(func, arg, distinct, t, node.sql())
        return AggRef(self.aggs.add(spec), t)  # type: ignore[return-value]  # as above


# ---------------------------------------------------------------- Expr utilities

def strip_names(e: Any) -> Any:
    """``e`` with column names blanked, so equal computations compare equal."""
    if isinstance(e, Col):
        return replace(e, name="")
    if isinstance(e, Call):
        return Call(e.op, tuple(strip_names(a) for a in e.args), e.type)
    return e


def same(a: Any, b: Any) -> bool:
    return strip_names(a) == strip_names(b)


def expr_name(e: Expr, fallback: str) -> str:
    """The column's name if ``e`` is a named column, else ``fallback``."""
    return e.name if isinstance(e, Col) and e.name else fallback


def remap(e: Expr, mapping: Callable[[int], int]) -> Expr:
    """``e`` with every column position passed through ``mapping``."""
    if isinstance(e, Col):
        return replace(e, index=mapping(e.index))
    if isinstance(e, Call):
        return Call(e.op, tuple(remap(a, mapping) for a in e.args), e.type)
    return e


def nullable(e: Any, columns: tuple[ColumnInfo, ...]) -> bool:
    """Whether ``e`` can be NULL over rows of ``columns`` (conservative: True when unsure)."""
    if isinstance(e, Col):
        return columns[e.index].nullable
    if isinstance(e, Lit):
        return e.value is None
    if isinstance(e, Call):
        if e.op in ("is_null", "is_not_null"):
            return False
        if e.op in ("div", "mod", "pgdiv", "pgmod", "case", "nullif", "cast", "in"):
            return True
        if e.op == "coalesce":
            return all(nullable(a, columns) for a in e.args)
        return any(nullable(a, columns) for a in e.args)
    return True


def conjunction(parts: list[Expr]) -> Expr | None:
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return Call("and", tuple(parts), SqlType.BOOL)


def _read_int(text: str) -> int:
    v = int(text)
    if not INT_MIN <= v <= INT_MAX:
        raise ValueError(text)
    return v


#: how a text literal compared with a number or a truth value is read
_LITERAL_READERS: dict[SqlType, Callable[[str], Any]] = {
    SqlType.INT: _read_int, SqlType.FLOAT: float, SqlType.BOOL: read_bool}


def _promoted(e: Expr, other: SqlType) -> Expr:
    """A DATE met by a TIMESTAMP (compared, or in one CASE or COALESCE) as its midnight,
    as PostgreSQL promotes it: a ``date`` and a ``datetime`` do not compare in Python."""
    if e.type == SqlType.DATE and other == SqlType.TIMESTAMP:
        return Call("cast", (e,), SqlType.TIMESTAMP)
    return e


def _written_name(sql: str, node: exp.Func) -> str:
    """A function's name as the user wrote it (sqlglot names STRING_AGG GROUP_CONCAT,
    SUBSTR SUBSTRING): the word where the call starts, else sqlglot's name."""
    start = min((n.meta["start"] for n in node.walk() if n.meta and "start" in n.meta),
                default=None)
    if start is not None:
        m = (re.match(r"(\w+)\s*\(", sql[start:])              # at the name
             or re.search(r"(\w+)\s*\(\s*$", sql[:start]))    # at the first argument
        if m:
            return m.group(1).upper()
    return node.sql_name()
