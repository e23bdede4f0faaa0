"""koord-manager's ElasticQuota side against the real API server: the release notes' quota tree
applies, invalid trees are refused by ``kubectl apply`` with a message that names the quota and
the resource, the built-in root quota carries the cluster total and follows the nodes, and each
ElasticQuotaProfile keeps a tree root with the total of exactly the nodes it selects.

koord-manager is the session's process (``control_plane`` starts it). Quota names are global in a
quota tree, so every scenario uses names of its own.
"""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from apis.core import Node
from apis.extension import quota as keys
from apis.quantity import Quantity
from apis.resources import add
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.kubectl_table import header, rows
from e2e.scheduler_process import Scheduler
from e2e.workloads import get_object, list_items, make_pod, wait_for
from operators.logic.quota_totals import profile_tree_id
from scheduler.simulator import description as desc

TIMEOUT = 60.0
V07_TREE = repo_root() / "docs" / "examples" / "v0.7" / "03-elasticquota-tree.yaml"
QUOTA_NAMESPACE = "koordinator-system"
TREE_LABEL = "koord-e2e/quota-tree"


def _quota(
    name: str,
    namespace: str,
    *,
    min: dict[str, str] | None = None,
    max: dict[str, str] | None = None,
    parent: str | None = None,
    is_parent: bool = False,
    annotations: dict[str, str] | None = None,
) -> str:
    labels = {keys.LABEL_QUOTA_IS_PARENT: str(is_parent).lower()}
    if parent:
        labels[keys.LABEL_QUOTA_PARENT] = parent
    body = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations or {},
        },
        "spec": {"min": min or {}, "max": max or {}},
    }
    return yaml.safe_dump(body)


def _refused(cp: ControlPlane, manifest: str, *expected: str) -> str:
    result = cp.run_kubectl("apply", "-f", "-", input=manifest)
    assert result.returncode != 0, f"accepted:\n{manifest}"
    assert "denied the request" in result.stderr, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr
    return result.stderr


@pytest.fixture
def ns(control_plane: ControlPlane) -> Iterator[str]:
    name = f"eq-{secrets.token_hex(3)}"
    control_plane.create_namespace(name)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _defaulted(cp: ControlPlane) -> bool:
    probe = _quota("koordinator-py-mutation-probe", "default", max={"cpu": "1"})
    result = cp.run_kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-", input=probe)
    return (
        result.returncode == 0 and keys.LABEL_QUOTA_PARENT in json.loads(result.stdout)["metadata"]["labels"]
    )


@pytest.fixture
def mutating_webhook(control_plane: ControlPlane) -> ControlPlane:
    """The session waits for the validating webhook only; Kopf registers the mutating one beside it."""
    wait_for(lambda: _defaulted(control_plane), TIMEOUT, "koord-manager's mutating webhook")
    return control_plane


def test_the_v07_release_note_tree_applies_and_is_defaulted(mutating_webhook: ControlPlane) -> None:
    cp = mutating_webhook
    # test_examples applies the same file; applying it again is a no-op.
    cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(V07_TREE))
    parent = get_object(cp, "elasticquota", "parent-a")
    child = get_object(cp, "elasticquota", "child-a1")
    # Defaulting (algorithms 4.9 rule 4): the parent hangs under the root, weights follow max.
    assert parent["metadata"]["labels"][keys.LABEL_QUOTA_PARENT] == keys.ROOT_QUOTA_NAME
    weight = json.loads(child["metadata"]["annotations"][keys.ANNOTATION_SHARED_WEIGHT])
    assert {k: Quantity.parse(v) for k, v in weight.items()} == {
        "cpu": Quantity.parse("40"),
        "memory": Quantity.parse("100Gi"),
    }
    table = rows(cp.kubectl("get", "eq", "-n", "default", "parent-a", "child-a1"))
    assert (table["child-a1"]["PARENT"], table["child-a1"]["CPU-MIN"], table["child-a1"]["MEM-MIN"]) == (
        "parent-a",
        "20",
        "40Gi",
    )


def test_min_over_max_is_refused(control_plane: ControlPlane, ns: str) -> None:
    name = f"{ns}-team-a"
    _refused(
        control_plane,
        _quota(name, ns, min={"cpu": "10"}, max={"cpu": "8"}),
        f"ElasticQuota '{name}' is invalid",
        "spec.min.cpu (10) exceeds spec.max.cpu (8)",
    )


