"""Handlers say "not yet" with kopf.TemporaryError and "invalid" with kopf.PermanentError, once per
problem, instead of logging failures away. Each handler is called directly with a fake body."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from typing import Any

import aiohttp
import kopf
import pytest
from kubernetes_asyncio import client

from apis.features import FeatureGates
from apis.scheduling.elasticquota import ElasticQuota
from operators.config import ManagerConfig
from operators.handlers import (
    builtin_quotas,
    elasticquota,
    elasticquotaprofile,
    errors,
    networktopology,
    podgroup,
)


def api_exception(status: int, message: str) -> client.ApiException:
    exc = client.ApiException(status=status, reason="Reason")
    exc.body = json.dumps({"kind": "Status", "message": message})
    return exc


def raising(exc: BaseException) -> None:
    with errors.api_errors("create the tree root quota team/a", delay=3):
        raise exc


@pytest.mark.parametrize(
    "status",
    [404, 409, 429, 500, 503],
    ids=["namespace-not-there-yet", "conflict", "throttled", "server-error", "unavailable"],
)
def test_api_errors_that_may_pass_are_temporary(status: int) -> None:
    with pytest.raises(kopf.TemporaryError) as caught:
        raising(api_exception(status, "etcd is busy"))
    assert caught.value.delay == 3
    assert str(caught.value) == (
        f"cannot create the tree root quota team/a yet (HTTP {status}: etcd is busy); retrying in 3s"
    )


def test_an_unreachable_api_server_is_temporary() -> None:
    refused = aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:6443")
    with pytest.raises(kopf.TemporaryError, match="the API server is unreachable") as caught:
        raising(refused)
    assert caught.value.delay == 3


def test_a_refused_write_is_permanent_and_carries_the_servers_reason() -> None:
    with pytest.raises(kopf.PermanentError) as caught:
        raising(api_exception(422, 'admission webhook denied the request: min exceeds max for "cpu"'))
    assert str(caught.value) == (
        "cannot create the tree root quota team/a: HTTP 422: "
        'admission webhook denied the request: min exceeds max for "cpu"'
    )
    assert not isinstance(caught.value, kopf.TemporaryError)


def test_a_forbidden_call_names_the_missing_permission() -> None:
    with pytest.raises(kopf.PermanentError, match="ClusterRole lacks this permission"):
        raising(api_exception(403, 'elasticquotas is forbidden: cannot "create"'))


def test_raise_once_reports_each_distinct_problem_once() -> None:
    memo: dict[str, Any] = {}
    problem = kopf.PermanentError("bad layer")
    with pytest.raises(kopf.PermanentError):
        errors.raise_once(memo, "spec", problem)
    errors.raise_once(memo, "spec", kopf.PermanentError("bad layer"))  # the same again: quiet
    with pytest.raises(kopf.PermanentError, match="another"):
        errors.raise_once(memo, "spec", kopf.PermanentError("another"))
    errors.raise_once(memo, "spec", None)  # fixed
    with pytest.raises(kopf.PermanentError, match="another"):
        errors.raise_once(memo, "spec", kopf.PermanentError("another"))  # back again: said again


# ClusterNetworkTopology ----------------------------------------------------------------------


def topology_body(items: list[dict[str, Any]]) -> kopf.Body:
    return kopf.Body(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "ClusterNetworkTopology",
            "metadata": {"name": "default"},
            "spec": {"networkTopologySpec": items},
        }
    )


def sync_topology(body: kopf.Body, memo: dict[str, Any]) -> kopf.Patch:
    patch = kopf.Patch()
    asyncio.run(
        networktopology.sync_detail_status(body=body, patch=patch, memo=memo, node_topology_labels={})
    )
    return patch


def test_a_topology_whose_layers_do_not_chain_is_a_permanent_error_once() -> None:
    broken = topology_body([{"topologyLayer": "BlockLayer", "labelKey": ["b"]}])  # no NodeTopologyLayer
    memo: dict[str, Any] = {}
    with pytest.raises(
        kopf.PermanentError,
        match=r"no topology tree: spec\.networkTopologySpec: NodeTopologyLayer is missing",
    ):
        sync_topology(broken, memo)
    assert not sync_topology(broken, memo)  # the next interval: quiet, nothing written


def test_a_topology_that_does_not_parse_names_the_field() -> None:
    with pytest.raises(
        kopf.PermanentError, match=r"ClusterNetworkTopology is invalid: spec\.networkTopologySpec"
    ):
        sync_topology(topology_body("not-a-list"), {})  # type: ignore[arg-type]


def test_a_fixed_topology_is_built_and_clears_the_report() -> None:
    memo: dict[str, Any] = {}
    good = topology_body([{"topologyLayer": "NodeTopologyLayer"}])
    sync_topology(good, memo)
    assert memo[errors._MEMO_KEY] == {}


# PodGroup ------------------------------------------------------------------------------------


def test_a_podgroup_that_does_not_parse_is_a_permanent_error_naming_the_field() -> None:
    sync = podgroup.make_sync(ManagerConfig())
    body = kopf.Body(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "default"},
            "spec": {"minMember": "many"},
        }
    )
    memo: dict[str, Any] = {}
    kwargs = {"body": body, "namespace": "default", "name": "pg", "memo": memo, "podgroup_members": {}}
    with pytest.raises(kopf.PermanentError, match=r"PodGroup is invalid: spec\.minMember"):
        asyncio.run(sync(patch=kopf.Patch(), **kwargs))
    patch = kopf.Patch()
    asyncio.run(sync(patch=patch, **kwargs))
    assert not patch


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_status_patch_leaves_koord_schedulers_conditions_alone() -> None:
    """The manager's status is computed from the body it read; the Schedulable condition is
    koord-scheduler's (what-if advice) and may have been written since, so the manager's merge
    patch must neither carry nor remove it."""
    sync = podgroup.make_sync(ManagerConfig())
    body = kopf.Body(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "default", "creationTimestamp": _now()},
            "spec": {"minMember": 2},
        }
    )
    patch = kopf.Patch()
    kwargs = {"body": body, "namespace": "default", "name": "pg", "memo": {}, "podgroup_members": {}}
    asyncio.run(sync(patch=patch, **kwargs))
    assert patch["status"]["phase"] == "Pending"
    assert "conditions" not in patch["status"]


# ElasticQuotaProfile and the built-in quotas --------------------------------------------------


class FailingQuotas:
    """A QuotaClient whose every call fails with ``exc``."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.calls = 0

    async def get(self, namespace: str, name: str) -> ElasticQuota | None:
        self.calls += 1
        raise self.exc

    async def create(self, quota: ElasticQuota) -> bool:
        self.calls += 1
        raise self.exc

    async def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.calls += 1
        raise self.exc


