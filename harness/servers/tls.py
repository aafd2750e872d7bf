"""TLS for the wire client: the context a target's ``TlsOptions`` ask for (a ``url:tls://`` or
``url:wss://`` target's, or the run's CA for a launched server), made once per options."""

from __future__ import annotations

import functools
import ssl

from .specs import TlsOptions


@functools.cache
def client_context(options: TlsOptions) -> ssl.SSLContext:
    """A client context that verifies the server against ``options.ca`` (its certificate must
    name the host the URL names), or that verifies nothing when the target said ``insecure``."""
    if options.ca is None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=options.ca)


def describe(options: TlsOptions) -> str:
    """How the connection is secured, for transcripts."""
    return f"verifying against {options.ca}" if options.ca else "not verifying the certificate"
