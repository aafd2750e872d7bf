"""The run's certificates: a CA and a server certificate for IP 127.0.0.1 and DNS localhost,
made at run time with ``trustme``, so nothing secret is ever committed.

The files (the CA, the server's chain, its key) live in a private temporary directory (mode
0700) that is removed when the certificates are closed, and at exit. One set serves a whole run
(``run_certificates``): every server of the run presents a certificate the same CA signed, and
a client's TLS context for that CA is made once.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import trustme

# The names the server certificate holds: the loopback the suite talks to, by address and name.
SERVER_NAMES = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class CertFiles:
    """Where a set of certificates is: the CA a client verifies against, and what a server
    presents (its certificate chain and key)."""

    ca: Path
    chain: Path
    key: Path


class Certificates:
    """A fresh CA and a server certificate it signed, written into a private directory until
    ``close`` (or the end of the process)."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="nats-conformance-tls-"))  # mode 0700
        atexit.register(self.close)
        ca = trustme.CA()
        server = ca.issue_cert(*SERVER_NAMES)
        self.files = CertFiles(
            self.directory / "ca.pem", self.directory / "server-chain.pem",
            self.directory / "server-key.pem",
        )  # fmt: skip
        ca.cert_pem.write_to_path(str(self.files.ca))
        server.private_key_pem.write_to_path(str(self.files.key))
        for blob in server.cert_chain_pems:
            blob.write_to_path(str(self.files.chain), append=True)

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
        atexit.unregister(self.close)

    def __enter__(self) -> Certificates:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_LOCK = threading.Lock()
_RUN: list[Certificates] = []


def run_certificates() -> CertFiles:
    """The run's certificates, made on first use (so a run over plain TCP makes none) and
    removed at exit."""
    with _LOCK:
        if not _RUN or not _RUN[0].files.ca.is_file():
            _RUN[:] = [Certificates()]
        return _RUN[0].files
