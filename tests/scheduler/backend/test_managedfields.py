"""``strip_managed_fields``: a list's bytes less the managedFields arrays that end their object's
metadata right before its spec, and nothing else, whatever the strings around them hold; pods
decoded from the stripped bytes equal those decoded from the whole."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.client.kubernetes import _page_model
from apis.client.managedfields import strip_managed_fields
from apis.core import Pod

NASTY = [
    '}]},"spec":',
    '\\"}]},\\"spec\\":',
    ',"managedFields":[',
    "]",
    "[",
    "}",
    'k:{\\"name\\":\\"main\\"}',
    "\u00e9\U0001f600",
    "",
]

texts = st.lists(st.sampled_from(NASTY), max_size=3).map("".join)


@st.composite
def objects(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """An object of a list and whether its managedFields must go: only where they end the metadata,
    the spec comes next and no ``]`` is in their strings (else they stay, which costs nothing)."""
    metadata: dict[str, Any] = {"name": draw(texts), "labels": {"app": draw(texts)}}
    if draw(st.booleans()):
        metadata["ownerReferences"] = [{"kind": "ReplicaSet", "name": draw(texts)}]
    managed = draw(st.booleans())
    last = draw(st.booleans())
    entries = [
        {
            "manager": draw(texts),
            "operation": "Update",
            "fieldsV1": {f"f:{draw(texts)}": {".": {}, f"k:{draw(texts)}": {}}},
        }
        for _ in range(draw(st.integers(1, 3)))
    ]
    if managed:
        metadata["managedFields"] = entries
        if not last:
            metadata["finalizers"] = [draw(texts)]
    obj: dict[str, Any] = {"metadata": metadata}
    spec_next = draw(st.booleans())
    spec = {"containers": [{"name": draw(texts), "args": [draw(texts)]}], "extra": [{"a": []}]}
    status = {"conditions": [{"type": draw(texts)}]}
    if spec_next:
        obj |= {"spec": spec, "status": status}
    else:
        obj |= {"status": status, "spec": spec}
    clean = "]" not in json.dumps(entries, separators=(",", ":"))[1:-1]  # but its own close
    return obj, managed and last and spec_next and clean


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


@settings(max_examples=400, deadline=None)
@given(st.lists(objects(), max_size=6), st.booleans())
def test_only_the_managed_fields_ending_a_metadata_before_its_spec_go(
    drawn: list[tuple[dict[str, Any], bool]], as_page: bool
) -> None:
    items = [obj for obj, _ in drawn]
    data = dumps(
        {"items": items}
        if as_page
        else {"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": items}
    )
    expected = json.loads(data)
    for obj, goes in zip(expected["items"], (goes for _, goes in drawn), strict=True):
        if goes:
            del obj["metadata"]["managedFields"]
    assert json.loads(strip_managed_fields(data)) == expected


def test_a_body_without_managed_fields_is_the_same_object() -> None:
    data = dumps({"items": [{"metadata": {"name": "a"}, "spec": {}}]})
    assert strip_managed_fields(data) is data


POD = {
    "metadata": {
        "name": "bench-00000",
        "namespace": "bench",
        "uid": "f814c9af",
        "resourceVersion": "8259",
        "creationTimestamp": "2026-12-07T05:43:39Z",
        "labels": {"app": "bench"},
        "managedFields": [
            {
                "manager": "bench",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-12-07T05:43:38Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}, "f:image": {}}}}},
            },
            {
                "manager": "kwok-controller",
                "operation": "Update",
                "fieldsV1": {"f:status": {"f:podIPs": {'k:{"ip":"10.0.0.25"}': {".": {}}}}},
                "subresource": "status",
            },
        ],
    },
    "spec": {
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}],
        "nodeName": "bench-a-0",
        "schedulerName": "bench",
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],
    },
    "status": {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "qosClass": "Burstable",
    },
}


def test_pods_decode_equal_from_the_stripped_page() -> None:
    pods = [json.loads(json.dumps(POD).replace("00000", f"{i:05}")) for i in range(20)]
    data = dumps({"kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": pods})
    stripped = strip_managed_fields(data)
    assert b"managedFields" not in stripped
    page = _page_model(Pod)
    assert page.model_validate_json(stripped) == page.model_validate_json(data)