def test_an_invalid_tree_is_refused(control_plane: ControlPlane, ns: str) -> None:
    cp = control_plane
    res = {"cpu": "10", "memory": "10Gi"}
    parent, leaf, c1, c2 = (f"{ns}-{n}" for n in ("parent", "leaf", "c1", "c2"))
    cp.kubectl("apply", "-f", "-", input=_quota(parent, ns, min=res, max=res, is_parent=True))
    cp.kubectl("apply", "-f", "-", input=_quota(leaf, ns, min=res, max=res))
    cp.kubectl("apply", "-f", "-", input=_quota(c1, ns, min={"cpu": "6"}, max=res, parent=parent))

    _refused(
        cp,
        _quota(c2, ns, min={"cpu": "6"}, max=res, parent=parent),
        f"ElasticQuota '{c2}' is invalid",
        f"spec.min.cpu: the children of '{parent}' (this quota included) sum to 12, "
        f"more than spec.min.cpu of parent quota '{parent}' (10)",
    )
    _refused(
        cp,
        _quota(c2, ns, max=res, parent=leaf),
        f"ElasticQuota '{c2}' is invalid",
        f"parent quota '{leaf}' is not labelled {keys.LABEL_QUOTA_IS_PARENT}: \"true\"",
    )
    _refused(
        cp,
        _quota(c2, ns, max=res, parent=f"{ns}-nowhere"),
        f"ElasticQuota '{c2}' is invalid",
        f"parent quota '{ns}-nowhere' does not exist",
    )
    _refused(
        cp,
        _quota(c2, ns, max={"cpu": "10"}, parent=parent),
        f"ElasticQuota '{c2}' is invalid",
        f"spec.max names [cpu] but spec.max of parent quota '{parent}' names [cpu, memory]",
    )
    # A parent with children cannot become a leaf.
    _refused(
        cp,
        _quota(parent, ns, min=res, max=res, is_parent=False),
        f"ElasticQuota '{parent}' is invalid",
        f"cannot change from \"true\" while quota '{parent}' has child quotas: {c1}",
    )
    # Nor can it be deleted while it has them.
    result = cp.run_kubectl("delete", "elasticquota", parent, "-n", ns)
    assert result.returncode != 0
    assert (
        f"ElasticQuota '{parent}' cannot be deleted: quota '{parent}' has child quotas ({c1})"
        in result.stderr
    )


def test_a_quota_with_pods_cannot_become_a_parent_or_be_deleted(control_plane: ControlPlane, ns: str) -> None:
    """Koordinator's webhook rules that need the quota's pods: a pod labelled with the quota (here
    left pending: no scheduler has its name) keeps the quota a leaf and keeps it from deletion."""
    cp = control_plane
    leaf = f"{ns}-leaf"
    cp.kubectl("apply", "-f", "-", input=_quota(leaf, ns, max={"cpu": "4"}))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "worker", "namespace": ns, "labels": {keys.LABEL_QUOTA_NAME: leaf}},
        "spec": {"schedulerName": "e2e-nobody", "containers": [{"name": "main", "image": "busybox"}]},
    }
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod))
    _refused(
        cp,
        _quota(leaf, ns, min={"cpu": "4"}, max={"cpu": "4"}, is_parent=True),
        f"ElasticQuota '{leaf}' is invalid",
        f"cannot change to \"true\" while pods charge quota '{leaf}'",
        f"(quota has bound pods, isParent is forbidden to modify as true, quotaName: {leaf})",
    )
    result = cp.run_kubectl("delete", "elasticquota", leaf, "-n", ns)
    assert result.returncode != 0
    assert (
        f"ElasticQuota '{leaf}' cannot be deleted: pods still charge quota '{leaf}' (worker)" in result.stderr
    )
    assert f"(delete quota failed, quota {leaf} has 1 child pods: worker)" in result.stderr
    cp.kubectl("delete", "pod", "worker", "-n", ns, "--wait=true")
    cp.kubectl("delete", "elasticquota", leaf, "-n", ns)


