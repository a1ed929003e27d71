"""Turning SQL text into sqlglot trees, and mapping tree nodes back to text positions.

Every later stage reports errors at a (line, column) of the user's text, so this
module owns the one dialect we parse with: sqlglot's default dialect, except that
``?`` placeholders remember where they stand (the stock parser drops that), which
lets parameters be numbered in textual order and errors point at them.
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

from .errors import ParseError


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
        return ParseError(f"syntax error{near}: {desc}", sql, pos)
    if isinstance(err, _GlotTokenError):
        return ParseError(f"cannot tokenize SQL: {err}", sql, None)
    return ParseError(f"syntax error: {err}", sql, None)


def parse_statements(sql: str) -> list[exp.Expr]:
    """All statements in ``sql`` (empty ones skipped); positions refer to ``sql`` itself."""
    try:
        trees = sqlglot.parse(sql, read=Noria)
    except (_GlotParseError, _GlotTokenError) as err:
        raise _parse_error(sql, err) from None
    return [t for t in trees if t is not None]


def split_statements(sql: str) -> list[str]:
    """The statements of a script, as text, split at the semicolons the tokenizer sees
    (so a ``;`` inside a string or comment does not split)."""
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
