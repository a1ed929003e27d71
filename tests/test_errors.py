"""``errors.named``: an error a peer sent by its class's name becomes that class here,
and nothing but an ``Error`` subclass is ever made from a name."""
from __future__ import annotations

import pytest

from noria_py import errors


@pytest.mark.parametrize("name", ["DuplicateKeyError", "RecoveryError", "ConnectError", "TypeMismatchError", "Error"])
def test_a_known_name_is_its_class(name):
    e = errors.named(name, "why")
    assert type(e) is getattr(errors, name) and str(e) == "why"


@pytest.mark.parametrize("name", ["NoSuchError", "Exception", "named", "annotations",
                                  "__builtins__", ""])
def test_any_other_name_is_a_plain_error(name):
    e = errors.named(name, "why")
    assert type(e) is errors.Error and str(e) == "why"
