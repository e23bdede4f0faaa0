"""docs/examples is valid without a cluster: unique names, and every Koordinator object passes
the same model and annotation checks koord-manager's admission webhook applies."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.registry import ALL_RESOURCES
from operators.logic import admission

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
MODELS = {(m.crd.api_version, m.crd.kind): m for m in ALL_RESOURCES}


def _objects() -> list[tuple[str, dict[str, Any]]]:
    return [
        (str(path.relative_to(EXAMPLES)), doc)
        for path in sorted(EXAMPLES.glob("v*/*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


OBJECTS = _objects()


def test_every_example_object_has_a_unique_identity() -> None:
    identities = Counter(
        (doc["kind"], doc["metadata"].get("namespace"), doc["metadata"]["name"]) for _, doc in OBJECTS
    )
    assert [identity for identity, count in identities.items() if count > 1] == []


KOORDINATOR_OBJECTS = [(f, d) for f, d in OBJECTS if (d["apiVersion"], d["kind"]) in MODELS]


@pytest.mark.parametrize(
    "doc",
    [d for _, d in KOORDINATOR_OBJECTS],
    ids=[f"{f}:{d['metadata']['name']}" for f, d in KOORDINATOR_OBJECTS],
)
def test_koordinator_examples_pass_admission(doc: dict[str, Any]) -> None:
    result = admission.review(MODELS[(doc["apiVersion"], doc["kind"])], doc)
    assert result.errors == []
    assert result.warnings == []


def test_examples_cover_the_kinds_of_the_release_notes() -> None:
    kinds = {d["kind"] for _, d in KOORDINATOR_OBJECTS}
    assert {
        "PodGroup",
        "ElasticQuota",
        "ElasticQuotaProfile",
        "Reservation",
        "Device",
        "ClusterNetworkTopology",
    } <= kinds
