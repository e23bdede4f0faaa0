"""The Node webhook handler turns the mutation into the JSON patch the API server applies."""

from __future__ import annotations

from typing import Any

import kopf
import pytest

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


@pytest.mark.parametrize("ratio", ['{"cpu": 1e308}', '{"cpu": Infinity}'])
def test_a_huge_or_infinite_ratio_lets_the_status_update_through_unamplified(ratio: str) -> None:
    raw: Any = _node({RATIO: ratio}, {"cpu": "4", "memory": "8Gi"})
    body = kopf.Body(raw)
    patch = kopf.Patch(body=body)
    warnings: list[str] = []
    mutate(body=body, old=kopf.Body(raw), patch=patch, warnings=warnings)  # raises nothing
    assert all(not op["path"].startswith("/status") for op in patch.as_json_patch())
    assert any(RATIO in w for w in warnings)


def test_an_unexpected_failure_is_a_warning_not_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object) -> None:
        raise OverflowError("cannot convert float infinity to integer")

    monkeypatch.setattr("operators.handlers.node_amplification.amplify_status", broken)
    raw: Any = _node({RATIO: '{"cpu":1.5}'}, {"cpu": "4"})
    body = kopf.Body(raw)
    patch = kopf.Patch(body=body)
    warnings: list[str] = []
    mutate(body=body, old=None, patch=patch, warnings=warnings)
    assert patch.as_json_patch() == []
    assert warnings == [
        "allocatable not amplified: OverflowError: 'cannot convert float infinity to integer'"
    ]
