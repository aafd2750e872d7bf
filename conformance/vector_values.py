"""What every vector evaluator shares: bytes values, operation patterns, mismatches and the
bounded excerpts messages quote. Pure, like the rest of the reference."""

from __future__ import annotations

import base64
from typing import Any


class BytesError(ValueError):
    """A bytes value that cannot be decoded; carries the JSON path."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


def decode_bytes(value: Any, path: str = "") -> bytes:
    """Decode a vector bytes value (string, {base64}, {repeat,count}, or a list of parts)."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as exc:  # lone surrogates from \\udXXX escapes
            raise BytesError(
                path, f"string is not valid Unicode text ({exc.reason}); use base64"
            ) from exc
    if isinstance(value, list):
        return b"".join(decode_bytes(part, f"{path}[{i}]") for i, part in enumerate(value))
    if isinstance(value, dict) and "base64" in value:
        try:
            return base64.b64decode(value["base64"], validate=True)
        except (ValueError, TypeError) as exc:
            raise BytesError(f"{path}.base64", f"invalid base64: {exc}") from exc
    if isinstance(value, dict) and "repeat" in value:
        count = value.get("count")
        if not isinstance(count, int) or count < 0:
            raise BytesError(f"{path}.count", "count must be a non-negative integer")
        return decode_bytes(value["repeat"], f"{path}.repeat") * count
    raise BytesError(path, f"not a bytes value: {value!r}")


def encode_bytes(data: bytes) -> Any:
    """The most readable lossless JSON form of ``data``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


class Mismatch(Exception):
    """A case whose reference outcome differs from its expectation (field, message)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


BYTES_FIELDS = frozenset({"headers", "payload"})


def op_pattern(op: dict[str, Any], path: str) -> dict[str, Any]:
    """A vector op with its bytes fields decoded; fields left out stay out (a pattern)."""
    return {k: decode_bytes(v, f"{path}.{k}") if k in BYTES_FIELDS else v for k, v in op.items()}


SHOWN = 600  # characters of one value a message shows


def excerpt(value: Any, limit: int = SHOWN) -> str:
    """``repr(value)``, cut to ``limit`` characters with its full size: a message quoting what a
    target sent stays small whatever the target sends."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