def test_a_cycle_is_refused(control_plane: ControlPlane, ns: str) -> None:
    cp = control_plane
    res = {"cpu": "4"}
    upper, lower = f"{ns}-upper", f"{ns}-lower"
    cp.kubectl("apply", "-f", "-", input=_quota(upper, ns, min=res, max=res, is_parent=True))
    cp.kubectl("apply", "-f", "-", input=_quota(lower, ns, min=res, max=res, is_parent=True, parent=upper))
    _refused(
        cp,
        _quota(upper, ns, min=res, max=res, is_parent=True, parent=lower),
        f"ElasticQuota '{upper}' is invalid",
        f"'{lower}' would make a cycle: {upper} -> {lower} -> {upper}",
    )


def test_a_namespace_is_claimed_by_one_quota_only(control_plane: ControlPlane, ns: str) -> None:
    cp = control_plane
    claim = {keys.ANNOTATION_QUOTA_NAMESPACES: json.dumps([f"{ns}-apps"])}
    first, second = f"{ns}-first", f"{ns}-second"
    cp.kubectl("apply", "-f", "-", input=_quota(first, ns, max={"cpu": "1"}, annotations=claim))
    _refused(
        cp,
        _quota(second, ns, max={"cpu": "1"}, annotations=claim),
        f"ElasticQuota '{second}' is invalid",
        f"namespace '{ns}-apps' is already claimed by quota '{first}'",
    )


def _cluster_total(cp: ControlPlane, selector: str | None = None) -> dict[str, Quantity]:
    total: dict[str, Quantity] = {}
    for item in list_items(cp, "nodes", selector=selector or ""):
        total = add(total, Node.model_validate(item).status.allocatable or {})
    return total


def _annotation_total(quota: dict[str, Any]) -> dict[str, Quantity] | None:
    raw = (quota["metadata"].get("annotations") or {}).get(keys.ANNOTATION_TOTAL_RESOURCE)
    return {k: Quantity.parse(v) for k, v in json.loads(raw).items()} if raw else None


def _root_matches(cp: ControlPlane) -> dict[str, Quantity] | None:
    root = cp.read("elasticquota", keys.ROOT_QUOTA_NAME, namespace=QUOTA_NAMESPACE)
    if root is None:
        return None
    expected = _cluster_total(cp)
    spec_max = {k: Quantity.parse(v) for k, v in (root.get("spec", {}).get("max") or {}).items()}
    return expected if _annotation_total(root) == expected and spec_max == expected else None


def _exists(cp: ControlPlane, name: str) -> bool:
    return cp.read("elasticquota", name, namespace=QUOTA_NAMESPACE) is not None


def _root_with_cpu(cp: ControlPlane, cpu: Quantity) -> dict[str, Quantity] | None:
    total = _root_matches(cp)
    return total if total is not None and total["cpu"] == cpu else None


def test_built_in_quotas_exist_and_the_root_follows_the_nodes(control_plane: ControlPlane) -> None:
    cp = control_plane
    cp.kubectl(
        "apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {QUOTA_NAMESPACE}}}\n"
    )
    for name in (keys.SYSTEM_QUOTA_NAME, keys.DEFAULT_QUOTA_NAME):
        wait_for(functools.partial(_exists, cp, name), TIMEOUT, f"built-in quota {name}")
    before = wait_for(lambda: _root_matches(cp), TIMEOUT, "root quota with the cluster total")
    assert before["cpu"] > Quantity.parse("1000")

    result = cp.run_kubectl("delete", "elasticquota", keys.ROOT_QUOTA_NAME, "-n", QUOTA_NAMESPACE)
    assert result.returncode != 0
    assert f"'{keys.ROOT_QUOTA_NAME}' is a built-in quota and cannot be deleted" in result.stderr

    pool = f"eq-extra-{secrets.token_hex(2)}"
    extra = desc.ClusterDescription.model_validate(
        {
            "name": "extra",
            "nodePools": [
                {
                    "name": pool,
                    "count": 1,
                    "cpu": "3",
                    "memory": "5Gi",
                    # Keeps other scenarios' pods off it.
                    "taints": [{"key": "koord-e2e/pool", "value": pool, "effect": "NoSchedule"}],
                }
            ],
        }
    ).nodes()
    node_name = extra[0]["metadata"]["name"]
    cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(extra))
    try:
        grown = wait_for(
            lambda: _root_with_cpu(cp, before["cpu"] + Quantity.parse("3")),
            TIMEOUT,
            f"root quota total with node {node_name}",
        )
        assert grown["memory"] == before["memory"] + Quantity.parse("5Gi")
    finally:
        cp.kubectl("delete", "node", node_name, "--wait=false", check=False)
    wait_for(
        lambda: _root_with_cpu(cp, before["cpu"]),
        TIMEOUT,
        f"root quota total without node {node_name}",
    )


