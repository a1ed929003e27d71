"""Logical plans (``sql_frontend.plan``) as Spark DataFrames.

Every relation becomes a DataFrame whose columns are named ``c0``, ``c1``, ... by
position, as the plan refers to them. Expressions are written as Spark SQL text
(``selectExpr``/``expr``), which can say everything the engine's expressions mean:
SQLite's truncating integer division (``div``), NULL for division by zero, Kleene
AND/OR, ``IN`` with NULLs; the PostgreSQL front end's ``/`` and ``%`` (``pgdiv``,
``pgmod``), whose zero divisor fails the job (``_pg_division``). A construct whose Spark meaning would differ from the
engine's (a CAST from text, say) is refused with :class:`Untranslatable` rather than
translated approximately.

Where a relation comes from is the caller's choice: ``leaf(rel)`` may hand over a
``pyarrow.Table`` of its rows (base tables, and intact materialized state), and only
relations it declines are translated.
"""
from __future__ import annotations

import datetime
import math
from functools import reduce
from typing import Callable

import pyarrow as pa

from sql_frontend import plan as lp
from sql_frontend.expr import Call, Col, Expr, Lit
from sql_frontend.types import SqlType

from ..errors import RecoveryError

INTEGRAL = (SqlType.INT, SqlType.BOOL)


class Untranslatable(RecoveryError):
    """A plan construct with no Spark equivalent of the same meaning."""


def _names(width: int) -> list[str]:
    return [f"c{i}" for i in range(width)]


# ---------------------------------------------------------------- expressions

def lit(value, typ: SqlType | None = None) -> str:
    if value is None:
        spark_types: dict[SqlType | None, str] = {
            SqlType.INT: "BIGINT", SqlType.FLOAT: "DOUBLE", SqlType.TEXT: "STRING",
            SqlType.BOOL: "BOOLEAN", SqlType.DATE: "DATE", SqlType.TIMESTAMP: "TIMESTAMP_NTZ",
            SqlType.TIMESTAMPTZ: "TIMESTAMP"}
        spark_t = spark_types.get(typ)
        return f"CAST(NULL AS {spark_t})" if spark_t else "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 63):
            raise Untranslatable(f"integer literal {value} does not fit Spark's BIGINT")
        return f"CAST({value} AS BIGINT)"
    if isinstance(value, float):
        if math.isnan(value):
            text = "NaN"
        elif math.isinf(value):
            text = "Infinity" if value > 0 else "-Infinity"
        else:
            text = repr(value)
        return f"CAST('{text}' AS DOUBLE)"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:    # an instant: Spark's TIMESTAMP, given in UTC
            utc = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
            return f"TIMESTAMP'{utc.isoformat(sep=' ')}+00:00'"
        return f"TIMESTAMP_NTZ'{value.isoformat(sep=' ')}'"
    if isinstance(value, datetime.date):
        return f"DATE'{value.isoformat()}'"
    raise Untranslatable(f"literal {value!r} of type {type(value).__name__}")


def _type(e: Expr) -> SqlType | None:
    return getattr(e, "type", None)


def expr(e: Expr) -> str:
    """Spark SQL text for ``e``, over input columns named c0, c1, ..."""
    if isinstance(e, Col):
        return f"`c{e.index}`"
    if isinstance(e, Lit):
        return lit(e.value, e.type)
    if not isinstance(e, Call):
        raise Untranslatable(f"expression {e!r}")
    op, args = e.op, e.args
    a = [expr(x) for x in args]
    if op in ("add", "sub", "mul"):
        sym = {"add": "+", "sub": "-", "mul": "*"}[op]
        return f"({a[0]} {sym} {a[1]})"
    if op == "div":
        if _type(args[0]) in INTEGRAL and _type(args[1]) in INTEGRAL:
            return (f"(CASE WHEN {a[1]} = 0 THEN NULL ELSE "
                    f"(CAST({a[0]} AS BIGINT) div CAST({a[1]} AS BIGINT)) END)")
        return f"(CASE WHEN {a[1]} = 0 THEN NULL ELSE (CAST({a[0]} AS DOUBLE) / {a[1]}) END)"
    if op == "mod":
        return f"(CASE WHEN {a[1]} = 0 THEN NULL ELSE ({a[0]} % {a[1]}) END)"
    if op in ("pgdiv", "pgmod"):
        return _pg_division(op, args, a)
    if op == "neg":
        return f"(- {a[0]})"
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        sym = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op]
        return f"({a[0]} {sym} {a[1]})"
    if op in ("and", "or"):
        return "(" + f" {op.upper()} ".join(a) + ")"
    if op == "not":
        return f"(NOT {a[0]})"
    if op == "is_null":
        return f"({a[0]} IS NULL)"
    if op == "is_not_null":
        return f"({a[0]} IS NOT NULL)"
    if op == "case":
        whens = " ".join(f"WHEN {a[i]} THEN {a[i + 1]}" for i in range(0, len(a) - 1, 2))
        return f"(CASE {whens} ELSE {a[-1]} END)"
    if op in ("coalesce", "nullif", "abs", "lower", "upper"):
        return f"{op}({', '.join(a)})"
    if op == "length":
        return f"char_length({a[0]})"
    if op == "in":
        return f"({a[0]} IN ({', '.join(a[1:])}))"
    if op == "like":
        # the engine's LIKE has no escape character; Spark's default is the backslash
        return f"({a[0]} LIKE {a[1]} ESCAPE '\\u0001')"
    if op == "concat":
        return f"concat({_as_text(args[0], a[0])}, {_as_text(args[1], a[1])})"
    if op == "cast":
        return _cast(args[0], a[0], e.type)
    raise Untranslatable(f"operator {op!r} has no Spark translation")


