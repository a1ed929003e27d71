"""What PostgreSQL clients ask besides the data: settings (``SET``, ``SHOW``,
``current_setting``), ``version()``, and the ``pg_catalog`` / ``information_schema``
queries of psql's ``\\d`` commands, drivers and SQLAlchemy's reflection.

Settings: a session's own dict, starting from ``DEFAULTS`` (what the server reports in
ParameterStatus at startup). ``SET`` of a setting the engine depends on to a value it
cannot honour (``TimeZone`` other than UTC, ``DateStyle`` other than ISO,
``standard_conforming_strings`` off, ``client_encoding`` other than UTF8) is refused
with an error; other settings are kept and shown back, as they change nothing here.

Catalog queries run on DuckDB, the engine's test oracle, which has a ``pg_catalog`` of
its own: a shadow database holds an empty table of the same columns and types for each
table and view of the engine (in schema ``public``), rebuilt when the engine's catalog
changes, so the answers describe the engine's tables. A query goes there when it names
``pg_catalog``, ``information_schema``, a ``pg_`` relation or function, or one of the
session functions (``version()``, ``current_schema()``, ...); the text is adjusted
for DuckDB (``pg_catalog.`` qualifiers dropped, ``OPERATOR(pg_catalog.~)`` written
``~``, ``version()`` answered as PostgreSQL 15 would).
"""
from __future__ import annotations

import re
from typing import Any

import duckdb

from sql_frontend.types import SqlType, TableSchema

from ..errors import NotSupportedError, ProgrammingError
from ..result import Result

SERVER_VERSION = "15.0"
SHIM = "noria_catalog"                  # the shadow's schema of catalog additions
VERSION = f"PostgreSQL {SERVER_VERSION} (noria-py) on x86_64-pc-linux-gnu, 64-bit"

DEFAULTS: dict[str, str] = {
    "server_version": SERVER_VERSION, "server_version_num": "150000",
    "server_encoding": "UTF8", "client_encoding": "UTF8", "DateStyle": "ISO, MDY",
    "TimeZone": "UTC", "integer_datetimes": "on", "standard_conforming_strings": "on",
    "IntervalStyle": "postgres", "is_superuser": "off", "application_name": "",
    "default_transaction_read_only": "off", "in_hot_standby": "off",
    "transaction_isolation": "read committed", "default_transaction_isolation": "read committed",
    "transaction_read_only": "off", "search_path": '"$user", public', "extra_float_digits": "1",
    "session_authorization": "noria", "max_identifier_length": "63", "lc_collate": "C",
    "default_table_access_method": "heap",
}
#: settings reported to the client at startup (ParameterStatus), as PostgreSQL does
REPORTED = ("server_version", "server_encoding", "client_encoding", "DateStyle", "TimeZone",
            "integer_datetimes", "standard_conforming_strings", "IntervalStyle",
            "is_superuser", "application_name", "default_transaction_read_only",
            "in_hot_standby", "session_authorization")
#: settings whose other values the engine cannot honour: value test, what it says
_FIXED = {
    "timezone": (lambda v: v.upper() in ("UTC", "ETC/UTC", "GMT", "Z", "+00", "0", "UCT"),
                 "the engine's timestamps have no time zone; TimeZone is UTC"),
    "datestyle": (lambda v: v.replace(" ", "").upper().split(",")[0] in ("ISO", "")
                  and "DMY" not in v.upper(), "dates are written ISO, MDY"),
    "standard_conforming_strings": (lambda v: v.lower() in ("on", "true", "1"),
                                    "strings are standard-conforming"),
    "client_encoding": (lambda v: v.upper().replace("-", "") in ("UTF8", "UNICODE"),
                        "text is UTF-8"),
}

_CATALOG = re.compile(r"\b(pg_catalog|information_schema|pg_[a-z_]+|version\s*\(\s*\)|"
                      r"current_(?:schema|schemas|database|user|setting|catalog)\b|session_user|"
                      r"txid_current|has_\w+_privilege|obj_description|col_description|"
                      r"format_type|to_regclass)", re.I)
_SET = re.compile(r"^\s*SET\s+(?:(?:SESSION|LOCAL)\s+)?(?:TIME\s+ZONE\s+(?P<tz>.+?)|"
                  r"(?P<name>[\w.]+)\s*(?:=|\bTO\b)\s*(?P<value>.+?))\s*;?\s*$", re.I | re.S)
