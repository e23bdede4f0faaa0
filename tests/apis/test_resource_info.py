"""Every root model says where its kind is served, so no caller spells group/version/plural again."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from apis.base import KoordModel, resource_info
from apis.client import backend
from apis.core import Node, Pod, PodDisruptionBudget
from apis.registry import ALL_RESOURCES


@pytest.mark.parametrize(
    ("model", "api_version", "plural", "namespaced"),
    [
        (Pod, "v1", "pods", True),
        (Node, "v1", "nodes", False),
        (PodDisruptionBudget, "policy/v1", "poddisruptionbudgets", True),
    ],
)
def test_core_kinds_declare_their_resource(
    model: type[BaseModel], api_version: str, plural: str, namespaced: bool
) -> None:
    info = resource_info(model)
    assert (info.api_version, info.plural, info.namespaced) == (api_version, plural, namespaced)


def test_custom_resources_are_read_from_their_crd() -> None:
    for model in ALL_RESOURCES:
        assert resource_info(model) is model.crd


def test_a_model_without_resource_info_is_refused() -> None:
    with pytest.raises(TypeError, match="declares no ResourceInfo"):
        resource_info(KoordModel)


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (backend.PODS, ("", "v1", "pods", "Pod", True, Pod)),
        (backend.NODES, ("", "v1", "nodes", "Node", False, Node)),
        (
            backend.PDBS,
            ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, PodDisruptionBudget),
        ),
        (backend.PODGROUPS, ("scheduling.sigs.k8s.io", "v1alpha1", "podgroups", "PodGroup", True, None)),
        (
            backend.TOPOLOGIES,
            (
                "scheduling.koordinator.sh",
                "v1alpha1",
                "clusternetworktopologies",
                "ClusterNetworkTopology",
                False,
                None,
            ),
        ),
        (
            backend.ELASTICQUOTAS,
            ("scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas", "ElasticQuota", True, None),
        ),
        (
            backend.ELASTICQUOTAPROFILES,
            ("quota.koordinator.sh", "v1alpha1", "elasticquotaprofiles", "ElasticQuotaProfile", True, None),
        ),
    ],
    ids=lambda v: getattr(v, "kind", ""),
)
def test_the_backend_resources_are_built_from_the_models_unchanged(
    resource: backend.ResourceType[BaseModel], expected: tuple[object, ...]
) -> None:
    group, version, plural, kind, namespaced, model = expected
    assert (resource.group, resource.version, resource.plural, resource.kind, resource.namespaced) == (
        group,
        version,
        plural,
        kind,
        namespaced,
    )
    if model is not None:
        assert resource.model is model
    assert resource == backend.ResourceType.of(resource.model)
