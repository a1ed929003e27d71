"""Logical plans as plain data, so that a controller can send them to worker processes.

``to_data`` turns a plan value (anything reachable from ``Query``, ``CreateView`` or
``TableSchema``) into dicts, lists and scalars that msgpack can carry; ``from_data``
rebuilds an equal value with an equal hash (the engine memoizes operators on plan
values, so a worker must rebuild exactly what the controller planned).

- a dataclass is ``{"$": "ClassName", field: value, ...}``; only the classes of
  ``plan``, ``expr`` and ``types`` are known, so data can name nothing else: this is
  the whitelist that keeps decoding from constructing arbitrary objects;
- an enum member is ``{"$e": "SqlType", "v": value}``;
- a tuple is a list. The plan modules hold no lists (they would make the frozen
  values unhashable), so every list decodes as a tuple and needs no tag; ``to_data``
  refuses lists and other containers rather than have them come back changed;
- scalars (None, bool, int, float, str, bytes, date, datetime) are left as they are:
  the storage codec carries dates and datetimes as msgpack extension types.

Errors are ``ValueError`` with a message naming what is wrong; the caller wraps them.
"""
from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Any

from . import expr, plan, types

__all__ = ["to_data", "from_data"]


def _registry() -> tuple[dict[str, type], dict[str, type]]:
    classes: dict[str, type] = {}
    enums: dict[str, type] = {}
    for module in (types, expr, plan):
        for obj in vars(module).values():
            if not isinstance(obj, type) or obj.__module__ != module.__name__:
                continue
            if issubclass(obj, enum.Enum):
                enums[obj.__name__] = obj
            elif dataclasses.is_dataclass(obj):
                assert obj.__name__ not in classes, obj
                classes[obj.__name__] = obj
    return classes, enums


_CLASSES, _ENUMS = _registry()
_FIELDS = {name: tuple(f.name for f in dataclasses.fields(cls) if f.init)
           for name, cls in _CLASSES.items()}
_SCALARS = (type(None), bool, int, float, str, bytes, datetime.date, datetime.datetime)


def to_data(obj: Any) -> Any:
    """``obj`` as dicts, lists and scalars (see the module docstring)."""
    kind = type(obj)
    if kind is tuple:
        return [to_data(v) for v in obj]
    if kind in _SCALARS:
        return obj
    # an enum member is tested before str: SqlType is a str subclass
    if isinstance(obj, enum.Enum):
        name = kind.__name__
        if _ENUMS.get(name) is not kind:
            raise ValueError(f"cannot encode enum {name}: not a plan type")
        return {"$e": name, "v": obj.value}
    name = kind.__name__
    if _CLASSES.get(name) is kind:
        out: dict[str, Any] = {"$": name}
        for f in _FIELDS[name]:
            out[f] = to_data(getattr(obj, f))
        return out
    raise ValueError(f"cannot encode a value of type {name} in a plan: {obj!r:.80}")


def from_data(data: Any) -> Any:
    """The plan value that ``to_data`` encoded as ``data``; ValueError if ``data``
    names a class that is not a plan type or does not fit it."""
    kind = type(data)
    if kind is list or kind is tuple:
        return tuple([from_data(v) for v in data])
    if kind is dict:
        if "$" in data:
            name = data["$"]
            cls = _CLASSES.get(name) if type(name) is str else None
            if cls is None:
                raise ValueError(f"unknown plan class {name!r}")
            fields = _FIELDS[name]
            extra = set(data) - {"$", *fields}
            if extra:
                raise ValueError(f"{name} has no field(s) {', '.join(sorted(map(str, extra)))}")
            try:
                return cls(**{f: from_data(data[f]) for f in fields if f in data})
            except TypeError as e:
                raise ValueError(f"bad {name}: {e}") from None
        if "$e" in data:
            name = data["$e"]
            cls = _ENUMS.get(name) if type(name) is str else None
            if cls is None:
                raise ValueError(f"unknown plan enum {name!r}")
            try:
                return cls(data.get("v"))
            except ValueError:
                raise ValueError(f"{data.get('v')!r} is not a {name}") from None
        raise ValueError("a plan dict must be tagged with '$' (class) or '$e' (enum)")
    if kind in _SCALARS:
        return data
    raise ValueError(f"cannot decode a value of type {kind.__name__} in a plan")
