"""A server's generated token: in a file only its user can read, found by local clients."""
import os
import stat

import pytest

from noria_py.runtime.cluster import tokens


@pytest.fixture
def rundir(tmp_path, monkeypatch):
    d = tmp_path / "run"
    monkeypatch.setenv("NORIA_RUNTIME_DIR", str(d))
    return d


def test_the_file_is_for_its_user_only(rundir):
    path = tokens.write_token(7001, "abc")
    assert path == rundir / "serve-7001.token"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(rundir).st_mode) == 0o700
    assert tokens.read_token("127.0.0.1", 7001) == "abc"
    assert tokens.read_token("localhost", 7001) == "abc"


def test_a_stale_file_is_replaced(rundir):
    tokens.write_token(7002, "old")
    tokens.write_token(7002, "new")
    assert tokens.read_token("::1", 7002) == "new"


def test_no_file_or_not_local_reads_as_none(rundir):
    tokens.write_token(7003, "abc")
    assert tokens.read_token("127.0.0.1", 7004) is None
    assert tokens.read_token("10.0.0.5", 7003) is None        # (a file names local servers only)


def test_runtime_dir_defaults(monkeypatch, tmp_path):
    monkeypatch.delenv("NORIA_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert tokens.runtime_dir() == tmp_path / "noria-py"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert tokens.runtime_dir() == tmp_path / ".local" / "share" / "noria-py" / "runtime"


def test_tokens_are_fresh():
    assert tokens.new_token() != tokens.new_token() and len(tokens.new_token()) >= 32