_SHOW = re.compile(r"^\s*SHOW\s+(?P<name>[\w. ]+?)\s*;?\s*$", re.I)
_RESET = re.compile(r"^\s*RESET\s+(?P<name>[\w.]+)\s*;?\s*$", re.I)

_DUCK_TYPES = {SqlType.INT: "BIGINT", SqlType.FLOAT: "DOUBLE", SqlType.TEXT: "TEXT",
               SqlType.BOOL: "BOOLEAN", SqlType.DATE: "DATE", SqlType.TIMESTAMP: "TIMESTAMP",
               SqlType.TIMESTAMPTZ: "TIMESTAMPTZ", SqlType.NULL: "TEXT"}
_FROM_DUCK = {"BIGINT": SqlType.INT, "INTEGER": SqlType.INT, "SMALLINT": SqlType.INT,
              "TINYINT": SqlType.INT, "UINTEGER": SqlType.INT, "UBIGINT": SqlType.INT,
              "HUGEINT": SqlType.INT, "DOUBLE": SqlType.FLOAT, "FLOAT": SqlType.FLOAT,
              "BOOLEAN": SqlType.BOOL, "DATE": SqlType.DATE, "TIMESTAMP": SqlType.TIMESTAMP,
              "TIMESTAMP WITH TIME ZONE": SqlType.TIMESTAMPTZ}


