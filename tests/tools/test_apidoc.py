"""docs/api.md is made from the docstrings and kept current; every public function and
method it lists has a docstring."""
from __future__ import annotations

import importlib
import inspect

from noria_tools import apidoc


def test_the_reference_is_current() -> None:
    assert apidoc.DOC.read_text() == apidoc.render(), \
        "docs/api.md is stale: run python -m noria_tools.apidoc"


def test_every_public_method_has_a_docstring() -> None:
    missing = []
    for module, name in apidoc.ITEMS:
        obj = getattr(importlib.import_module(module), name)
        members = apidoc.public_members(obj) if inspect.isclass(obj) else [(name, obj)]
        for mname, member in members:
            target = member.fget if isinstance(member, property) else member
            if not (getattr(target, "__doc__", None) or "").strip():
                missing.append(f"{module}.{name}.{mname}")
    assert missing == []
