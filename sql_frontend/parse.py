"""Turning SQL text into sqlglot trees, and mapping tree nodes back to text positions.

Every later stage reports errors at a (line, column) of the user's text, so this
module owns the one dialect we parse with: sqlglot's default dialect, except that
``?`` placeholders remember where they stand (the stock parser drops that), which
lets parameters be numbered in textual order and errors point at them.

It is also the boundary that keeps text no later stage can take from reaching them:
text that is not a ``str``, or holds a lone surrogate (no UTF-8 form: PostgreSQL refuses
such bytes, and a data directory could not store them), is a ``ParseError``; a statement
nested deeper than ``MAX_DEPTH`` is an ``UnsupportedError``, so every later stage may
recurse over a statement's tree (sqlglot's parser recurses too, about twenty Python
frames per parenthesis: it runs out of stack near fifty, and that is the same error).
A chain of ANDs or of ORs counts as one level: the front end flattens those.
"""

from __future__ import annotations

import logging
import re

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError as _GlotParseError
from sqlglot.errors import TokenError as _GlotTokenError
from sqlglot.parsers.base import BaseParser
from sqlglot.tokens import TokenType

from .errors import ParseError, UnsupportedError
from .types import is_text


class _QuietCommandFallback(logging.Filter):
    """sqlglot logs a warning whenever it falls back to an opaque Command; the front end
    rejects those with UnsupportedError anyway, so the warning is only noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


logging.getLogger("sqlglot").addFilter(_QuietCommandFallback())


class _Parser(BaseParser):
    PLACEHOLDER_PARSERS = {
        **BaseParser.PLACEHOLDER_PARSERS,
        TokenType.PLACEHOLDER: lambda self: self.expression(exp.Placeholder(), token=self._prev),
    }


class Noria(Dialect):
    """sqlglot's default dialect, with positioned ``?`` placeholders."""
    Parser = _Parser


class NoriaPostgres(Noria):
    """The same, with PostgreSQL's NULL order: NULLs sort as larger than any value, so
    first in a descending ORDER BY and last in an ascending one (``postgres_order``)."""
    NULL_ORDERING = "nulls_are_large"


def postgres_order(sql: str) -> str:
    """``sql`` with PostgreSQL's default NULL order written out in each ORDER BY, for a
    client that speaks PostgreSQL; ``sql`` itself if it has no ORDER BY, or if the
    rewrite fails (the plan of ``sql`` then reports what is wrong)."""
    if "order" not in sql.lower():
        return sql
    try:
        trees = sqlglot.parse(sql, read=NoriaPostgres)
    except (_GlotParseError, _GlotTokenError, RecursionError):
        return sql
    if len(trees) != 1 or trees[0] is None or trees[0].find(exp.Ordered) is None:
        return sql
    return trees[0].sql(dialect=Noria)


#: PostgreSQL's ``avg``, as ``postgres_division`` writes ``AVG``: of integers, an exact
#: value the front end sends as ``numeric`` (noria_py/ops/accumulators.py, ``ExactAvg``)
PG_AVG = "PG_AVG"


def postgres_division(sql: str) -> str:
    """``sql`` with each ``a / b`` written ``PG_DIV(a, b)`` and each ``a % b``
    ``PG_MOD(a, b)``: PostgreSQL's division, whose zero divisor is an error (SQLSTATE
    22012), not the NULL of the engine's ``/`` (noria_py/divzero.py); and each
    ``AVG(x)`` ``PG_AVG(x)``, whose value over integers is exact (PostgreSQL's
    ``numeric``), which only the PostgreSQL front end's views pay for. The PostgreSQL
    front end plans its SQL through this, so a view it creates keeps that meaning in the
    text it is stored (and replayed) by. ``sql`` itself if it divides nowhere, or if the
    rewrite fails (the plan of ``sql`` then reports what is wrong)."""
    if "/" not in sql and "%" not in sql and "avg" not in sql.lower():
        return sql
    try:
        trees = sqlglot.parse(sql, read=Noria)
    except (_GlotParseError, _GlotTokenError, RecursionError):
        return sql
    if len(trees) != 1 or trees[0] is None:
        return sql
    tree = trees[0]
    if tree.find(exp.Div, exp.Mod, exp.Avg) is None:
        return sql

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, (exp.Div, exp.Mod)):
            name = "PG_DIV" if isinstance(node, exp.Div) else "PG_MOD"
            return exp.Anonymous(this=name, expressions=[node.this, node.expression])
        if isinstance(node, exp.Avg) and not node.expressions:
            return exp.Anonymous(this=PG_AVG, expressions=[node.this])
        return node
    def pending(t: exp.Expr) -> bool:
        return next(t.find_all(exp.Div, exp.Mod), None) is not None or any(
            not a.expressions for a in t.find_all(exp.Avg))
    try:
        # (a pass rewrites the outermost ones only: sqlglot does not go into a node it
        # has just replaced, so ``a / (b / c)`` and ``AVG(x) / 3`` take two)
        for _ in range(MAX_DEPTH):
            if not pending(tree):
                break
            tree = tree.transform(rewrite)
        return tree.sql(dialect=Noria)
    except (_GlotParseError, RecursionError):
        return sql


