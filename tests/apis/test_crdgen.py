"""crds/ is generated from the models, structural, and says what kubectl needs."""

from __future__ import annotations

from typing import Any

import pytest

from apis import crdgen
from apis.registry import ALL_RESOURCES

KINDS = {
    ("scheduling.sigs.k8s.io", "PodGroup", "Namespaced"),
    ("scheduling.sigs.k8s.io", "ElasticQuota", "Namespaced"),
    ("scheduling.koordinator.sh", "Reservation", "Cluster"),
    ("scheduling.koordinator.sh", "Device", "Cluster"),
    ("scheduling.koordinator.sh", "ClusterNetworkTopology", "Cluster"),
    ("scheduling.koordinator.sh", "PodMigrationJob", "Cluster"),
    ("quota.koordinator.sh", "ElasticQuotaProfile", "Namespaced"),
    ("slo.koordinator.sh", "NodeMetric", "Cluster"),
    ("slo.koordinator.sh", "NodeSLO", "Cluster"),
    ("config.koordinator.sh", "ClusterColocationProfile", "Cluster"),
    ("topology.node.k8s.io", "NodeResourceTopology", "Cluster"),
}


def test_registry_lists_every_koordinator_kind() -> None:
    assert {(m.crd.group, m.crd.kind, m.crd.scope) for m in ALL_RESOURCES} == KINDS


def test_checked_in_crds_match_the_models(capsys: pytest.CaptureFixture[str]) -> None:
    assert crdgen.main(["--check"]) == 0, capsys.readouterr().err


def _walk(node: Any, path: str) -> list[str]:
    problems: list[str] = []
    if not isinstance(node, dict):
        return problems
    if "$ref" in node or "allOf" in node or "oneOf" in node:
        problems.append(f"{path}: not structural ({sorted(node)})")
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        problems.append(f"{path}: anyOf outside int-or-string")
    if "type" not in node and not (
        node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
    ):
        problems.append(f"{path}: no type")
    if node.get("default", 0) is None:
        problems.append(f"{path}: default null")
    for name, sub in node.get("properties", {}).items():
        problems.extend(_walk(sub, f"{path}.{name}"))
    if isinstance(node.get("items"), dict):
        problems.extend(_walk(node["items"], f"{path}[]"))
    if isinstance(node.get("additionalProperties"), dict):
        problems.extend(_walk(node["additionalProperties"], f"{path}{{}}"))
    return problems


@pytest.mark.parametrize("model", ALL_RESOURCES, ids=lambda m: m.crd.kind)
def test_schema_is_structural(model: Any) -> None:
    assert _walk(crdgen.openapi_schema(model), model.crd.kind) == []


def _schema(kind: str) -> dict[str, Any]:
    (model,) = [m for m in ALL_RESOURCES if m.crd.kind == kind]
    return crdgen.openapi_schema(model)


def test_podgroup_min_member_is_a_non_negative_int32() -> None:
    min_member = _schema("PodGroup")["properties"]["spec"]["properties"]["minMember"]
    assert min_member == {**min_member, "type": "integer", "format": "int32", "minimum": 0}
    assert "maximum" not in min_member


def test_quantities_are_int_or_string() -> None:
    min_resources = _schema("PodGroup")["properties"]["spec"]["properties"]["minResources"]
    quantity = min_resources["additionalProperties"]
    assert quantity["x-kubernetes-int-or-string"] is True
    assert quantity["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert quantity["pattern"].startswith("^(\\+|-)?")


def test_reservation_schema_defaults_match_koordinator() -> None:
    spec = _schema("Reservation")["properties"]["spec"]
    assert spec["properties"]["ttl"]["default"] == "24h"
    assert spec["properties"]["allocateOnce"]["default"] is True
    assert set(spec["required"]) == {"template", "owners"}
    assert spec["properties"]["template"]["x-kubernetes-preserve-unknown-fields"] is True


def test_crd_metadata() -> None:
    crds = {m.crd.kind: crdgen.crd_for(m) for m in ALL_RESOURCES}
    pg = crds["PodGroup"]
    assert pg["metadata"]["annotations"]["api-approved.kubernetes.io"]
    assert pg["spec"]["names"]["shortNames"] == ["pg", "pgs"]
    assert "subresources" not in pg["spec"]["versions"][0]
    assert [c["name"] for c in pg["spec"]["versions"][0]["additionalPrinterColumns"]] == [
        "MINMEMBER",
        "PHASE",
        "SCHEDULED",
        "AGE",
    ]
    assert crds["Reservation"]["spec"]["versions"][0]["subresources"] == {"status": {}}
    assert crds["PodMigrationJob"]["spec"]["names"]["shortNames"] == ["pmj"]
    assert crds["ElasticQuotaProfile"]["spec"]["names"]["shortNames"] == ["eqp"]


def test_noderesourcetopology_serves_both_upstream_versions_and_stores_v1alpha2() -> None:
    from apis.topology import NodeResourceTopology

    crd = crdgen.crd_for(NodeResourceTopology)
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    assert sorted(versions) == ["v1alpha1", "v1alpha2"]
    assert [name for name, v in versions.items() if v["storage"]] == ["v1alpha2"]
    assert all(v["served"] for v in versions.values())
    assert crd["spec"]["names"]["shortNames"] == ["node-res-topo"]
    assert "&id" not in crdgen.render(NodeResourceTopology)
