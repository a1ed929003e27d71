from __future__ import annotations

from pathlib import Path

import pytest

from noria_py.storage import Storage


@pytest.fixture
def open_storage(tmp_path):
    """Opens storages and makes sure every one is closed at the end, so a
    failing test does not leave a lock behind for the next one."""
    opened: list[Storage] = []

    def _open(d: Path | None = None, **kw) -> Storage:
        kw.setdefault("sync", False)
        s = Storage(d if d is not None else tmp_path / "data", **kw)
        opened.append(s)
        return s

    yield _open
    for s in opened:
        s.close()