class NoPods:
    """A PodClient that finds no pod anywhere."""

    async def labelled(self, key: str, value: str) -> list[str]:
        return []

    async def any_in(self, namespace: str) -> bool:
        return False


def profile_body() -> kopf.Body:
    return kopf.Body(
        {
            "apiVersion": "quota.koordinator.sh/v1alpha1",
            "kind": "ElasticQuotaProfile",
            "metadata": {"name": "p", "namespace": "team"},
            "spec": {"quotaName": "team-root", "nodeSelector": {}},
        }
    )


async def sync_profile(quotas: FailingQuotas, memo: dict[str, Any]) -> None:
    trees = elasticquotaprofile.ProfileTrees(quotas)  # type: ignore[arg-type]
    await trees.sync(
        body=profile_body(),
        namespace="team",
        name="p",
        patch=kopf.Patch(),
        memo=memo,
        logger=logging.getLogger("test"),
        node_capacity={},
        elastic_quotas={},
    )


async def test_a_profile_retries_while_the_api_server_is_unreachable() -> None:
    quotas = FailingQuotas(aiohttp.ClientConnectionError("connection refused"))
    with pytest.raises(
        kopf.TemporaryError, match="cannot read the tree root quota team/team-root yet"
    ) as caught:
        await sync_profile(quotas, {})
    assert caught.value.delay == errors.RETRY_DELAY_SECONDS


async def test_a_profile_whose_tree_root_is_refused_says_so_once() -> None:
    class Refusing(FailingQuotas):
        async def get(self, namespace: str, name: str) -> ElasticQuota | None:
            return None

    quotas = Refusing(api_exception(422, "ElasticQuota 'team-root' is invalid: spec.max: negative"))
    memo: dict[str, Any] = {}
    with pytest.raises(
        kopf.PermanentError, match="cannot create the tree root quota team/team-root: HTTP 422"
    ):
        await sync_profile(quotas, memo)
    await sync_profile(quotas, memo)  # the same refusal next interval: quiet
    assert quotas.calls == 2


