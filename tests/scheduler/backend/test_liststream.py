"""``ListCutter``: a list body fed in chunks of any sizes is cut into pages that hold exactly the
body's items, in order, whatever the item's strings and nested arrays hold; a body of another
shape is handed out whole at its end."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.client.liststream import ListCutter

NASTY = [
    '},{"metadata":',
    '\\"},{\\"metadata\\":',
    "]}",
    '"items":[',
    "\u00e9\u6f22\U0001f600",
    "\\",
    "",
]


def item(i: int, text: str = "", nested: int = 0) -> dict[str, Any]:
    """A pod-shaped item; ``nested`` objects in an array that start with the same key as items do."""
    return {
        "metadata": {"name": f"p{i}", "annotations": {"note": text}},
        "spec": {"containers": [{"name": "a", "args": [text]}, {"name": "b"}]},
        "status": {"extra": [{"metadata": {"n": k}} for k in range(nested)]},
    }


def body(items: list[dict[str, Any]], *, rv: str = "42", metadata_first: bool = True) -> bytes:
    meta = {"resourceVersion": rv}
    doc: dict[str, Any] = (
        {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}
        if metadata_first
        else {"kind": "PodList", "items": items, "metadata": meta}
    )
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def cut(data: bytes, sizes: list[int], batch_bytes: int) -> tuple[list[Any], dict[str, Any], int, int]:
    """Feed ``data`` in chunks of ``sizes`` (cycled); every page's items, the metadata, how many
    pages came before the end and how many were refused (a page that does not parse is, as the
    backend does)."""
    cutter = ListCutter(batch_bytes)
    got: list[Any] = []
    pages = refused = 0
    pos = i = 0
    while pos < len(data):
        size = sizes[i % len(sizes)]
        cutter.feed(data[pos : pos + size])
        pos, i = pos + size, i + 1
        while (page := cutter.page()) is not None:
            try:
                decoded = json.loads(page)
            except ValueError:
                cutter.refused(page)
                refused += 1
                break
            assert set(decoded) == {"items"}
            got.extend(decoded["items"])
            pages += 1
    last = json.loads(cutter.end())
    got.extend(last["items"])
    return got, cutter.metadata or last.get("metadata", {}), pages, refused


def test_every_two_chunk_split_gives_the_items_and_the_metadata() -> None:
    items = [item(i, NASTY[i % len(NASTY)], nested=i % 3) for i in range(6)]
    data = body(items)
    for split in range(len(data) + 1):
        got, meta, _, _ = cut(data, [split or 1, len(data)], batch_bytes=64)
        assert got == items, split
        assert meta == {"resourceVersion": "42"}


def test_one_byte_chunks_cut_at_every_item() -> None:
    items = [item(i, NASTY[i % len(NASTY)]) for i in range(20)]
    got, meta, pages, refused = cut(body(items), [1], batch_bytes=1)
    assert got == items
    assert meta == {"resourceVersion": "42"}
    assert (pages, refused) == (19, 0)  # every item but the last, which waits for the end


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.sampled_from(NASTY) | st.text(max_size=12), min_size=0, max_size=25),
    nested=st.lists(st.integers(0, 3), min_size=1, max_size=5),
    sizes=st.lists(st.integers(1, 700), min_size=1, max_size=8),
    batch_bytes=st.integers(1, 2000),
    metadata_first=st.booleans(),
)
def test_any_chunking_gives_exactly_the_items_of_the_whole_body(
    texts: list[str], nested: list[int], sizes: list[int], batch_bytes: int, metadata_first: bool
) -> None:
    items = [item(i, text, nested[i % len(nested)]) for i, text in enumerate(texts)]
    data = body(items, metadata_first=metadata_first)
    got, meta, _, _ = cut(data, sizes, batch_bytes)
    assert got == json.loads(data)["items"]
    assert meta == {"resourceVersion": "42"}


def test_a_cut_inside_a_nested_array_is_refused_and_the_items_still_come_whole() -> None:
    # Items of one object each with a long nested array of objects that open as items do: every
    # cut the cutter tries at the end of a batch falls inside an item first.
    items = [item(i, nested=40) for i in range(5)]
    data = body(items)
    got, _, pages, refused = cut(data, [97], batch_bytes=300)
    assert got == items
    assert pages > 0
    assert refused > 0


def test_a_body_in_another_shape_is_handed_out_whole_at_its_end() -> None:
    items = [item(0), item(1)]
    pretty = json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": items}, indent=1)
    for data in (pretty.encode(), b'{"kind":"PodList","items":null}', b"not json"):
        cutter = ListCutter(1)
        for b in data:
            cutter.feed(bytes([b]))
            assert cutter.page() is None
        end = cutter.end()
        assert end == data or json.loads(end)["items"] == items == json.loads(data)["items"]


def test_an_empty_list_ends_with_no_items() -> None:
    got, meta, pages, refused = cut(body([]), [1], batch_bytes=1)
    assert (got, meta, pages, refused) == ([], {"resourceVersion": "42"}, 0, 0)


def test_a_truncated_body_ends_in_what_does_not_parse() -> None:
    data = body([item(0), item(1), item(2)])
    cutter = ListCutter(1)
    cutter.feed(data[: len(data) - 30])
    while cutter.page() is not None:
        pass
    end = cutter.end()
    try:
        json.loads(end)
    except ValueError:
        return
    raise AssertionError(f"a truncated body parsed: {end!r}")
