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

__all__ = ["list_metadata_ahead_of_items"]

HEAD_BYTES: Final = 65536
"""How much of the page is looked at: a continue token is a few hundred bytes."""

_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_DECODER: Final = json.JSONDecoder()


def list_metadata_ahead_of_items(page: bytes) -> dict[str, Any] | None:
    """The page's top-level ``metadata`` when it comes before ``items`` within the first
    ``HEAD_BYTES``; None otherwise (the caller then finds it by decoding the whole page)."""
    text = page[:HEAD_BYTES].decode("utf-8", errors="replace")
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
            if text[pos] != ":" or key == "items":
                return None
            value, pos = _DECODER.raw_decode(text, _skip(text, pos + 1))
            if key == "metadata":
                return value if isinstance(value, dict) else None
            pos = _skip(text, pos)
            if text[pos] != ",":
                return None
            pos += 1
    except (ValueError, IndexError):  # cut off by HEAD_BYTES, or not JSON at all
        return None


def _skip(text: str, pos: int) -> int:
    match = _WHITESPACE.match(text, pos)
    return match.end() if match is not None else pos