async def test_built_in_quotas_retry_while_the_api_server_is_unreachable() -> None:
    quotas = FailingQuotas(aiohttp.ClientConnectionError("connection refused"))
    built_in = builtin_quotas.BuiltInQuotas(ManagerConfig(), quotas)  # type: ignore[arg-type]
    with pytest.raises(kopf.TemporaryError, match="koordinator-system/koordinator-root-quota yet"):
        await built_in.on_namespace(node_capacity={}, elastic_quotas={}, logger=logging.getLogger("t"))


async def test_built_in_quotas_in_the_index_need_no_api_call() -> None:
    quotas = FailingQuotas(AssertionError("no API call expected"))
    built_in = builtin_quotas.BuiltInQuotas(ManagerConfig(), quotas)  # type: ignore[arg-type]
    index = {
        name: [ElasticQuota.model_validate({"metadata": {"name": name, "namespace": "koordinator-system"}})]
        for name in builtin_quotas._BUILT_IN
    }
    await built_in.on_namespace(node_capacity={}, elastic_quotas=index, logger=logging.getLogger("t"))
    assert quotas.calls == 0


# ElasticQuota admission ----------------------------------------------------------------------


async def test_admission_that_cannot_read_the_parent_refuses_with_a_reason_to_retry() -> None:
    class Unreachable(FailingQuotas):
        async def find(self, name: str) -> ElasticQuota | None:
            self.calls += 1
            raise aiohttp.ClientConnectionError("connection refused")

    admission = elasticquota.QuotaAdmission(Unreachable(AssertionError()), NoPods())  # type: ignore[arg-type]
    body = kopf.Body(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {
                "name": "child",
                "namespace": "team",
                "labels": {"quota.scheduling.koordinator.sh/parent": "team-parent"},
            },
            "spec": {"max": {"cpu": "4"}},
        }
    )
    with pytest.raises(kopf.AdmissionError) as caught:
        await admission.validate(body=body, old=None, operation="CREATE", elastic_quotas={})
    assert caught.value.code == 503
    assert str(caught.value).startswith(
        "koord-manager cannot read the parent quota 'team-parent' to judge this request: "
        "the API server is unreachable"
    )
    assert str(caught.value).endswith("; try again")


class SomePods:
    """A PodClient over fixed pods: (namespace, name, quota label or None)."""

    def __init__(self, pods: list[tuple[str, str, str | None]]) -> None:
        self.pods = pods
        self.calls = 0

    async def labelled(self, key: str, value: str) -> list[str]:
        self.calls += 1
        assert key == "quota.scheduling.koordinator.sh/name"
        return [name for _, name, quota in self.pods if quota == value]

    async def any_in(self, namespace: str) -> bool:
        self.calls += 1
        return any(ns == namespace for ns, _, _ in self.pods)


def quota_body(name: str, *, is_parent: bool, namespaces: str | None = None) -> kopf.Body:
    annotations = {"quota.scheduling.koordinator.sh/namespaces": namespaces} if namespaces else {}
    return kopf.Body(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {
                "name": name,
                "namespace": "team",
                "labels": {"quota.scheduling.koordinator.sh/is-parent": str(is_parent).lower()},
                "annotations": annotations,
            },
            "spec": {"max": {"cpu": "4"}},
        }
    )


async def test_a_quota_that_pods_name_cannot_be_deleted_in_koordinators_words() -> None:
    pods = SomePods([("apps", f"p{i}", "team-a") for i in range(3)] + [("apps", "other", "team-b")])
    admission = elasticquota.QuotaAdmission(FailingQuotas(AssertionError()), pods)  # type: ignore[arg-type]
    with pytest.raises(kopf.AdmissionError) as caught:
        await admission.validate(
            body=quota_body("team-a", is_parent=False), old=None, operation="DELETE", elastic_quotas={}
        )
    assert caught.value.code == 422
    assert str(caught.value) == (
        "ElasticQuota 'team-a' cannot be deleted: pods still charge quota 'team-a' (p0, p1, p2): delete "
        "them or move them to another quota first (delete quota failed, quota team-a has 3 child pods: "
        "p0, p1, ...)"
    )
    await admission.validate(
        body=quota_body("team-c", is_parent=False), old=None, operation="DELETE", elastic_quotas={}
    )


