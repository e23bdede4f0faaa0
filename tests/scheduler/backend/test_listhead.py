"""``list_metadata_ahead_of_items``: a list page's metadata read from its head, or None where a
full decode must find it."""

from __future__ import annotations

import json

from apis.client.listhead import HEAD_BYTES, list_items_offset, list_metadata_ahead_of_items


def test_the_api_servers_order_gives_the_metadata_without_the_items() -> None:
    page = (
        b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"37723",'
        b'"continue":"eyJ2Ijoi","remainingItemCount":9500},"items":[{"metadata":{"name":"p'
    )  # cut off inside the items: they are never read
    assert list_metadata_ahead_of_items(page) == {
        "resourceVersion": "37723",
        "continue": "eyJ2Ijoi",
        "remainingItemCount": 9500,
    }


def test_whitespace_between_tokens_is_allowed() -> None:
    page = json.dumps({"kind": "PodList", "metadata": {"continue": "c"}, "items": []}, indent=2).encode()
    assert list_metadata_ahead_of_items(page) == {"continue": "c"}


def test_items_first_or_no_metadata_leaves_it_to_the_full_decode() -> None:
    assert list_metadata_ahead_of_items(b'{"items":[],"metadata":{"continue":"c"}}') is None
    assert list_metadata_ahead_of_items(b'{"kind":"PodList","items":[]}') is None
    assert list_metadata_ahead_of_items(b'{"kind":"PodList"}') is None
    assert list_metadata_ahead_of_items(b'{"metadata":"not an object","items":[]}') is None


def test_what_is_not_a_json_object_gives_none() -> None:
    pages = (b"", b"[]", b"not json", b'{"kind"', b'{"kind":', b'{"kind":"PodList" "metadata":{}}', b"\xff")
    for page in pages:
        assert list_metadata_ahead_of_items(page) is None


def test_metadata_beyond_the_head_gives_none() -> None:
    padding = "x" * HEAD_BYTES
    page = json.dumps({"kind": padding, "metadata": {"continue": "c"}, "items": []}).encode()
    assert list_metadata_ahead_of_items(page) is None


def test_the_items_offset_is_the_first_byte_of_the_first_item() -> None:
    page = b'{"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"p'
    found = list_items_offset(page)
    assert found is not None
    assert found[0] == {"resourceVersion": "5"}
    assert page[found[1] :].startswith(b'{"metadata":')
    spaced = b'{ "kind" : "PodList" , "items" : [ ]}'
    assert list_items_offset(spaced) == ({}, spaced.index(b"[") + 1)


def test_no_items_offset_where_the_head_is_incomplete_or_of_another_shape() -> None:
    for page in (
        b'{"kind":"PodList","metadata":{"resourceVersion":"5"},"ite',
        b'{"kind":"PodList","items":null}',
        '{"kind":"PodListé","items":[]}'.encode(),
        b"[]",
    ):
        assert list_items_offset(page) is None, page