def _pg_division(op: str, args: tuple[Expr, ...], a: list[str]) -> str:
    """The PostgreSQL front end's ``/`` and ``%`` (``pgdiv``, ``pgmod``): as the engine's
    for a divisor not zero (integers truncate toward zero, a remainder has the dividend's
    sign); a zero divisor, where the engine gives the division-by-zero marker
    (noria_py/divzero.py), which no Spark column can hold, fails the job with
    ``raise_error`` (PostgreSQL's 22012), so the recovery fails with the graph as it was,
    rather than install NULL. Only where the engine would evaluate the division: CASE,
    AND, OR and COALESCE are lazy in Spark as in the engine."""
    ints = _type(args[0]) in INTEGRAL and _type(args[1]) in INTEGRAL
    if op == "pgdiv":
        value = (f"(CAST({a[0]} AS BIGINT) div CAST({a[1]} AS BIGINT))" if ints
                 else f"(CAST({a[0]} AS DOUBLE) / {a[1]})")
    elif ints:
        value = f"({a[0]} % {a[1]})"
    else:       # (the engine truncates both to integers, SQLite's rule: not Spark's fmod)
        raise Untranslatable("% of a FLOAT (the engine truncates its operands; Spark does not)")
    return (f"(CASE WHEN {a[1]} = 0 THEN raise_error('division by zero') "
            f"ELSE {value} END)")


def _as_text(e: Expr, sql: str) -> str:
    t = _type(e)
    if t in (SqlType.TEXT, SqlType.NULL, None):
        return sql
    if t is SqlType.INT:
        return f"CAST({sql} AS STRING)"
    if t is SqlType.BOOL:
        return f"(CASE WHEN {sql} IS NULL THEN NULL WHEN {sql} THEN '1' ELSE '0' END)"
    raise Untranslatable(f"text of a {t.value} value (Spark formats it differently)")


def _cast(arg: Expr, sql: str, to: SqlType) -> str:
    src = _type(arg)
    if src in (to, SqlType.NULL):
        return lit(None, to) if src is SqlType.NULL else sql
    if to is SqlType.INT and src in INTEGRAL:
        return f"CAST({sql} AS BIGINT)"
    if to is SqlType.INT and src is SqlType.FLOAT:
        return (f"(CASE WHEN isnan({sql}) OR abs({sql}) = CAST('Infinity' AS DOUBLE) THEN NULL "
                f"ELSE CAST({sql} AS BIGINT) END)")
    if to is SqlType.FLOAT and src in (SqlType.INT, SqlType.BOOL, SqlType.FLOAT):
        return f"CAST({sql} AS DOUBLE)"
    if to is SqlType.TEXT and src in (SqlType.INT, SqlType.BOOL):
        return _as_text(arg, sql)
    if to is SqlType.BOOL and src in (SqlType.INT, SqlType.FLOAT):
        return f"({sql} <> 0)"
    if to is SqlType.DATE and src is SqlType.TIMESTAMP:
        return f"CAST({sql} AS DATE)"
    if to is SqlType.TIMESTAMP and src is SqlType.DATE:
        return f"CAST({sql} AS TIMESTAMP_NTZ)"
    raise Untranslatable(f"CAST from {src} to {to.value} (Spark's rules differ from the engine's)")


# ---------------------------------------------------------------- relations

