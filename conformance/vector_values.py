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


# A vector file is untrusted input: a few nested repeats within the schema's counts describe
# exabytes. Sizes are computed from the structure first, so refusing one costs arithmetic.
MAX_BYTES = 64 * 1024 * 1024  # what a case's repeats may expand to (bundled: 200 kB at most)
MAX_BYTES_DEPTH = 32  # arrays and repeats nested in one bytes value (bundled: 1)


def decode_bytes(value: Any, path: str = "") -> bytes:
    """Decode a vector bytes value (string, {base64}, {repeat,count}, or a list of parts); one
    that expands over ``MAX_BYTES`` is refused before anything is expanded."""
    over_limit(expanded_size(value, path), path)
    return _expand(value, path)


def over_limit(size: int, path: str, total: int | None = None) -> None:
    """Refuse ``size`` bytes at ``path``, or a case's ``total`` (its repeats so far, this one
    included) over ``MAX_BYTES``."""
    limit = f"over the {size_text(MAX_BYTES)} limit"
    if size > MAX_BYTES:
        raise BytesError(path, f"expands to {size_text(size)}, {limit}")
    if total is not None and total > MAX_BYTES:
        raise BytesError(
            path,
            f"expands to {size_text(size)}, the case's repeats to {size_text(total)} with it, "
            f"{limit}",
        )


def expanded_size(value: Any, path: str = "") -> int:
    """The length ``decode_bytes`` gives, computed without expanding any repeat; a value nested
    more than ``MAX_BYTES_DEPTH`` deep is refused, so the recursion stays shallow."""
    return _size(value, path, 0)


def _size(value: Any, path: str, depth: int) -> int:
    if depth > MAX_BYTES_DEPTH:
        raise BytesError(path, f"nested more than {MAX_BYTES_DEPTH} deep")
    if isinstance(value, list):
        return sum(_size(part, f"{path}[{i}]", depth + 1) for i, part in enumerate(value))
    if isinstance(value, dict) and "repeat" in value and "base64" not in value:
        return _count(value, path) * _size(value["repeat"], f"{path}.repeat", depth + 1)
    return len(_leaf(value, path))


def _expand(value: Any, path: str) -> bytes:
    """The bytes of a value ``expanded_size`` has measured (so its depth is bounded)."""
    if isinstance(value, list):
        return b"".join(_expand(part, f"{path}[{i}]") for i, part in enumerate(value))
    if isinstance(value, dict) and "repeat" in value and "base64" not in value:
        return _expand(value["repeat"], f"{path}.repeat") * _count(value, path)
    return _leaf(value, path)


def _count(value: dict[str, Any], path: str) -> int:
    count = value.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise BytesError(f"{path}.count", "count must be a non-negative integer")
    return count


def _leaf(value: Any, path: str) -> bytes:
    """A string or {base64}: bytes no larger than the text that holds them."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as exc:  # lone surrogates from \\udXXX escapes
            raise BytesError(
                path, f"string is not valid Unicode text ({exc.reason}); use base64"
            ) from exc
    if isinstance(value, dict) and "base64" in value:
        try:
            return base64.b64decode(value["base64"], validate=True)
        except (ValueError, TypeError) as exc:
            raise BytesError(f"{path}.base64", f"invalid base64: {exc}") from exc
    raise BytesError(path, f"not a bytes value: {excerpt(value, 200)}")


_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def size_text(size: int) -> str:
    """A byte count for people (``3.2 GiB``), exact below 1 KiB; integer arithmetic picks the
    unit, since a nested repeat's size can be beyond what a float holds."""
    if size >= 1024 ** len(_UNITS):
        return f"more than 1024 {_UNITS[-1]}"
    power = max((i for i in range(len(_UNITS)) if size >= 1024**i), default=0)
    if power == 0:
        return f"{size} bytes"
    return f"{size / 1024**power:.1f}".removesuffix(".0") + f" {_UNITS[power]}"


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
