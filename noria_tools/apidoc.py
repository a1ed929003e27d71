"""``docs/api.md``: the Python API's reference, made from the docstrings.

``python -m noria_tools.apidoc`` writes it; ``tests/tools/test_apidoc.py`` checks that
the file is current and that every public function and method has a docstring. The
order of ``ITEMS`` is the reference's order: what a user meets first comes first.
"""
from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import Any, Callable, cast

ITEMS: list[tuple[str, str]] = [
    ("noria_py", "connect"),
    ("noria_py.client", "Database"),
    ("noria_py.client", "Table"),
    ("noria_py.client", "View"),
    ("noria_py.client", "Prepared"),
    ("noria_py.result", "Result"),
    ("noria_py.dbapi", "Cursor"),
    ("noria_py.subscribe", "Subscription"),
    ("noria_py.subscribe", "Change"),
    ("noria_py.remote", "RemoteDatabase"),
    ("noria_py.pg", "PgServer"),
    ("noria_py", "tune_gc"),
    ("noria_py.spark", "register"),
    ("noria_py.spark", "dataframe"),
]
DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
HEADER = """# Python API reference

Made from the docstrings by `python -m noria_tools.apidoc` (a test keeps it current).
SQL is in docs/sql.md, PostgreSQL clients in docs/postgres.md, recovery in
docs/recovery.md.
"""


def public_members(cls: type) -> list[tuple[str, Any]]:
    """A class's public methods and properties, in source order."""
    out = []
    for name, member in cls.__dict__.items():
        if name.startswith("_"):
            continue
        if isinstance(member, property) or inspect.isfunction(member) \
                or isinstance(member, (staticmethod, classmethod)):
            out.append((name, member))
    return out


def _signature(obj: Any, name: str) -> str:
    target = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
    target = getattr(target, "__wrapped__", target)
    if isinstance(obj, property):
        return f"`{name}` (property)"
    try:
        sig = str(inspect.signature(cast(Callable[..., Any], target)))
        sig = sig.replace("(self, ", "(").replace("(self)", "()")
        sig = sig.replace("'", "").replace('"', "")
    except (TypeError, ValueError):
        sig = "(...)"
    return f"`{name}{sig}`"


def _doc(obj: Any) -> str:
    target = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
    return inspect.cleandoc(target.__doc__ or "")


def render() -> str:
    parts = [HEADER]
    for module, name in ITEMS:
        obj = getattr(importlib.import_module(module), name)
        if inspect.isclass(obj):
            parts.append(f"\n## `{name}` ({module})\n\n{_doc(obj)}\n")
            for mname, member in public_members(obj):
                doc = _doc(member)
                parts.append(f"\n- {_signature(member, mname)}" + (f": {doc}" if doc else "")
                             .replace("\n", "\n  ") + "\n")
        else:
            parts.append(f"\n## {_signature(obj, name)} ({module})\n\n{_doc(obj)}\n")
    parts.append("\n## Errors (noria_py)\n\nEvery error a user can cause is a `noria_py.Error`, "
                 "under PEP 249's classes:\n")
    import noria_py
    for cls_name in sorted(n for n in dir(noria_py) if n.endswith("Error")):
        cls = getattr(noria_py, cls_name)
        if inspect.isclass(cls) and issubclass(cls, Exception):
            base = cls.__mro__[1].__name__
            first = _doc(cls).split("\n\n")[0].replace("\n", " ")
            parts.append(f"- `{cls_name}` ({base}): {first}\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    DOC.write_text(render())
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