class Translator:
    """Builds DataFrames for relations; ``leaf(rel)`` may supply a relation's rows."""

    def __init__(self, spark, leaf: Callable[[object], pa.Table | None]) -> None:
        self.spark = spark
        self.leaf = leaf
        self.memo: dict[object, object] = {}

    def df(self, rel):
        d = self.memo.get(rel)
        if d is None:
            rows = self.leaf(rel)
            if rows is not None:
                d = self.spark.createDataFrame(rows.rename_columns(_names(rows.num_columns)))
            elif isinstance(rel, lp.Scan):
                raise Untranslatable(f"no rows for table {rel.table!r}")
            else:
                method = getattr(self, "_" + type(rel).__name__.lower(), None)
                if method is None:
                    raise Untranslatable(f"plan relation {type(rel).__name__} has no Spark translation")
                d = method(rel)
            self.memo[rel] = d
        return d

    def _filter(self, rel: lp.Filter):
        from pyspark.sql import functions as F
        return self.df(rel.input).where(F.expr(expr(rel.predicate)))

    def _project(self, rel: lp.Project):
        return self.df(rel.input).selectExpr(*[f"{expr(e)} AS c{i}" for i, e in enumerate(rel.exprs)])

    def _join(self, rel: lp.Join):
        from pyspark.sql import functions as F
        left = self.df(rel.left)
        lw = len(rel.left.columns)
        right = self.df(rel.right).selectExpr(
            *[f"c{j} AS c{lw + j}" for j in range(len(rel.right.columns))])
        if rel.kind not in ("inner", "left"):
            raise Untranslatable(f"{rel.kind} join")
        if not rel.left_keys:
            if rel.kind == "inner":
                return left.crossJoin(right)
            return left.join(right, F.lit(True), "left")
        cond = " AND ".join(f"c{l} = c{lw + r}" for l, r in zip(rel.left_keys, rel.right_keys))
        return left.join(right, F.expr(cond), rel.kind)

    def _aggregate(self, rel: lp.Aggregate):
        from pyspark.sql import functions as F
        d = self.df(rel.input)
        groups = [F.col(f"c{g}").alias(f"c{i}") for i, g in enumerate(rel.group_by)]
        n = len(groups)
        aggs = [F.expr(self._agg(a, a.arg is not None and
                                 rel.input.columns[a.arg].type == SqlType.INT)).alias(f"c{n + i}")
                for i, a in enumerate(rel.aggs)]
        if not aggs:
            if not groups:
                raise Untranslatable("a global aggregate with no aggregate functions")
            return d.select(*groups).distinct()
        return d.groupBy(*groups).agg(*aggs) if groups else d.agg(*aggs)

    @staticmethod
    def _agg(a: lp.AggCall, of_int: bool = False) -> str:
        """``of_int``: the argument is an INT column, whose SUM is exact in the engine (as
        PostgreSQL's SUM(bigint)), where Spark's BIGINT sum wraps past 64 bits: summed as
        DECIMAL(38, 0) (back as Python ints: ``arrow_to_rows``)."""
        x = f"`c{a.arg}`" if a.arg is not None else None
        dist = "DISTINCT " if a.distinct else ""
        if a.func == "count_star":
            return "count(1)"
        total = f"sum({dist}CAST({x} AS DECIMAL(38, 0)))" if of_int else f"sum({dist}{x})"
        if a.func == "sum":
            return total
        if a.func in ("count", "min", "max"):
            return f"{a.func}({dist}{x})"
        if a.func in ("avg", "pgavg"):
            # the engine divides the exact sum by the count
            return (f"(CASE WHEN count({dist}{x}) = 0 THEN NULL ELSE "
                    f"CAST({total} AS DOUBLE) / count({dist}{x}) END)")
        raise Untranslatable(f"aggregate {a.func}")

    def _distinct(self, rel: lp.Distinct):
        return self.df(rel.input).distinct()

    def _union_(self, rel: lp.Union_):
        return reduce(lambda x, y: x.union(y), [self.df(i) for i in rel.inputs])

    def _topk(self, rel: lp.TopK):
        from pyspark.sql import Window
        from pyspark.sql import functions as F
        d = self.df(rel.input)
        order = []
        for o in rel.order:
            c = F.col(f"c{o.column}")
            if o.descending:
                order.append(c.desc_nulls_first() if o.nulls_first else c.desc_nulls_last())
            else:
                order.append(c.asc_nulls_first() if o.nulls_first else c.asc_nulls_last())
        # ties broken by the whole row, NULLs first, as the engine's TopK does
        order += [F.col(c).asc_nulls_first() for c in _names(len(rel.columns))]
        w = Window.partitionBy(*[F.col(f"c{p}") for p in rel.partition]).orderBy(*order)
        rn = F.row_number().over(w)
        d = d.withColumn("__rn", rn).where(F.col("__rn") > rel.offset)
        if rel.limit is not None:
            d = d.where(F.col("__rn") <= rel.offset + rel.limit)
        return d.drop("__rn")

    def _setop(self, rel):
        # Spark's EXCEPT/INTERSECT (DISTINCT) treat NULLs as equal, as SQL set operations do
        left, right = self.df(rel.left), self.df(rel.right)
        if rel.kind == "except":
            return left.subtract(right)
        if rel.kind == "intersect":
            return left.intersect(right)
        raise Untranslatable(f"set operation {rel.kind!r}")

    def _values(self, rel):
        from .arrow import rows_to_arrow
        width = len(rel.columns)
        if width == 0:
            return self.spark.range(len(rel.rows)).select()
        table = rows_to_arrow(list(rel.rows), _names(width), [c.type for c in rel.columns])
        return self.spark.createDataFrame(table)
