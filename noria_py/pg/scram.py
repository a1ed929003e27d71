"""SCRAM-SHA-256 (RFC 5802, RFC 7677), the server's side, as PostgreSQL does it: the
password is the cluster's token, never sent; the server proves it knows it too.

Without TLS there is no channel binding: the client's GS2 header is ``n,,`` or
``y,,`` and comes back base64-encoded in its final message, which is checked.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

ITERATIONS = 4096


class ScramError(Exception):
    """The exchange failed (malformed message or wrong password)."""


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


class ScramServer:
    """One exchange: ``first(client_first)`` gives the server-first message,
    ``final(client_final)`` the server-final one (or raises ``ScramError``)."""

    def __init__(self, password: str) -> None:
        self.salt = secrets.token_bytes(16)
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), self.salt, ITERATIONS)
        self.stored_key = _h(_hmac(salted, b"Client Key"))
        self.server_key = _hmac(salted, b"Server Key")
        self.nonce = ""
        self.client_first_bare = ""
        self.server_first = ""
        self.gs2 = ""

    def first(self, client_first: str) -> str:
        parts = client_first.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise ScramError("unsupported SCRAM GS2 header (channel binding needs TLS)")
        self.gs2 = parts[0] + "," + parts[1] + ","
        self.client_first_bare = parts[2]
        attrs = dict(a.split("=", 1) for a in parts[2].split(",") if "=" in a)
        client_nonce = attrs.get("r")
        if not client_nonce:
            raise ScramError("SCRAM client-first message without a nonce")
        self.nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        self.server_first = (f"r={self.nonce},s={base64.b64encode(self.salt).decode()},"
                             f"i={ITERATIONS}")
        return self.server_first

    def final(self, client_final: str) -> str:
        without_proof, sep, proof_b64 = client_final.rpartition(",p=")
        if not sep:
            raise ScramError("SCRAM client-final message without a proof")
        attrs = dict(a.split("=", 1) for a in without_proof.split(",") if "=" in a)
        if attrs.get("r") != self.nonce:
            raise ScramError("SCRAM nonce mismatch")
        if attrs.get("c") != base64.b64encode(self.gs2.encode()).decode():
            raise ScramError("SCRAM channel binding mismatch")
        auth = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise ScramError("SCRAM proof is not base64") from None
        signature = _hmac(self.stored_key, auth)
        if len(proof) != len(signature):
            raise ScramError("password authentication failed")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(_h(client_key), self.stored_key):
            raise ScramError("password authentication failed")
        return "v=" + base64.b64encode(_hmac(self.server_key, auth)).decode()
