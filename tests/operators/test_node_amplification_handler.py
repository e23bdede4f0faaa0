"""The Node webhook handler turns the mutation into the JSON patch the API server applies."""

from __future__ import annotations

from typing import Any

import kopf

from operators.handlers.node_amplification import mutate

RATIO = "node.koordinator.sh/resource-amplification-ratio"
RAW = "node.koordinator.sh/raw-allocatable"


def _node(annotations: dict[str, str], allocatable: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "annotations": annotations},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def test_a_kubelet_report_is_amplified_in_the_patch() -> None:
    raw: Any = _node({RATIO: '{"cpu":1.50}'}, {"cpu": "4", "memory": "8Gi"})
    body = kopf.Body(raw)
    patch = kopf.Patch(body=body)
    warnings: list[str] = []
    mutate(body=body, old=kopf.Body(raw), patch=patch, warnings=warnings)
    ops = sorted(patch.as_json_patch(), key=lambda op: op["path"])
    assert ops == [
        {
            "op": "add",
            "path": "/metadata/annotations/node.koordinator.sh~1raw-allocatable",
            "value": '{"cpu":"4","memory":"8Gi"}',
        },
        {"op": "replace", "path": "/status/allocatable/cpu", "value": "6"},
    ]
    assert warnings == []


def test_without_a_ratio_the_raw_allocatable_is_removed_and_a_bad_ratio_warns() -> None:
    raw: Any = _node({RAW: '{"cpu":"4"}', "kwok.x-k8s.io/node": "fake"}, {"cpu": "6"})
    body = kopf.Body(raw)
    patch = kopf.Patch(body=body)
    mutate(body=body, old=None, patch=patch, warnings=[])
    assert patch.as_json_patch() == [
        {"op": "remove", "path": "/metadata/annotations/node.koordinator.sh~1raw-allocatable"}
    ]
    bad: Any = _node({RATIO: "[1.5]"}, {"cpu": "4"})
    body = kopf.Body(bad)
    warnings: list[str] = []
    mutate(body=body, old=None, patch=kopf.Patch(body=body), warnings=warnings)
    assert len(warnings) == 1
    assert RATIO in warnings[0]