def offset_to_position(sql: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a 0-based character offset."""
    offset = max(0, min(offset, len(sql)))
    line = sql.count("\n", 0, offset) + 1
    col = offset - (sql.rfind("\n", 0, offset) + 1) + 1
    return line, col


def position(sql: str, node: exp.Expr | None) -> tuple[int, int] | None:
    """Where ``node`` starts in ``sql``: the leftmost token of its subtree that carries a position."""
    if node is None:
        return None
    starts = [n.meta["start"] for n in node.walk() if n.meta and "start" in n.meta]
    if not starts:
        parent = node.parent
        while parent is not None:      # e.g. a bare Star: fall back to its enclosing node
            p = position(sql, parent)
            if p is not None:
                return p
            parent = parent.parent
        return None
    start = min(starts)
    if not node.meta:
        start = _widen_left(sql, start, node)
    return offset_to_position(sql, start)


def _widen_left(sql: str, start: int, node: exp.Expr) -> int:
    """Nodes built from keywords carry no position of their own; move from their first
    positioned child back over the keyword that opened them."""
    prefix = sql[:start]
    pattern = None
    if isinstance(node, exp.Exists):
        pattern = r"(?i)(NOT\s+)?EXISTS\s*\(\s*(SELECT\s*)?$"
    elif isinstance(node, exp.Subquery):
        pattern = r"\(\s*(SELECT\s*)?$"
    elif isinstance(node, exp.Select):
        pattern = r"(?i)SELECT\s*$"
    if pattern is not None:
        m = re.search(pattern, prefix)
        if m:
            return m.start()
    return start


#: how deep a statement's tree may nest (expressions, subqueries): every stage after the
#: parser may recurse over the tree, a few Python frames a level, within Python's
#: default limit of 1,000 frames (SQLite refuses expressions deeper than 1,000, and
#: more than about 100 nested parentheses)
MAX_DEPTH = 100


def check_text(sql: object) -> str:
    """``sql`` if it is text every stage can take, else a ParseError saying why."""
    if not isinstance(sql, str):
        raise ParseError(f"SQL must be a str, got {type(sql).__name__}: {sql!r:.60}")
    if not is_text(sql):
        try:
            sql.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ParseError(f"the SQL text holds {sql[err.start]!r}, a lone surrogate, which is "
                             "not Unicode text (it has no UTF-8 form)", sql,
                             offset_to_position(sql, err.start)) from None
    return sql


def _check_depth(sql: str, tree: exp.Expr) -> None:
    """Refuse a tree deeper than MAX_DEPTH (found without recursion), pointing at the
    first text that is too deep."""
    too_deep: list[exp.Expr] = []
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            too_deep.append(node)
            continue
        for child in node.iter_expressions():
            same_chain = isinstance(node, exp.Connector) and type(child) is type(node)
            stack.append((child, depth if same_chain else depth + 1))
    if too_deep:
        where = [p for p in (position(sql, n) for n in too_deep) if p is not None]
        raise UnsupportedError(f"unsupported: the statement nests more than {MAX_DEPTH} "
                               "levels deep (expressions, parentheses or subqueries)",
                               sql, min(where, default=None))


def _parse_error(sql: str, err: Exception) -> ParseError:
    if isinstance(err, _GlotParseError) and err.errors:
        first = err.errors[0]
        desc = first.get("description") or "syntax error"
        line, col = first.get("line"), first.get("col")
        highlight = first.get("highlight") or ""
        pos = None
        if line is not None and col is not None:
            # sqlglot reports the column where the offending token ends
            pos = (int(line), max(1, int(col) - len(highlight) + 1))
        near = f" near '{highlight}'" if highlight else ""
        missing = re.match(r"Required keyword: '(\w+)' missing for <class '[\w.]*\.(\w+)'>", desc)
        if missing:     # (sqlglot's internals: say what the user wrote is short of)
            desc = f"incomplete {missing.group(2).upper()} expression (its {missing.group(1)} " \
                   "is missing)"
        return ParseError(f"syntax error{near}: {desc}", sql, pos)
    if isinstance(err, _GlotTokenError):
        return ParseError(f"cannot tokenize SQL: {err}", sql, None)
    return ParseError(f"syntax error: {err}", sql, None)


def parse_statements(sql: str) -> list[exp.Expr]:
    """All statements in ``sql`` (empty ones skipped); positions refer to ``sql`` itself."""
    check_text(sql)
    try:
        trees = sqlglot.parse(sql, read=Noria)
    except (_GlotParseError, _GlotTokenError) as err:
        raise _parse_error(sql, err) from None
    except RecursionError:
        raise UnsupportedError("unsupported: the statement nests too deeply for the parser "
                               "(parentheses or function calls about 50 levels deep)",
                               sql, None) from None
    out = [t for t in trees if t is not None]
    for tree in out:
        _check_depth(sql, tree)
    return out


def split_statements(sql: str) -> list[str]:
    """The statements of a script, as text, split at the semicolons the tokenizer sees
    (so a ``;`` inside a string or comment does not split)."""
    check_text(sql)
    try:
        tokens = Noria().tokenize(sql)
    except _GlotTokenError as err:
        raise _parse_error(sql, err) from None
    out: list[str] = []
    begin = 0
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            out.append(sql[begin:tok.start])
            begin = tok.end + 1
    out.append(sql[begin:])
    return [s.strip() for s in out if _has_tokens(s)]


def _has_tokens(text: str) -> bool:
    try:
        return bool(Noria().tokenize(text))
    except _GlotTokenError:
        return True
