"""Fixtures of the sql_frontend tests (plain helpers are in helpers.py)."""
import pytest

from sql_frontend import DictCatalog

from .helpers import make_catalog


@pytest.fixture
def cat() -> DictCatalog:
    return make_catalog()
