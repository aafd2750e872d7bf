"""NATS message headers (ADR-4): the header block of HPUB/HMSG and the client header API.

A header block is the HDR_LEN bytes of an HPUB or HMSG::

    NATS/1.0[ <status>[ <description>]]\\r\\n
    (<name>: <value>\\r\\n)*
    \\r\\n

``parse_block`` and ``encode_block`` convert between those bytes and a ``HeaderBlock``;
``Headers`` is the ordered multi-map with ADR-4's GET, VALUES, SET, DELETE and APPEND in
both case modes. Everything is pure; bad input gives a ``HeaderError`` value, never an
exception.

Decisions where the documents are silent (the vectors level these below ``must``):

* Status lines (``NATS/1.0 503``, ``NATS/1.0 408 Request Timeout``) are not described by
  ADR-4; the status is three digits from 100 to 999 after one space, the optional
  description follows one more space, with surrounding spaces and tabs removed.
* Field values: ADR-4 quotes rfc822 ("any ASCII characters, except CR or LF"). Values that
  are valid UTF-8 are accepted and decoded (common practice); other non-ASCII bytes are
  rejected. ASCII control characters other than CR and LF are accepted, as the quote allows.
* A block with no header lines (``NATS/1.0\\r\\n\\r\\n``) is accepted, although
  client-protocol.txt speaks of "one or more name: value pairs".
* ``encode_block`` refuses what a receiver could not get back: a value or description with
  leading or trailing whitespace (the receiver strips it), an empty description, or a
  description without a status. So ``parse_block(encode_block(b)) == b`` whenever encoding
  succeeds.
* ``Headers`` keeps one flat list of pairs; SET and APPEND add the new pair at the end.
  ADR-4 does not say where a new value goes.

``HeaderError.reason`` is one of:

``missing_version``
    the block does not begin with ``NATS/``
``unsupported_version``
    the version line begins with ``NATS/`` but is not ``NATS/1.0`` (alone or followed by a
    space and a status)
``invalid_status``
    the status is not three digits from 100 to 999 after exactly one space, or is followed
    by something other than a space; when encoding, a status outside 100..999 or a
    description without a status
``invalid_description``
    a description that is not UTF-8 (parsing), or that is empty, contains CR or LF, or has
    leading or trailing whitespace (encoding)
``bare_line_ending``
    a LF not preceded by CR, or a CR not followed by LF
``missing_terminator``
    no blank line: the block does not contain CRLF CRLF
``trailing_data``
    bytes after the blank line that ends the block (the block must end there: HDR_LEN
    runs "up to and including the CRLF before the payload")
``missing_colon``
    a header line without a colon
``invalid_header_name``
    a name that is empty or has a character outside printable ASCII 33..126 or a colon
    (a space before the colon lands here)
``invalid_header_value``
    a value that is not UTF-8 (parsing), or contains CR or LF or has leading or trailing
    whitespace (encoding)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

VERSION = b"NATS/1.0"
VERSION_PREFIX = b"NATS/"
CRLF = b"\r\n"
TERMINATOR = b"\r\n\r\n"
# Optional whitespace around values (HTTP's OWS): space and horizontal tab.
WHITESPACE = " \t"
MIN_STATUS, MAX_STATUS = 100, 999


@dataclass(frozen=True)
class HeaderBlock:
    """A parsed header block: status line and fields in wire order, case preserved."""

    status: int | None
    description: str | None
    fields: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class HeaderError:
    """Why bytes are not a header block, or a block cannot be encoded."""

    reason: str
    detail: str


# --- parsing --------------------------------------------------------------------------------


def parse_block(data: bytes) -> HeaderBlock | HeaderError:
    """Parse exactly HDR_LEN bytes, from ``NATS/1.0`` to the blank line."""
    if not data.startswith(VERSION_PREFIX):
        return HeaderError("missing_version", f"block starts with {data[:16]!r}, not NATS/")
    bare = _bare_line_ending(data)
    if bare is not None:
        return HeaderError("bare_line_ending", f"CR and LF not paired at offset {bare}")
    end = data.find(TERMINATOR)
    if end < 0:
        return HeaderError("missing_terminator", "no blank line (CRLF CRLF) ends the block")
    if end + len(TERMINATOR) != len(data):
        extra = len(data) - end - len(TERMINATOR)
        return HeaderError("trailing_data", f"{extra} bytes after the blank line")
    version_line, *field_lines = data[:end].split(CRLF)
    status = _parse_version_line(version_line)
    if isinstance(status, HeaderError):
        return status
    fields = []
    for line in field_lines:
        pair = _parse_field(line)
        if isinstance(pair, HeaderError):
            return pair
        fields.append(pair)
    return HeaderBlock(status[0], status[1], tuple(fields))


def _bare_line_ending(data: bytes) -> int | None:
    """Offset of the first CR or LF that is not part of a CRLF pair, if any."""
    for i, byte in enumerate(data):
        if byte == 0x0D and data[i + 1 : i + 2] != b"\n":
            return i
        if byte == 0x0A and (i == 0 or data[i - 1] != 0x0D):
            return i
    return None


def _parse_version_line(line: bytes) -> tuple[int | None, str | None] | HeaderError:
    """The (status, description) of ``NATS/1.0[ <status>[ <description>]]``."""
    if line == VERSION:
        return None, None
    if not line.startswith(VERSION + b" "):
        return HeaderError("unsupported_version", f"version line {line[:32]!r}")
    rest = line[len(VERSION) + 1 :]
    code, after = rest[:3], rest[3:]
    if not (len(code) == 3 and code.isdigit() and int(code) >= MIN_STATUS):
        return HeaderError("invalid_status", f"status {rest[:16]!r} is not 100..999")
    if after and not after.startswith(b" "):
        return HeaderError("invalid_status", f"status {rest[:16]!r} is not three digits")
    description = _decode_text(after[1:], "invalid_description")
    if isinstance(description, HeaderError):
        return description
    return int(code), description or None


def _parse_field(line: bytes) -> tuple[str, str] | HeaderError:
    """One ``name: value`` line; the name ends at the first colon."""
    name, colon, value = line.partition(b":")
    if not colon:
        return HeaderError("missing_colon", f"header line {line[:32]!r} has no colon")
    if not _valid_name(name.decode("latin-1")):
        return HeaderError("invalid_header_name", f"header name {name[:32]!r}")
    text = _decode_text(value, "invalid_header_value")
    if isinstance(text, HeaderError):
        return text
    return name.decode("ascii"), text


def _decode_text(raw: bytes, reason: str) -> str | HeaderError:
    """A value or description: UTF-8, optional surrounding whitespace removed."""
    try:
        return raw.decode("utf-8").strip(WHITESPACE)
    except UnicodeDecodeError as exc:
        return HeaderError(reason, f"not UTF-8 at offset {exc.start}")


def _valid_name(name: str) -> bool:
    """rfc822 field-name: printable ASCII 33..126 except colon, at least one character."""
    return bool(name) and all(33 <= ord(c) <= 126 and c != ":" for c in name)


# --- encoding -------------------------------------------------------------------------------


def encode_block(block: HeaderBlock) -> bytes | HeaderError:
    """The canonical bytes of a block: ``Name: value`` lines, one per value."""
    version = _encode_version_line(block.status, block.description)
    if isinstance(version, HeaderError):
        return version
    lines = [version]
    for name, value in block.fields:
        if not _valid_name(name):
            return HeaderError("invalid_header_name", f"header name {name!r}")
        encoded = _encode_text(value, "invalid_header_value")
        if isinstance(encoded, HeaderError):
            return encoded
        lines.append(name.encode("ascii") + b": " + encoded)
    return CRLF.join(lines) + TERMINATOR


def _encode_version_line(status: int | None, description: str | None) -> bytes | HeaderError:
    if status is None:
        if description is not None:
            return HeaderError("invalid_status", "a description needs a status")
        return VERSION
    if not MIN_STATUS <= status <= MAX_STATUS:
        return HeaderError("invalid_status", f"status {status} is not 100..999")
    line = VERSION + b" %d" % status
    if description is None:
        return line
    encoded = _encode_text(description, "invalid_description")
    if isinstance(encoded, HeaderError):
        return encoded
    if not encoded:
        return HeaderError("invalid_description", "an empty description cannot be sent")
    return line + b" " + encoded


def _encode_text(text: str, reason: str) -> bytes | HeaderError:
    """A value or description as UTF-8, refused when a receiver could not get it back."""
    if "\r" in text or "\n" in text:
        return HeaderError(reason, f"{text[:32]!r} contains CR or LF")
    if text != text.strip(WHITESPACE):
        return HeaderError(reason, f"{text[:32]!r} has surrounding whitespace a receiver strips")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return HeaderError(reason, f"not encodable as UTF-8: {exc.reason}")


# --- the client header API ------------------------------------------------------------------

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _same_key(name: str, key: str, case_sensitive: bool) -> bool:
    # Header names are ASCII, so case-insensitive means ASCII case folding only.
    if case_sensitive:
        return name == key
    return name.translate(_ASCII_LOWER) == key.translate(_ASCII_LOWER)


class Headers:
    """An ordered multi-map of (name, value) pairs with ADR-4's operations.

    Case-sensitive mode compares names exactly; case-insensitive mode compares them with
    ASCII case folding. New pairs go at the end of the list (ADR-4 does not say where).
    """

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self._pairs = [(name, value) for name, value in pairs]

    def items(self) -> list[tuple[str, str]]:
        return list(self._pairs)

    def get(self, key: str, *, case_sensitive: bool = True) -> str:
        """The first matching value, or "" when there is none."""
        found = self.values(key, case_sensitive=case_sensitive)
        return found[0] if found else ""

    def values(self, key: str, *, case_sensitive: bool = True) -> list[str]:
        """Every matching value in order. Case-insensitively this is ADR-4's "union of all
        headers that case-insensitive match", also when the exact key is absent."""
        return [v for name, v in self._pairs if _same_key(name, key, case_sensitive)]

    def delete(self, key: str, *, case_sensitive: bool = True) -> None:
        """Remove every matching pair."""
        self._pairs = [p for p in self._pairs if not _same_key(p[0], key, case_sensitive)]

    def append(self, key: str, value: str, *, case_sensitive: bool = True) -> None:
        """Add a pair at the end; case-insensitively under the first matching name."""
        name = next((n for n, _ in self._pairs if _same_key(n, key, case_sensitive)), key)
        self._pairs.append((name, value))

    def set(self, key: str, value: str, *, case_sensitive: bool = True) -> None:
        """DELETE then APPEND: afterwards the key has exactly this one value."""
        self.delete(key, case_sensitive=case_sensitive)
        self.append(key, value, case_sensitive=case_sensitive)
