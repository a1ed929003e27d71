"""noria_py/tls.py in process: what ``connect(..., tls=)`` and a URL's ``?tls=`` take,
the files a worker is told of, and the mistakes that are refused (a cluster served with
TLS: tests/runtime/cluster/test_tls.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

import noria_py
from noria_py import tls
from noria_py.errors import ArgumentError, ConnectError


@pytest.mark.parametrize("given, taken", [
    (None, None), (False, None), (True, True), ("true", True), ("system", True),
    ("0", None), ("no", None), ("/etc/ca.pem", "/etc/ca.pem"),
])
def test_client_option(given: object, taken: object) -> None:
    assert tls.client_option(given) == taken


@pytest.mark.parametrize("given", [1, "", ["ca.pem"]])
def test_a_client_option_of_another_kind_is_an_argument_error(given: object) -> None:
    with pytest.raises(ArgumentError, match="tls must be"):
        tls.client_option(given)


def test_files_travel_to_a_worker_as_absolute_names(certificate: tuple[str, str]) -> None:
    cert, key = certificate
    files = tls.Files(cert, key, cert)
    assert tls.Files.from_env(files.env()) == files
    assert tls.Files.from_env({}) is None
    assert tls.Files.from_env({"NORIA_TLS_CERT": cert, "NORIA_TLS_KEY": key}).ca == cert
    with pytest.raises(ArgumentError, match="both NORIA_TLS_CERT and NORIA_TLS_KEY"):
        tls.Files.from_env({"NORIA_TLS_CERT": cert})


def test_unusable_files_are_argument_errors(tmp_path: Path,
                                            certificate: tuple[str, str]) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ArgumentError, match="cannot use TLS certificate"):
        tls.server_context(str(junk), certificate[1])
    with pytest.raises(ArgumentError, match="cannot use TLS CA file"):
        tls.client_context(str(tmp_path / "missing.pem"))
    with pytest.raises(ArgumentError, match="cannot use TLS CA file"):
        noria_py.connect("noria://127.0.0.1:1", token="t", tls=str(junk))


def test_tls_is_refused_for_an_embedded_engine_and_urls_take_only_tls() -> None:
    with pytest.raises(ArgumentError, match="tls is for connecting to a cluster"):
        noria_py.connect(tls=True)
    with pytest.raises(ConnectError, match="unknown option 'sslmode'"):
        noria_py.connect("noria://127.0.0.1:1?sslmode=require", token="t")
