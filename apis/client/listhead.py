"""A list page's ``metadata`` read from the page's first bytes, without decoding its items.

A paginated list asks for the next page with the ``continue`` token of the last one. Reading the
token before the page's items are decoded lets the next request go out first, so the API server
serializes the next page while this process decodes the last (``KubernetesBackend._list``). The
API server writes a list's ``kind``, ``apiVersion`` and ``metadata`` before its ``items`` (Go's
field order), so the token is in the first few hundred bytes; a full parse only to find it costs
a fifth of the page's decoding.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["HEAD_BYTES", "list_items_offset", "list_metadata_ahead_of_items"]

HEAD_BYTES: Final = 65536
"""How much of the page is looked at: a continue token is a few hundred bytes."""

_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_DECODER: Final = json.JSONDecoder()


def list_metadata_ahead_of_items(page: bytes) -> dict[str, Any] | None:
    """The page's top-level ``metadata`` when it comes before ``items`` within the first
    ``HEAD_BYTES``; None otherwise (the caller then finds it by decoding the whole page)."""
    head = _head(page)
    return head[0] if head is not None and head[0] is not None else None


def list_items_offset(page: bytes | bytearray) -> tuple[dict[str, Any], int] | None:
    """The metadata ahead of the items (``{}`` where none comes first) and the offset of the first
    byte after ``"items":[``, when that is within the first ``HEAD_BYTES`` and the head is ASCII
    (so that the offset in the text is the offset in the bytes); None otherwise, also where the
    head is not complete yet (``apis.client.liststream`` reads a list as it streams in)."""
    head = _head(page, items=True)
    if head is None or head[1] is None:
        return None
    return head[0] or {}, head[1]


def _head(page: bytes | bytearray, *, items: bool = False) -> tuple[dict[str, Any] | None, int | None] | None:
    """The metadata before the items and, with ``items``, the offset of the first byte after
    ``"items":[``; None where the head is not in that shape."""
    text = page[:HEAD_BYTES].decode("utf-8", errors="replace")
    metadata: dict[str, Any] | None = None
    try:
        pos = _skip(text, 0)
        if text[pos] != "{":
            return None
        pos += 1
        while True:
            pos = _skip(text, pos)
            if text[pos] != '"':
                return None
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip(text, pos)
            if text[pos] != ":":
                return None
            pos = _skip(text, pos + 1)
            if key == "items":
                if not items or text[pos] != "[" or not text[: pos + 1].isascii():
                    return None
                return metadata, pos + 1
            value, pos = _DECODER.raw_decode(text, pos)
            if key == "metadata":
                if not isinstance(value, dict):
                    return None
                metadata = value
                if not items:
                    return metadata, None
            pos = _skip(text, pos)
            if text[pos] != ",":
                return None
            pos += 1
    except (ValueError, IndexError):  # cut off by HEAD_BYTES, or not JSON at all
        return None


def _skip(text: str, pos: int) -> int:
    match = _WHITESPACE.match(text, pos)
    return match.end() if match is not None else pos
