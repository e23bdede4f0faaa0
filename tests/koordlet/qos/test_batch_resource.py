"""The BatchResource rule (Koordinator's hooks/batchresource): a BE pod's cpu.shares, CFS quota and
memory limit from its batch resources, per container and summed for the pod."""

from __future__ import annotations

import json

import pytest

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.qos.batch_resource import (
    BatchCgroups,
    BatchQuotaRule,
    batch_quota_rule,
    batch_spec,
    container_batch_cgroups,
    milli_cpu_to_shares,
    pod_batch_cgroups,
)

MI = 1024 * 1024


def be_pod(*containers: dict[str, dict[str, str]], annotations: dict[str, str] | None = None) -> Pod:
    return Pod.model_validate(
        {
            "metadata": {
                "name": "be",
                "uid": "uid-be",
                "labels": {"koordinator.sh/qosClass": "BE"},
                "annotations": annotations or {},
            },
            "spec": {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(containers)]},
            "status": {"qosClass": "BestEffort", "phase": "Running"},
        }
    )


@pytest.mark.parametrize(
    ("milli", "shares"), [(0, 2), (-1, 2), (1, 2), (500, 512), (1000, 1024), (10**9, 262144)]
)
def test_shares_are_kubelets_milli_cpu_to_shares(milli: int, shares: int) -> None:
    assert milli_cpu_to_shares(milli) == shares


def test_the_pod_sums_its_containers_and_each_container_has_its_own() -> None:
    pod = be_pod(
        {
            "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "256Mi"},
            "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "512Mi"},
        },
        {
            "requests": {"koordinator.sh/batch-cpu": "250"},
            "limits": {"koordinator.sh/batch-cpu": "500", "koordinator.sh/batch-memory": "128Mi"},
        },
        {"requests": {"cpu": "1"}},  # names no batch resource: not counted, as in Koordinator
    )
    spec = batch_spec(pod)
    assert pod_batch_cgroups(spec, BatchQuotaRule()) == BatchCgroups(768, 150_000, 640 * MI)
    assert container_batch_cgroups(spec, "c0", BatchQuotaRule()) == BatchCgroups(512, 100_000, 512 * MI)
    assert container_batch_cgroups(spec, "c1", BatchQuotaRule(ratio=2.0)) == BatchCgroups(
        256, 25_000, 128 * MI
    )
    assert container_batch_cgroups(spec, "c2", BatchQuotaRule()) is None


def test_a_container_without_a_limit_leaves_the_pod_unlimited() -> None:
    pod = be_pod(
        {"requests": {"kubernetes.io/batch-cpu": "500"}},
        {"requests": {"kubernetes.io/batch-cpu": "500"}, "limits": {"kubernetes.io/batch-cpu": "500"}},
    )
    spec = batch_spec(pod)
    assert pod_batch_cgroups(spec, BatchQuotaRule()) == BatchCgroups(1024, -1, -1)
    assert container_batch_cgroups(spec, "c0", BatchQuotaRule()) == BatchCgroups(512, -1, -1)


def test_the_annotation_gives_the_batch_resources_of_a_pod_without_a_spec() -> None:
    raw = {"containers": {"main": {"limits": {"kubernetes.io/batch-cpu": "2000"}}}}
    spec = batch_spec(be_pod(annotations={"node.koordinator.sh/extended-resource-spec": json.dumps(raw)}))
    assert container_batch_cgroups(spec, "main", BatchQuotaRule()) == BatchCgroups(2, 200_000, -1)
    with pytest.raises(InvalidAnnotation):
        batch_spec(be_pod(annotations={"node.koordinator.sh/extended-resource-spec": "{"}))


def test_the_cfs_quota_policy_of_suppression_unsets_the_quota() -> None:
    slo = NodeSLOSpec.model_validate(
        {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}
    )
    assert not batch_quota_rule(slo, KoordletFeatureGates()).enabled
    assert batch_quota_rule(slo, KoordletFeatureGates(be_cpu_suppress=False)).enabled
    assert batch_quota_rule(NodeSLOSpec(), KoordletFeatureGates(), 1.5) == BatchQuotaRule(True, 1.5)
