"""The shared token of a server started without one: generated, and kept in a file only
its user can read, where local clients and workers find it (as Jupyter does).

A server given no token (``--token`` or ``$NORIA_TOKEN``) makes one
(``secrets.token_urlsafe``) and writes it to ``<runtime dir>/serve-<port>.token``,
mode 0600 in a directory of mode 0700, removed when the server stops. A client or
worker connecting to a loopback address with no token of its own reads that file, so
on one machine nothing needs configuring, and another user's process, which cannot read
the file, cannot connect, fail nodes or join as a worker. The runtime directory is
``$NORIA_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/noria-py``, else
``~/.local/share/noria-py/runtime``.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["runtime_dir", "token_path", "new_token", "write_token", "read_token", "LOOPBACK"]

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def runtime_dir() -> Path:
    explicit = os.environ.get("NORIA_RUNTIME_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "noria-py"
    return Path.home() / ".local" / "share" / "noria-py" / "runtime"


def token_path(port: int) -> Path:
    return runtime_dir() / f"serve-{port}.token"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def write_token(port: int, token: str) -> Path:
    """Write ``token`` for the server on ``port``, readable by this user only (a stale
    file from a server that died on the same port is replaced)."""
    d = runtime_dir()
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    path = token_path(port)
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return path


def read_token(host: str, port: int) -> str | None:
    """The token a local server on ``port`` wrote, or None (not local, no such file, or
    not readable by this user)."""
    if host not in LOOPBACK:
        return None
    try:
        return token_path(port).read_text().strip() or None
    except OSError:
        return None
