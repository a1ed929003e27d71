"""TLS for the engine's ports: the cluster's own ``noria://`` connections (a client to
the controller and to the workers' read ports, a worker joining the controller) and
the PostgreSQL front end (``pg/server.py``).

A cluster started with ``noria-py serve --tls-cert F --tls-key F`` speaks TLS on every
one of its ports, and only TLS: a plain connection fails its handshake, is logged and
closed, and the server goes on. Inside TLS the token handshake (``wire.py``) is
unchanged: TLS keeps the bytes private and proves the server's certificate, the token
proves both sides to each other.

Invariants:

- a client verifies the server's certificate, against the CA file it is given (or the
  system's CAs for ``tls=True``), and the server's host name or address against it:
  ``ssl.create_default_context``'s defaults, never loosened here;
- a server-side handshake runs in the connection's own thread with a deadline
  (``accept``), so a peer that connects and says nothing holds only its own slot;
- what a worker needs (its read port's certificate and key, and the CA it verifies the
  controller with) travels to it as file names in its environment (``Files.env``),
  which both launchers pass on: file names, never keys or certificates themselves.
"""
from __future__ import annotations

import os
import socket
import ssl
from dataclasses import dataclass

from .errors import ArgumentError

__all__ = ["Files", "server_context", "client_context", "accept", "client_option"]

#: the environment variables a worker reads its TLS files from
ENV = ("NORIA_TLS_CERT", "NORIA_TLS_KEY", "NORIA_TLS_CA")


def server_context(cert: str, key: str) -> ssl.SSLContext:
    """A server's context for the certificate ``cert`` and its key (PEM files); an
    ``ArgumentError`` naming them if they cannot be used."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as err:
        raise ArgumentError(f"cannot use TLS certificate {cert!r} with key {key!r}: "
                            f"{err}") from None
    return ctx


def client_context(ca: str | bool) -> ssl.SSLContext:
    """A client's context that verifies servers against the CA file ``ca`` (a
    self-signed server certificate is its own CA), or, for ``True``, the system's."""
    try:
        if ca is True:
            return ssl.create_default_context()
        return ssl.create_default_context(cafile=str(ca))
    except (OSError, ssl.SSLError) as err:
        raise ArgumentError(f"cannot use TLS CA file {ca!r}: {err}") from None


def client_option(value: object) -> str | bool | None:
    """``connect(..., tls=...)`` or a URL's ``?tls=...`` as ``client_context`` takes it:
    None or False (plain), True (the system's CAs), or a CA file's name."""
    if value is None or value is False:
        return None
    if value is True:
        return True
    if isinstance(value, str) and value:
        low = value.lower()
        if low in ("1", "true", "yes", "system"):
            return True
        if low in ("0", "false", "no"):
            return None
        return value
    raise ArgumentError(f"tls must be True, False or a CA file's name, got {value!r}")


def accept(sock: socket.socket, ctx: ssl.SSLContext, timeout: float) -> ssl.SSLSocket:
    """The server's side of the handshake on a socket just accepted, within
    ``timeout`` seconds; the socket is blocking again afterwards. Raises OSError
    (``ssl.SSLError`` for a peer that does not speak TLS) and closes the socket."""
    try:
        tls = ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
    except OSError:
        sock.close()
        raise
    try:
        tls.settimeout(timeout)
        tls.do_handshake()
        tls.settimeout(None)
    except OSError:
        tls.close()
        raise
    return tls


def connect(sock: socket.socket, ctx: ssl.SSLContext, host: str) -> ssl.SSLSocket:
    """The client's side of the handshake on a connected socket, checking that the
    certificate is ``host``'s."""
    try:
        return ctx.wrap_socket(sock, server_hostname=host)
    except OSError:
        sock.close()
        raise


@dataclass(frozen=True)
class Files:
    """A cluster's TLS files: the certificate and key every port serves with, and the
    CA a worker verifies the controller with (by default the certificate itself, which
    is right for a self-signed one)."""

    cert: str
    key: str
    ca: str

    def env(self) -> dict[str, str]:
        """The environment that tells a worker of them (``from_env``)."""
        return dict(zip(ENV, (os.path.abspath(self.cert), os.path.abspath(self.key),
                              os.path.abspath(self.ca))))

    @classmethod
    def from_env(cls, env: dict[str, str] | os._Environ[str] = os.environ) -> Files | None:
        cert, key, ca = (env.get(k) or None for k in ENV)
        if cert is None and key is None:
            return None
        if cert is None or key is None:
            raise ArgumentError("a worker's TLS needs both NORIA_TLS_CERT and NORIA_TLS_KEY")
        return cls(cert, key, ca or cert)
