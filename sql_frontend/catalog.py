"""What the front end needs to know about existing tables and views."""
from __future__ import annotations

from typing import Protocol

from .plan import Query
from .types import TableSchema


class Catalog(Protocol):
    def table(self, name: str) -> TableSchema | None:
        """The schema of base table ``name`` (case-insensitive), or None."""

    def view(self, name: str) -> Query | None:
        """The plan of view ``name`` (case-insensitive), or None."""


class DictCatalog:
    """A catalog over plain dicts: handy for tests of the front end alone."""

    def __init__(self, tables: dict[str, TableSchema] | None = None,
                 views: dict[str, Query] | None = None) -> None:
        self.tables = {k.lower(): v for k, v in (tables or {}).items()}
        self.views = {k.lower(): v for k, v in (views or {}).items()}

    def table(self, name: str) -> TableSchema | None:
        return self.tables.get(name.lower())

    def view(self, name: str) -> Query | None:
        return self.views.get(name.lower())