def test_kubectl_get_eq_shows_a_parent_a_child_and_the_default_quota_at_a_glance(
    mutating_webhook: ControlPlane, scheduler: Scheduler, ns: str
) -> None:
    """One short quantity per cell for cpu, memory and nvidia.com/gpu; the default quota's
    "unlimited" max (int64 max / 5) and the whole maps only in ``-o wide``. The USED figures are
    the ones koord-scheduler writes for a pod of 4 GPUs running in the child (a running scheduler
    would overwrite figures written by hand, so the test does not write them)."""
    cp = mutating_webhook
    cp.kubectl(
        "apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {QUOTA_NAMESPACE}}}\n"
    )
    wait_for(functools.partial(_exists, cp, keys.DEFAULT_QUOTA_NAME), TIMEOUT, "the default quota")
    parent, child = f"{ns}-gpu-team", f"{ns}-gpu-job"
    gpu = "nvidia.com/gpu"
    cp.kubectl(
        "apply",
        "-f",
        "-",
        input=_quota(
            parent,
            ns,
            min={"cpu": "64", "memory": "256Gi", gpu: "8"},
            max={"cpu": "128", "memory": "512Gi", gpu: "16"},
            is_parent=True,
        ),
    )
    cp.kubectl(
        "apply",
        "-f",
        "-",
        input=_quota(
            child,
            ns,
            min={"cpu": "16", "memory": "64Gi", gpu: "2"},
            max={"cpu": "128", "memory": "512Gi", gpu: "16"},
            parent=parent,
        ),
    )
    # A pod of 4 GPUs running in the child (created bound: the figures, not the placement, matter).
    node = list_items(cp, "nodes")[0]["metadata"]["name"]
    running = make_pod(
        "gpu-job-0", ns, cpu="12", memory="48Gi", extra={gpu: "4"}, labels={keys.LABEL_QUOTA_NAME: child}
    )
    running["spec"]["nodeName"] = node
    cp.kubectl("apply", "-f", "-", input=json.dumps(running))
    try:

        def settled() -> str | None:
            table = cp.kubectl("get", "eq", "-A")
            found = rows(table)
            # koord-scheduler writes each quota's status on its own: the parent's may come later
            if found.get(child, {}).get("CPU-USED") != "12" or found.get(parent, {}).get("CPU-USED") != "12":
                return None
            return table

        table = wait_for(settled, TIMEOUT, "koord-scheduler's used figures for the child and the parent")
        assert header(table) == [
            "NAMESPACE", "NAME", "PARENT", "CPU-MIN", "CPU-USED", "MEM-MIN", "MEM-USED", "GPU-MIN",
            "GPU-USED", "AGE",
        ]  # fmt: skip
        got = {name: row | {"AGE": ""} for name, row in rows(table).items()}
        assert got[parent] == {  # a parent's used is its children's, as Koordinator counts it
            "NAMESPACE": ns,
            "NAME": parent,
            "PARENT": keys.ROOT_QUOTA_NAME,
            "CPU-MIN": "64",
            "CPU-USED": "12",
            "MEM-MIN": "256Gi",
            "MEM-USED": "48Gi",
            "GPU-MIN": "8",
            "GPU-USED": "4",
            "AGE": "",
        }
        assert got[child] == {
            "NAMESPACE": ns,
            "NAME": child,
            "PARENT": parent,
            "CPU-MIN": "16",
            "CPU-USED": "12",
            "MEM-MIN": "64Gi",
            "MEM-USED": "48Gi",
            "GPU-MIN": "2",
            "GPU-USED": "4",
            "AGE": "",
        }
        # No min, and its "unlimited" max is not in the default view. Its used depends on what other
        # scenarios ran before, so the USED cells are not pinned.
        default = got[keys.DEFAULT_QUOTA_NAME]
        assert {k: v for k, v in default.items() if "USED" not in k} == {
            "NAMESPACE": QUOTA_NAMESPACE,
            "NAME": keys.DEFAULT_QUOTA_NAME,
            "PARENT": keys.ROOT_QUOTA_NAME,
            "CPU-MIN": "",
            "MEM-MIN": "",
            "GPU-MIN": "",
            "AGE": "",
        }
        assert "1844674407370955161" not in table

        wide = cp.kubectl("get", "eq", keys.DEFAULT_QUOTA_NAME, "-n", QUOTA_NAMESPACE, "-o", "wide")
        assert header(wide)[-6:] == ["IS-PARENT", "TREE-ID", "MIN", "MAX", "USED", "RUNTIME"]
        (default_wide,) = rows(wide).values()
        assert default_wide["MAX"] == '{"cpu":"1844674407370955161","memory":"1844674407370955161"}'
        child_wide = rows(cp.kubectl("get", "eq", child, "-n", ns, "-o", "wide"))[child]
        assert (child_wide["IS-PARENT"], child_wide["USED"]) == (
            "false",
            '{"cpu":"12","memory":"48Gi","nvidia.com/gpu":"4"}',
        )
    finally:  # its 12 CPUs are on a node other scenarios use
        cp.kubectl("delete", "pod", "gpu-job-0", "-n", ns, "--grace-period=0", "--force", check=False)