@pytest.mark.parametrize(
    ("pods", "namespaces"),
    [
        ([("apps", "p", "team-a")], None),  # labelled with the quota
        ([("team-a", "p", None)], None),  # in the namespace named like the quota
        ([("apps", "p", None)], '["apps"]'),  # in a namespace its annotation lists
    ],
    ids=["label", "namespace", "annotation"],
)
async def test_a_quota_with_pods_cannot_become_a_parent(
    pods: list[tuple[str, str, str | None]], namespaces: str | None
) -> None:
    client = SomePods(pods)
    admission = elasticquota.QuotaAdmission(FailingQuotas(AssertionError()), client)  # type: ignore[arg-type]
    old = quota_body("team-a", is_parent=False, namespaces=namespaces)
    with pytest.raises(kopf.AdmissionError) as caught:
        await admission.validate(
            body=quota_body("team-a", is_parent=True, namespaces=namespaces),
            old=old,
            operation="UPDATE",
            elastic_quotas={},
        )
    assert str(caught.value).endswith(
        "(quota has bound pods, isParent is forbidden to modify as true, quotaName: team-a)"
    )
    client.calls = 0
    await admission.validate(
        body=quota_body("team-a", is_parent=False, namespaces=namespaces),
        old=old,
        operation="UPDATE",
        elastic_quotas={},
    )
    assert client.calls == 0  # pods are only looked up when the quota is about to become a parent


@pytest.mark.parametrize("gate", [False, True], ids=["off", "on"])
async def test_the_guarantee_rule_applies_at_admission_with_the_gate_only(gate: bool) -> None:
    """Rule 11 needs ElasticQuotaGuaranteeUsage (koord-manager --feature-gates), as in Koordinator; the
    min sums (rule 10) pass here, only the guarantee does not."""
    root = ElasticQuota.model_validate(
        {
            "metadata": {
                "name": "tree-root",
                "namespace": "team",
                "labels": {
                    "quota.scheduling.koordinator.sh/is-parent": "true",
                    "quota.scheduling.koordinator.sh/is-root": "true",
                    "quota.scheduling.koordinator.sh/tree-id": "t1",
                },
                "annotations": {"quota.scheduling.koordinator.sh/guaranteed": '{"cpu":"4"}'},
            },
            "spec": {"min": {"cpu": "4"}, "max": {"cpu": "8"}},
        }
    )
    body = kopf.Body(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {
                "name": "leaf",
                "namespace": "team",
                "labels": {
                    "quota.scheduling.koordinator.sh/parent": "tree-root",
                    "quota.scheduling.koordinator.sh/tree-id": "t1",
                },
            },
            "spec": {"min": {"cpu": "3"}, "max": {"cpu": "8"}},
        }
    )
    # A sibling with no min whose pods hold 2 (guaranteed 2): 3 + 2 is more than the root's 4.
    sibling = ElasticQuota.model_validate(
        {
            "metadata": {
                "name": "busy",
                "namespace": "team",
                "labels": {
                    "quota.scheduling.koordinator.sh/parent": "tree-root",
                    "quota.scheduling.koordinator.sh/tree-id": "t1",
                },
                "annotations": {"quota.scheduling.koordinator.sh/guaranteed": '{"cpu":"2"}'},
            },
            "spec": {"max": {"cpu": "8"}},
        }
    )
    features = FeatureGates(elastic_quota_guarantee_usage=gate)
    admission = elasticquota.QuotaAdmission(FailingQuotas(AssertionError()), NoPods(), features)  # type: ignore[arg-type]
    index: Any = {"tree-root": [root], "busy": [sibling]}
    if not gate:
        await admission.validate(body=body, old=None, operation="CREATE", elastic_quotas=index)
        return
    with pytest.raises(kopf.AdmissionError) as caught:
        await admission.validate(body=body, old=None, operation="CREATE", elastic_quotas=index)
    assert str(caught.value).endswith("(tree root quota tree-root can't guarantee for min)")
