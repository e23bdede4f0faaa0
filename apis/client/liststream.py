"""A list response cut into pages of whole items as its bytes arrive.

One list with ``resourceVersion=0`` is served from the API server's watch cache in one response
(three times faster than 100 pages of 500 pods asked for one after the other), but decoding it
whole only after its last byte loses the overlap of decoding with the API server's writing and
holds the whole body. ``ListCutter`` is fed the body in chunks as they come and hands out the
items read so far as a page (``{"items":[...]}``) every ``batch_bytes``, for the page model to
validate from its bytes as a paginated list's page is.

Where to cut: the API server writes compact JSON, the list's ``metadata`` before its ``items``, and
each item's keys in one order, so two items meet as ``},`` followed by the first item's opening
(``{"metadata":``). Inside a JSON string every ``"`` is escaped, and after a string's closing quote
only ``,:]}`` may follow, so that run of bytes is never inside a string: it is always two sibling
objects of some array, but not necessarily of ``items`` (a nested array whose objects start with
the same key). A cut there leaves at least four brackets open and the page's wrapper closes two,
so such a page never parses: a page that does not parse goes back (``refused``) and the next cut is
tried a batch later. A body that is not a list in this shape (items first, whitespace between
tokens) is cut nowhere and decoded whole at its end; one that is not JSON fails there.
"""

from __future__ import annotations

from typing import Any, Final

from apis.client.listhead import HEAD_BYTES, list_items_offset

__all__ = ["BATCH_BYTES", "ListCutter"]

BATCH_BYTES: Final = 1 << 20
"""Bytes of items per page: about 300-500 pods, a paginated list's page."""

_PAGE_HEAD: Final = b'{"items":['
_PAGE_TAIL: Final = b"]}"
_FIRST_KEY_WITHIN: Final = 256
"""How far into the first item its first key must end for the cut to be known."""


class ListCutter:
    """Feed a list's body in chunks (``feed``); take pages of whole items (``page``) until None,
    then feed more; ``end`` is the rest once the body is complete."""

    def __init__(self, batch_bytes: int = BATCH_BYTES) -> None:
        self._batch_bytes = batch_bytes
        self._buf = bytearray()
        self._in_items = False
        """The head (up to ``"items":[``) was read and dropped: the buffer starts at an item."""
        self._whole = False
        """The body is not in the expected shape: it is decoded whole at its end."""
        self._marker: bytes | None = None
        self._next_try = batch_bytes
        self.metadata: dict[str, Any] = {}
        """The list's metadata where it comes before the items (else in ``end``'s page)."""

    def feed(self, chunk: bytes) -> None:
        self._buf += chunk
        if not self._in_items and not self._whole:
            self._read_head()

    def page(self) -> bytes | None:
        """The next items as ``{"items":[...]}``, once ``batch_bytes`` of them are buffered; their
        bytes are dropped here. None: not enough yet, or no cut found."""
        if not self._in_items or len(self._buf) < self._next_try:
            return None
        marker = self._marker or self._find_marker()
        cut = self._buf.rfind(marker) if marker else -1
        if cut < 0:
            self._next_try = len(self._buf) + self._batch_bytes
            return None
        page = _PAGE_HEAD + self._buf[: cut + 1] + _PAGE_TAIL
        del self._buf[: cut + 2]  # the closing brace stays with the page, the comma goes
        self._next_try = self._batch_bytes
        return bytes(page)

    def refused(self, page: bytes) -> None:
        """``page`` did not parse: it was not cut between items. Its bytes go back in front, and
        the next cut is tried once another batch has come."""
        self._buf[:0] = page[len(_PAGE_HEAD) : -len(_PAGE_TAIL)] + b","
        self._next_try = len(self._buf) + self._batch_bytes

    def end(self) -> bytes:
        """The rest of the body once it is complete: a page of the last items (and whatever follows
        them, the metadata where it comes last), or the whole body where it was never cut."""
        rest = bytes(self._buf)
        self._buf = bytearray()
        return _PAGE_HEAD + rest if self._in_items else rest

    def _read_head(self) -> None:
        found = list_items_offset(self._buf)
        if found is None:
            if len(self._buf) >= HEAD_BYTES:  # not a head in the expected shape: cut nowhere
                self._whole = True
            return
        self.metadata, offset = found
        del self._buf[:offset]
        self._in_items = True

    def _find_marker(self) -> bytes | None:
        """``},`` and the first item's opening up to its first key's colon: ``},{"metadata":``."""
        head = bytes(self._buf[:_FIRST_KEY_WITHIN])
        if not head.startswith(b'{"'):
            return None
        end = head.find(b'":', 2)
        if end < 0 or b"\\" in head[:end]:
            return None
        self._marker = b"}," + head[: end + 2]
        return self._marker
