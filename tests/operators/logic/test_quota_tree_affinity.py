"""The quota tree's node affinity injected into pods (Koordinator's multi_quota_tree_affinity),
through the pod mutating handler with a fake quota client, as the API server would call it."""

from __future__ import annotations

import copy
from typing import Any, cast

import jsonpatch
import kopf
import pytest

from apis.core import Pod
from apis.meta import LabelSelector
from apis.quota.elasticquotaprofile import ElasticQuotaProfile
from apis.scheduling.elasticquota import ElasticQuota
from operators.handlers.pod_tree_affinity import TreeAffinity
from operators.logic.quota_tree_affinity import with_tree_affinity

TREE = "quota.scheduling.koordinator.sh/tree-id"
SELECTOR = {
    "matchLabels": {"pool": "arm64", "arch": "arm64"},
    "matchExpressions": [{"key": "gpu", "operator": "Exists"}],
}
INJECTED = [
    {"key": "arch", "operator": "In", "values": ["arm64"]},
    {"key": "pool", "operator": "In", "values": ["arm64"]},
    {"key": "gpu", "operator": "Exists"},
]


class FakeQuotas:
    """The reads the handler makes: quotas by namespace/name or by name, profiles by tree id."""

    def __init__(self, quotas: list[ElasticQuota], profiles: list[ElasticQuotaProfile]) -> None:
        self.quotas, self.profiles = quotas, profiles

    async def get(self, namespace: str, name: str) -> ElasticQuota | None:
        return next(
            (q for q in self.quotas if (q.metadata.namespace, q.metadata.name) == (namespace, name)), None
        )

    async def find(self, name: str) -> ElasticQuota | None:
        return next((q for q in self.quotas if q.metadata.name == name), None)

    async def profiles_of_tree(self, tree_id: str) -> list[ElasticQuotaProfile]:
        return [p for p in self.profiles if (p.metadata.labels or {}).get(TREE) == tree_id]


def quota(name: str, namespace: str, tree: str | None) -> ElasticQuota:
    labels = {TREE: tree} if tree else {}
    return ElasticQuota.model_validate({"metadata": {"name": name, "namespace": namespace, "labels": labels}})


def world() -> FakeQuotas:
    profile = ElasticQuotaProfile.model_validate(
        {
            "metadata": {"name": "arm", "namespace": "kube-system", "labels": {TREE: "t-arm"}},
            "spec": {"quotaName": "arm-root", "nodeSelector": SELECTOR},
        }
    )
    return FakeQuotas(
        [quota("arm-team", "arm-team", "t-arm"), quota("plain", "plain", None)],
        [profile],
    )


def pod_body(namespace: str, labels: dict[str, str] | None = None, affinity: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if affinity is not None:
        spec["affinity"] = affinity
    return {"metadata": {"name": "p", "namespace": namespace, "labels": labels or {}}, "spec": spec}


async def mutated(body: dict[str, Any], quotas: FakeQuotas | None = None) -> list[dict[str, Any]]:
    """The JSON patch the webhook answers with."""
    patch = kopf.Patch()
    raw = cast(kopf.RawBody, body)
    handler = TreeAffinity(quotas or world())  # type: ignore[arg-type]
    await handler.mutate(body=kopf.Body(raw), patch=patch)
    return [dict(op) for op in patch.as_json_patch(kopf.Body(raw))]


async def admitted(body: dict[str, Any]) -> dict[str, Any]:
    """The pod as the API server stores it after the patch."""
    result: dict[str, Any] = jsonpatch.apply_patch(body, await mutated(body))
    return result


async def test_a_pod_in_a_profile_trees_quota_gets_the_profiles_node_selector_as_required_affinity() -> None:
    ops = await mutated(pod_body("arm-team"))
    assert ops == [
        {
            "op": "add",
            "path": "/spec/affinity",
            "value": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": INJECTED}]
                    }
                }
            },
        }
    ]


async def test_the_quota_label_names_the_quota_in_any_namespace() -> None:
    after = await admitted(pod_body("elsewhere", {"quota.scheduling.koordinator.sh/name": "arm-team"}))
    assert after["spec"]["affinity"]["nodeAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": INJECTED}]
        }
    }


@pytest.mark.parametrize(
    ("namespace", "labels"),
    [
        ("plain", {}),  # a quota of the default tree
        ("nowhere", {}),  # no quota named like the namespace
        ("arm-team", {"quota.scheduling.koordinator.sh/name": "unknown"}),  # the label wins, finds none
    ],
    ids=["default-tree", "no-quota", "unknown-quota-label"],
)
async def test_pods_outside_profile_trees_are_left_alone(namespace: str, labels: dict[str, str]) -> None:
    assert await mutated(pod_body(namespace, labels)) == []


async def test_a_tree_without_a_profile_is_left_alone() -> None:
    quotas = world()
    quotas.profiles = []
    assert await mutated(pod_body("arm-team"), quotas) == []


async def test_the_requirements_are_anded_into_every_existing_term_and_the_rest_is_kept() -> None:
    affinity: dict[str, Any] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}}
            ],
        },
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]},
    }
    after = await admitted(pod_body("arm-team", affinity=copy.deepcopy(affinity)))
    terms = after["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms = terms["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, *INJECTED]},
        {
            "matchExpressions": INJECTED,
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
        },
    ]
    kept = after["spec"]["affinity"]
    assert kept["podAntiAffinity"] == affinity["podAntiAffinity"]
    assert (
        kept["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        == (affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"])
    )


async def test_a_pod_created_again_with_the_injected_affinity_is_not_changed() -> None:
    once = await admitted(pod_body("arm-team"))
    assert await mutated(once) == []


def test_an_empty_selector_adds_nothing() -> None:
    pod = Pod.model_validate(pod_body("arm-team"))
    assert with_tree_affinity(pod, LabelSelector()) is None
