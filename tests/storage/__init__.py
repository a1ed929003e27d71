"""Tests of noria_py.storage and of what it promises the engine (a package, so that
its helpers are imported relative to it and its conftest cannot shadow another
suite's)."""
