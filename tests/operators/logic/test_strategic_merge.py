"""The strategic-merge subset a ClusterColocationProfile's patch is applied with."""

from __future__ import annotations

from typing import Any

import pytest

from operators.logic.strategic_merge import PatchError, apply, problems

POD: dict[str, Any] = {
    "metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
    "spec": {
        "containers": [
            {"name": "main", "image": "app", "env": [{"name": "A", "value": "1"}], "args": ["--x"]},
            {"name": "sidecar", "image": "envoy"},
        ],
        "tolerations": [{"key": "old"}],
        "nodeSelector": {"zone": "a", "disk": "ssd"},
    },
}

CASES = [
    pytest.param(
        {"metadata": {"labels": {"a": None, "c": "3"}}},
        ("metadata", "labels"),
        {"b": "2", "c": "3"},
        id="map-merge-null-deletes",
    ),
    pytest.param(
        {"spec": {"nodeSelector": {"$patch": "replace", "gpu": "h100"}}},
        ("spec", "nodeSelector"),
        {"gpu": "h100"},
        id="map-replace",
    ),
    pytest.param(
        {"spec": {"tolerations": [{"key": "new"}]}},
        ("spec", "tolerations"),
        [{"key": "new"}],
        id="unkeyed-list-replaced",
    ),
    pytest.param(
        {"metadata": {"finalizers": ["y", "x"]}},
        ("metadata", "finalizers"),
        ["x", "y"],
        id="finalizers-merged",
    ),
    pytest.param(
        {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}], "args": ["--y"]}]}},
        ("spec", "containers"),
        [
            {
                "name": "main",
                "image": "app",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "args": ["--y"],
            },
            {"name": "sidecar", "image": "envoy"},
        ],
        id="keyed-list-merged-by-name",
    ),
    pytest.param(
        {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}, {"name": "new", "image": "n"}]}},
        ("spec", "containers"),
        [POD["spec"]["containers"][0], {"name": "new", "image": "n"}],
        id="keyed-delete-and-append",
    ),
]


@pytest.mark.parametrize(("patch", "path", "expected"), CASES)
def test_apply(patch: dict[str, Any], path: tuple[str, str], expected: Any) -> None:
    before = repr(POD)
    out = apply(POD, patch)
    assert out[path[0]][path[1]] == expected
    assert repr(POD) == before  # the input is left alone


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (
            {"spec": {"containers": [{"image": "x"}]}},
            "spec.containers[0]: an item of this list needs its merge key 'name'",
        ),
        ({"spec": {"nodeSelector": ["a"]}}, None),  # a list over a map: replaced, as Kubernetes would
        (
            {"metadata": {"labels": {"$patch": "merge"}}},
            "spec.patch.metadata.labels.$patch: must be 'replace' or 'delete'",
        ),
        ({"spec": {"$setElementOrder/containers": []}}, "the $setElementOrder directive is not supported"),
    ],
)
def test_patches_that_do_not_fit(patch: dict[str, Any], message: str | None) -> None:
    if message is None:
        assert apply(POD, patch)["spec"]["nodeSelector"] == ["a"]
        return
    assert problems(patch) or "merge key" in message
    with pytest.raises(PatchError, match=message.replace("$", r"\$").replace("[", r"\[").replace("]", r"\]")):
        apply(POD, patch)