def _profile(name: str, namespace: str, quota: str, arch: str) -> dict[str, Any]:
    return {
        "apiVersion": "quota.koordinator.sh/v1alpha1",
        "kind": "ElasticQuotaProfile",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"quotaName": quota, "nodeSelector": {"matchLabels": {TREE_LABEL: arch}}},
    }


def _tree_total(cp: ControlPlane, ns: str, quota: str, arch: str) -> dict[str, Quantity] | None:
    found = cp.read("elasticquota", quota, namespace=ns)
    if found is None:
        return None
    total = _annotation_total(found)
    return total if total == _cluster_total(cp, f"{TREE_LABEL}={arch}") else None


def _wait_tree_total(cp: ControlPlane, ns: str, quota: str, arch: str) -> dict[str, Quantity]:
    return wait_for(lambda: _tree_total(cp, ns, quota, arch), TIMEOUT, f"tree root {quota} ({arch} nodes)")


def test_profiles_make_one_tree_per_architecture(mutating_webhook: ControlPlane, ns: str) -> None:
    cp = mutating_webhook
    amd, arm = f"{ns}-amd64-root", f"{ns}-arm64-root"
    profiles = [_profile("amd64-profile", ns, amd, "amd64"), _profile("arm64-profile", ns, arm, "arm64")]
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(profiles))
    for quota, arch in ((amd, "amd64"), (arm, "arm64")):
        total = _wait_tree_total(cp, ns, quota, arch)
        # e2e/clusters/e2e.yaml: two 8-CPU 16Gi nodes per architecture.
        assert (total["cpu"], total["memory"]) == (Quantity.parse("16"), Quantity.parse("32Gi"))
    root = get_object(cp, "elasticquota", amd, namespace=ns)
    labels = root["metadata"]["labels"]
    tree_id = profile_tree_id(ns, "amd64-profile")
    assert labels[keys.LABEL_QUOTA_TREE_ID] == tree_id
    assert labels[keys.LABEL_QUOTA_IS_ROOT] == "true"
    assert labels[keys.LABEL_QUOTA_IS_PARENT] == "true"
    assert root["spec"]["min"] == {"cpu": "16", "memory": "32Gi"}
    profile = get_object(cp, "elasticquotaprofile", "amd64-profile", namespace=ns)
    assert profile["metadata"]["labels"][keys.LABEL_QUOTA_TREE_ID] == tree_id

    # A quota under the tree root inherits the tree id.
    team = f"{ns}-amd64-team"
    cp.kubectl(
        "apply",
        "-f",
        "-",
        input=_quota(team, ns, min={"cpu": "4"}, max={"cpu": "8", "memory": "8Gi"}, parent=amd),
    )
    assert (
        get_object(cp, "elasticquota", team, namespace=ns)["metadata"]["labels"][keys.LABEL_QUOTA_TREE_ID]
        == tree_id
    )

    node = "quota-amd64-1"
    cp.kubectl("label", "node", node, f"{TREE_LABEL}=arm64", "--overwrite")
    try:
        assert _wait_tree_total(cp, ns, amd, "amd64")["cpu"] == Quantity.parse("8")
        assert _wait_tree_total(cp, ns, arm, "arm64")["cpu"] == Quantity.parse("24")
    finally:
        cp.kubectl("label", "node", node, f"{TREE_LABEL}=amd64", "--overwrite")
    assert _wait_tree_total(cp, ns, amd, "amd64")["cpu"] == Quantity.parse("16")