def _unquote(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        v = v[1:-1].replace(v[0] * 2, v[0])
    return v


class Settings:
    """One session's settings."""

    def __init__(self, startup: dict[str, str] | None = None) -> None:
        self.values = dict(DEFAULTS)
        self.user = (startup or {}).get("user", "noria")
        self.database = (startup or {}).get("database", "noria")
        self._lower = {k.lower(): k for k in self.values}
        for k, v in (startup or {}).items():
            if k.lower() in ("application_name", "datestyle", "timezone", "client_encoding",
                             "search_path", "extra_float_digits"):
                self.set(k, v)

    def get(self, name: str) -> str:
        key = self._lower.get(name.lower())
        if key is None:
            raise ProgrammingError(f'unrecognized configuration parameter "{name}"')
        return self.values[key]

    def set(self, name: str, value: str) -> None:
        value = _unquote(value)
        fixed = _FIXED.get(name.lower())
        if fixed is not None and value.upper() != "DEFAULT" and not fixed[0](value):
            raise NotSupportedError(f"cannot set {name} to {value!r}: {fixed[1]}")
        key = self._lower.setdefault(name.lower(), name)
        self.values[key] = DEFAULTS.get(key, "") if value.upper() == "DEFAULT" else value

    def answer(self, sql: str) -> tuple[str, Result] | None:
        """The tag and result of a SET, SHOW or RESET statement; None for another."""
        m = _SET.match(sql)
        if m:
            if m.group("tz") is not None:
                self.set("TimeZone", m.group("tz"))
            else:
                self.set(m.group("name"), m.group("value"))
            return "SET", Result(rowcount=0)
        m = _SHOW.match(sql)
        if m:
            name = " ".join(m.group("name").split())
            if name.lower() == "all":
                rows = sorted(self.values.items())
                return "SHOW", Result(["name", "setting"], rows, [SqlType.TEXT, SqlType.TEXT])
            if name.lower() == "transaction isolation level":
                name = "transaction_isolation"
            return "SHOW", Result([name.split(".")[-1].lower()], [(self.get(name),)],
                                  [SqlType.TEXT])
        m = _RESET.match(sql)
        if m:
            self.set(m.group("name"), "DEFAULT")
            return "RESET", Result(rowcount=0)
        return None


def is_catalog_query(sql: str) -> bool:
    return bool(_CATALOG.search(sql))


class CatalogResult(Result):
    """A catalog query's answer; ``pg_oids`` overrides a column's PostgreSQL type."""

    def __init__(self, columns: list[str], rows: list[tuple], types: list[SqlType],
                 pg_oids: list[int | None]) -> None:
        super().__init__(columns, rows, types)
        self.pg_oids = pg_oids


class Shadow:
    """DuckDB with an empty copy of the engine's catalog, for catalog queries."""

    def __init__(self) -> None:
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._made_for: Any = None

    def query(self, sql: str, schema: list[tuple[str, TableSchema]],
              settings: Settings, params: tuple = ()) -> Result:
        """``sql`` against the shadow of ``schema`` ((kind, name, columns) of each table
        and view)."""
        key = repr(schema)
        if self._conn is None or self._made_for != key:
            try:
                self._conn = self._build(schema)
            except duckdb.Error as err:
                raise NotSupportedError(f"catalog queries are not available: {err}") from None
            self._made_for = key
        text = re.sub(r"OPERATOR\s*\(\s*pg_catalog\s*\.\s*([^)\s]+)\s*\)", r"\1", sql, flags=re.I)
        text = re.sub(r"\bCOLLATE\s+pg_catalog\.\"?default\"?", "", text, flags=re.I)
        text = re.sub(r"\bpg_catalog\s*\.\s*", "", text, flags=re.I)
        text = re.sub(r"\binformation_schema\s*\.\s*(tables|columns|views|schemata)\b",
                      SHIM + r".information_schema_\1", text, flags=re.I)
        text = re.sub(r"\bcurrent_user\b|\bsession_user\b",
                      "'" + settings.user.replace("'", "''") + "'", text, flags=re.I)
        text = re.sub(r"\bcurrent_(database|catalog)\s*\(\s*\)",
                      "'" + settings.database.replace("'", "''") + "'", text, flags=re.I)
        text = re.sub(r"::\s*(?:regtype|regclass|regproc|regnamespace)\b", "", text, flags=re.I)
        text = re.sub(r"\bAS\s+(?:REGTYPE|REGCLASS|REGPROC|REGNAMESPACE)\b", "AS INTEGER", text,
                      flags=re.I)
        text = re.sub(r"\bjson_build_object\s*\(", "json_object(", text, flags=re.I)
        text = re.sub(r"\bversion\s*\(\s*\)", "'" + VERSION + "'", text, flags=re.I)
        text = re.sub(r"\bcurrent_setting\s*\(\s*'([^']*)'\s*\)",
                      lambda m: _quote(settings.get(m.group(1))), text, flags=re.I)
        text, params = _bind_settings(text, params, settings)
        try:
            cur = self._conn.execute(text, list(params)) if params else self._conn.execute(text)
        except duckdb.Error as err:
            raise NotSupportedError(f"catalog query not supported: {err}".splitlines()[0]) from None
        if cur.description is None:
            return Result(rowcount=0)
        rows = cur.fetchall()
        names = [d[0] for d in cur.description]
        types = [_FROM_DUCK.get(str(d[1]).upper(), SqlType.TEXT) for d in cur.description]
        out = []
        for row in rows:
            out.append(tuple(v if v is None or t is not SqlType.TEXT or isinstance(v, str)
                             else _text(v) for v, t in zip(row, types)))
        # a list goes out as a PostgreSQL array ({a,b}) of its element's type
        return CatalogResult(names, out, types,
                             [_ARRAY_OIDS.get(str(d[1]).upper()) for d in cur.description])

    @staticmethod
    def _build(schema: list[tuple[str, TableSchema]]) -> duckdb.DuckDBPyConnection:
        conn = duckdb.connect(":memory:")
        conn.execute("CREATE SCHEMA public")
        conn.execute("USE memory.public")
        # what DuckDB's pg_catalog lacks, in a schema of its own after public in the
        # search path, before the system's: missing columns, empty tables, functions;
        # the relation and schema lists leave that schema out
        conn.execute(f"CREATE SCHEMA {SHIM}")
        conn.execute(f"SET search_path = 'memory.public,memory.{SHIM}'")
        hidden = f"('{SHIM}', 'main')"
        conn.execute(f"CREATE VIEW {SHIM}.pg_namespace AS SELECT * FROM pg_catalog.pg_namespace "
                     f"WHERE nspname NOT IN {hidden}")
        conn.execute(f"CREATE VIEW {SHIM}.pg_class AS SELECT *, false AS relforcerowsecurity "
                     "FROM pg_catalog.pg_class WHERE relnamespace NOT IN (SELECT oid FROM "
                     f"pg_catalog.pg_namespace WHERE nspname IN {hidden})")
        conn.execute(f"CREATE VIEW {SHIM}.pg_database AS SELECT * REPLACE ('noria' AS datname), "
                     "6 AS encoding, "
                     "'C' AS datcollate, 'C' AS datctype, NULL AS daticulocale, "
                     "'c' AS datlocprovider, 10 AS datdba, NULL::VARCHAR[] AS datacl "
                     "FROM pg_catalog.pg_database WHERE datname = 'memory'")
        # primary keys: DuckDB's constraints count columns from 0 and have no index;
        # PostgreSQL's count from 1 and each key has an index (SQLAlchemy joins them)
        conn.execute(f"CREATE VIEW {SHIM}.pg_constraint AS SELECT * REPLACE "
                     "(CASE WHEN contype IN ('p', 'u') THEN oid ELSE conindid END AS conindid, "
                     "list_transform(conkey, lambda k: k + 1) AS conkey) FROM pg_catalog.pg_constraint")
        conn.execute(f"CREATE VIEW {SHIM}.pg_index AS SELECT oid AS indexrelid, "
                     "conrelid AS indrelid, len(conkey) AS indnatts, len(conkey) AS indnkeyatts, "
                     "true AS indisunique, contype = 'p' AS indisprimary, "
                     "false AS indisexclusion, true AS indimmediate, false AS indisclustered, "
                     "true AS indisvalid, false AS indcheckxmin, true AS indisready, "
                     "true AS indislive, false AS indisreplident, "
                     "list_transform(conkey, lambda k: k + 1) AS indkey, NULL AS indcollation, "
                     "NULL AS indclass, NULL AS indoption, NULL AS indexprs, NULL AS indpred, "
                     "false AS indnullsnotdistinct FROM pg_catalog.pg_constraint "
                     "WHERE contype IN ('p', 'u')")
        conn.execute(f"CREATE VIEW {SHIM}.pg_collation AS SELECT *, 11 AS collnamespace "
                     "FROM pg_catalog.pg_collation")
        for view in ("tables", "columns", "views", "schemata"):
            column = "schema_name" if view == "schemata" else "table_schema"
            conn.execute(f"CREATE VIEW {SHIM}.information_schema_{view} AS SELECT * FROM "
                         f"information_schema.{view} WHERE {column} NOT IN {hidden}")
        for ddl in _EMPTY_CATALOG:
            conn.execute(f"CREATE TABLE {SHIM}.{ddl}")
        names = " ".join(f"WHEN {oid} THEN '{name}'" for oid, name in _TYPE_NAMES.items())
        for macro in [
            "pg_get_userbyid(x) AS 'noria'",
            "obj_description(x, y := NULL) AS NULL",
            "col_description(x, y) AS NULL",
            "txid_current() AS 1",
            "pg_encoding_to_char(x) AS 'UTF8'",
            "pg_get_statisticsobjdef_columns(x) AS NULL::VARCHAR",
            "pg_relation_is_publishable(x) AS false",
            "array_upper(a, d) AS len(a)",
            "pg_get_serial_sequence(t, c) AS NULL::VARCHAR",
            "pg_collation_is_visible(c) AS true",
            "pg_get_indexdef(i, k := 0, p := false) AS NULL::VARCHAR",
            "pg_get_constraintdef(c, p := false) AS NULL::VARCHAR",
            f"format_type(t, m) AS CASE t {names} ELSE 'text' END",
            "pg_get_expr(e, r, p := NULL) AS NULL::VARCHAR",
            "to_regtype(x) AS (SELECT oid FROM pg_catalog.pg_type WHERE typname = x LIMIT 1)",
            "to_regclass(x) AS (SELECT oid FROM pg_catalog.pg_class WHERE relname = x LIMIT 1)",
        ]:
            conn.execute(f"CREATE MACRO {SHIM}.{macro}")
        for kind, rel in schema:
            if kind == "table":
                cols = [f'"{c.name}" {_DUCK_TYPES.get(c.type, "TEXT")}'
                        + ("" if c.nullable else " NOT NULL") for c in rel.columns]
                if rel.primary_key:
                    key = ", ".join(f'"{rel.columns[i].name}"' for i in rel.primary_key)
                    cols.append(f"PRIMARY KEY ({key})")
                conn.execute(f'CREATE TABLE "{rel.name}" ({", ".join(cols)})')
            else:
                sel = ", ".join(f'CAST(NULL AS {_DUCK_TYPES.get(c.type, "TEXT")}) AS "{c.name}"'
                                for c in rel.columns) or "NULL AS none"
                conn.execute(f'CREATE VIEW "{rel.name}" AS SELECT {sel} WHERE false')
        return conn


#: ``format_type``'s names of the types the shadow's columns have (DuckDB's OIDs:
#: VARCHAR is 1043, which the wire calls text)
_TYPE_NAMES = {16: "boolean", 20: "bigint", 23: "integer", 21: "smallint",
               701: "double precision", 700: "real", 25: "text", 1043: "text", 1082: "date",
               1114: "timestamp without time zone", 1184: "timestamp with time zone",
               1700: "numeric"}

#: catalog tables DuckDB does not have, empty here (no policies, triggers, inheritance,
#: publications or extended statistics), with the columns psql's \\d commands read
_EMPTY_CATALOG = [
    "pg_policy (oid INTEGER, polname VARCHAR, polrelid INTEGER, polcmd VARCHAR, "
    "polpermissive BOOLEAN, polroles INTEGER[], polqual VARCHAR, polwithcheck VARCHAR)",
    "pg_statistic_ext (oid INTEGER, stxrelid INTEGER, stxname VARCHAR, stxnamespace INTEGER, "
    "stxowner INTEGER, stxstattarget INTEGER, stxkeys INTEGER[], stxkind VARCHAR[])",
    "pg_publication (oid INTEGER, pubname VARCHAR, puballtables BOOLEAN)",
    "pg_publication_rel (oid INTEGER, prpubid INTEGER, prrelid INTEGER, prqual VARCHAR, "
    "prattrs INTEGER[])",
    "pg_publication_namespace (oid INTEGER, pnpubid INTEGER, pnnspid INTEGER)",
    "pg_inherits (inhrelid INTEGER, inhparent INTEGER, inhseqno INTEGER, "
    "inhdetachpending BOOLEAN)",
    "pg_trigger (oid INTEGER, tgrelid INTEGER, tgparentid INTEGER, tgname VARCHAR, "
    "tgfoid INTEGER, tgtype INTEGER, tgenabled VARCHAR, tgisinternal BOOLEAN)",
    "pg_rewrite (oid INTEGER, rulename VARCHAR, ev_class INTEGER, ev_type VARCHAR, "
    "ev_enabled VARCHAR, is_instead BOOLEAN)",
    "pg_partitioned_table (partrelid INTEGER, partstrat VARCHAR)",
    "pg_foreign_table (ftrelid INTEGER, ftserver INTEGER, ftoptions VARCHAR[])",
    "pg_opclass (oid INTEGER, opcmethod INTEGER, opcname VARCHAR, opcnamespace INTEGER, "
    "opcdefault BOOLEAN, opcintype INTEGER)",
    "pg_description (objoid INTEGER, classoid INTEGER, objsubid INTEGER, description VARCHAR)",
    "pg_sequence (seqrelid INTEGER, seqtypid INTEGER, seqstart BIGINT, seqincrement BIGINT, "
    "seqmax BIGINT, seqmin BIGINT, seqcache BIGINT, seqcycle BOOLEAN)",
    "pg_roles (oid INTEGER, rolname VARCHAR, rolsuper BOOLEAN, rolinherit BOOLEAN, "
    "rolcreaterole BOOLEAN, rolcreatedb BOOLEAN, rolcanlogin BOOLEAN, rolconnlimit INTEGER, "
    "rolvaliduntil TIMESTAMP, rolreplication BOOLEAN, rolbypassrls BOOLEAN)",
]


_SETTING_PARAM = re.compile(r"\bcurrent_setting\s*\(\s*\?(?:\s*::\s*\w+)?\s*\)|\?", re.I)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _bind_settings(text: str, params: tuple, settings: Settings) -> tuple[str, tuple]:
    """``current_setting(?)`` with its parameter's setting written in (DuckDB's
    current_setting knows DuckDB's settings, not the session's)."""
    if not params or "current_setting" not in text.lower():
        return text, params
    kept: list[Any] = []
    index = 0

    def swap(m: re.Match) -> str:
        nonlocal index
        value = params[index] if index < len(params) else None
        index += 1
        if m.group(0) == "?":
            kept.append(value)
            return "?"
        return _quote(settings.get(str(value)))
    return _SETTING_PARAM.sub(swap, text), tuple(kept)


#: DuckDB's list types, as PostgreSQL's array types
_ARRAY_OIDS = {"VARCHAR[]": 1009, "BIGINT[]": 1016, "INTEGER[]": 1007, "SMALLINT[]": 1005,
               "BOOLEAN[]": 1000, "DOUBLE[]": 1022, "UINTEGER[]": 1028}


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, list):
        return "{" + ",".join("NULL" if x is None else _text(x) for x in v) + "}"
    return str(v)
