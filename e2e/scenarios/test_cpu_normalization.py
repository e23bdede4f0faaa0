"""CPU normalization and resource amplification against the real API server: koord-manager (a real
process, ``--feature-gates=NodeMutatingWebhook=true``) reads the ratio model of
``slo-controller-config``, finds the node's CPU in its NodeResourceTopology (created here as koordlet
would), annotates the node, and amplifies the allocatable that a kubelet-shaped status patch reports.

The module swaps the session's koord-manager for one with the gate on, on the same webhook port,
and puts the plain one back at the end.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.components import koord_manager, wait_for_admission
from e2e.workloads import get_object, list_items, wait_for

E2E_WEBHOOK_PORT = int(os.environ.get("KOORD_E2E_WEBHOOK_PORT", "19443"))
NODE = "cpunorm-0"
NAMESPACE = "koordinator-system"
MODEL = "Intel Xeon Platinum 8369B CPU @ 2.90GHz"
RATIO = "node.koordinator.sh/cpu-normalization-ratio"
AMPLIFICATION = "node.koordinator.sh/resource-amplification-ratio"
RAW = "node.koordinator.sh/raw-allocatable"
ENABLED = "node.koordinator.sh/cpu-normalization-enabled"

# The v1.4 release notes' ratio model (docs/examples/v1.4/04-slo-controller-config.yaml), off for the
# cluster: this test's node turns it on with the node label. Memory is amplified on that node only.
CONFIGMAP = f"""
apiVersion: v1
kind: ConfigMap
metadata: {{name: slo-controller-config, namespace: {NAMESPACE}}}
data:
  cpu-normalization-config: |
    {{
      "enable": false,
      "ratioModel": {{
        "Intel(R) Xeon(R) Platinum 8269CY CPU @ 2.50GHz": {{
          "baseRatio": 1.29, "hyperThreadEnabledRatio": 0.82,
          "turboEnabledRatio": 1.52, "hyperThreadTurboEnabledRatio": 1.0
        }},
        "{MODEL}": {{
          "baseRatio": 1.69, "hyperThreadEnabledRatio": 1.06,
          "turboEnabledRatio": 1.91, "hyperThreadTurboEnabledRatio": 1.20
        }}
      }}
    }}
  resource-amplification-config: |
    {{
      "nodeConfigs": [
        {{"name": "e2e", "nodeSelector": {{"matchLabels": {{"e2e-cpunorm": "true"}}}},
          "enable": true, "resourceAmplificationRatio": {{"memory": 1.5}}}}
      ]
    }}
"""
NODE_YAML = f"""
apiVersion: v1
kind: Node
metadata:
  name: {NODE}
  annotations: {{kwok.x-k8s.io/node: fake}}
  labels: {{type: kwok, e2e-cpunorm: "true", {ENABLED}: "true", kubernetes.io/hostname: {NODE}}}
status:
  allocatable: {{cpu: "8", memory: 16Gi, pods: "110"}}
  capacity: {{cpu: "8", memory: 16Gi, pods: "110"}}
"""
BASIC_INFO = json.dumps(
    {"cpuModel": MODEL, "hyperThreadEnabled": True, "turboEnabled": True, "vendorID": "Intel"}
)
NRT_YAML = f"""
apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata:
  name: {NODE}
  labels: {{app.kubernetes.io/managed-by: Koordinator}}
  annotations:
    node.koordinator.sh/cpu-basic-info: '{BASIC_INFO}'
zones:
- name: node-0
  type: Node
  resources:
  - {{name: cpu, capacity: "8", allocatable: "8", available: "8"}}
"""


@pytest.fixture(scope="module")
def gated_manager(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    cp = control_plane
    koord_manager(cp, webhook_port=E2E_WEBHOOK_PORT).stop()
    gated = koord_manager(
        cp, webhook_port=E2E_WEBHOOK_PORT, extra_args=("--feature-gates=NodeMutatingWebhook=true",)
    )
    gated.start()
    try:
        wait_for_admission(cp, gated)
        if cp.read("namespace", NAMESPACE) is None:
            cp.create_namespace(NAMESPACE)
        yield cp
    finally:
        for args in (
            ("configmap", "slo-controller-config", "-n", NAMESPACE),
            ("noderesourcetopology", NODE),
            ("node", NODE),
        ):
            cp.run_kubectl("delete", *args, "--ignore-not-found", "--wait=true")
        print(gated.stop())
        plain = koord_manager(cp, webhook_port=E2E_WEBHOOK_PORT)
        plain.start()
        wait_for_admission(cp, plain)


def _node(cp: ControlPlane) -> dict[str, Any]:
    return get_object(cp, "node", NODE)


def _annotations(cp: ControlPlane) -> dict[str, str]:
    annotations: dict[str, str] = _node(cp)["metadata"].get("annotations") or {}
    return annotations


def _with_ratio(cp: ControlPlane, ratio: str) -> dict[str, str] | None:
    """The node's annotations once it has ``ratio`` (and the amplification written with it)."""
    annotations = _annotations(cp)
    return annotations if annotations.get(RATIO) == ratio and AMPLIFICATION in annotations else None


def _ready(cp: ControlPlane) -> bool:
    conditions = _node(cp).get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _report(cp: ControlPlane, allocatable: dict[str, str]) -> dict[str, Any]:
    """What kubelet does: a status update with the allocatable it computed; the stored result."""
    cp.kubectl(
        "patch", "node", NODE, "--subresource=status", "--type=merge", "-p",
        json.dumps({"status": {"allocatable": allocatable}}),
    )  # fmt: skip
    return _node(cp)


def test_a_node_gets_its_ratio_and_its_allocatable_amplified(gated_manager: ControlPlane) -> None:
    cp = gated_manager
    cp.kubectl("apply", "-f", "-", input=NODE_YAML)
    wait_for(lambda: _ready(cp), 60, f"KWOK to report {NODE} Ready")
    cp.kubectl("apply", "-f", "-", input=NRT_YAML)
    cp.kubectl("apply", "-f", "-", input=CONFIGMAP)

    # hyper-threading and turbo on: hyperThreadTurboEnabledRatio
    annotations = wait_for(lambda: _with_ratio(cp, "1.20"), 60, f"{RATIO} on {NODE}")
    # the CPU ratio is the normalization ratio decided in the same reconcile
    assert annotations[AMPLIFICATION] == '{"cpu":1.20,"memory":1.50}'

    node = _report(cp, {"cpu": "8", "memory": "16Gi", "pods": "110"})
    assert node["status"]["allocatable"] == {"cpu": "9600m", "memory": "24Gi", "pods": "110"}
    assert node["status"]["capacity"] == {"cpu": "8", "memory": "16Gi", "pods": "110"}
    assert node["metadata"]["annotations"][RAW] == '{"cpu":"8","memory":"16Gi"}'

    # a status write that only carries the allocatable along (KWOK's heartbeat, koord-manager's own
    # patches) keeps it amplified from the saved raw values (the v1.6 fix)
    cp.kubectl(
        "patch", "node", NODE, "--subresource=status", "--type=merge", "-p",
        json.dumps({"status": {"nodeInfo": {"kernelVersion": "e2e"}}}),
    )  # fmt: skip
    node = _node(cp)
    assert node["status"]["nodeInfo"]["kernelVersion"] == "e2e"
    assert node["status"]["allocatable"] == {"cpu": "9600m", "memory": "24Gi", "pods": "110"}
    assert node["metadata"]["annotations"][RAW] == '{"cpu":"8","memory":"16Gi"}'

    # kubelet reports a new allocatable: the raw values are taken anew
    node = _report(cp, {"cpu": "6", "memory": "16Gi", "pods": "110"})
    assert node["status"]["allocatable"]["cpu"] == "7200m"
    assert node["metadata"]["annotations"][RAW] == '{"cpu":"6","memory":"16Gi"}'


def test_the_node_label_turns_it_off(gated_manager: ControlPlane) -> None:
    cp = gated_manager
    cp.kubectl("label", "node", NODE, f"{ENABLED}=false", "--overwrite")
    annotations = wait_for(lambda: _with_ratio(cp, "1.00"), 60, f"{RATIO} back to 1.00")
    assert annotations[AMPLIFICATION] == '{"memory":1.50}'
    node = _report(cp, {"cpu": "6", "memory": "16Gi", "pods": "110"})
    assert node["status"]["allocatable"] == {"cpu": "6", "memory": "24Gi", "pods": "110"}


def test_a_bad_key_is_reported_on_the_configmap_and_the_nodes_keep_their_ratio(
    gated_manager: ControlPlane,
) -> None:
    cp = gated_manager
    before = _annotations(cp)
    bad = yaml.safe_load(CONFIGMAP)
    bad["data"]["cpu-normalization-config"] = '{"ratioModel": {"x": {"baseRatio": "fast"}}}'
    cp.kubectl("apply", "-f", "-", input=json.dumps(bad))

    def warning() -> str | None:
        events = list_items(
            cp, "events", namespace=NAMESPACE, field_selector="involvedObject.name=slo-controller-config"
        )
        found = [e["message"] for e in events if e["reason"] == "CPUNormalizationCfgUnmarshalFailed"]
        return found[-1] if found else None

    message = wait_for(warning, 60, "a Warning event on slo-controller-config")
    assert message.startswith(
        "cpu-normalization-config: ratioModel.x.baseRatio: Input should be a valid number"
    )
    after = _annotations(cp)
    assert (after[RATIO], after[AMPLIFICATION]) == (before[RATIO], before[AMPLIFICATION])


def test_the_charts_manager_role_allows_what_the_controller_does(gated_manager: ControlPlane) -> None:
    cp = gated_manager
    rendered = cp.helm(
        "template",
        "koordinator-py",
        str(repo_root() / "charts" / "koordinator-py"),
        "--show-only",
        "templates/manager-serviceaccount.yaml",
        "--show-only",
        "templates/manager-rbac.yaml",
    )
    cp.kubectl("apply", "-f", "-", input=rendered)
    account = f"system:serviceaccount:{NAMESPACE}:koord-manager"
    for verb, resource in (
        ("get", "configmaps"),
        ("watch", "configmaps"),
        ("get", "noderesourcetopologies.topology.node.k8s.io"),
        ("watch", "noderesourcetopologies.topology.node.k8s.io"),
        ("patch", "nodes"),
        ("create", "events"),
    ):
        answer = cp.run_kubectl("auth", "can-i", verb, resource, "--all-namespaces", "--as", account)
        assert answer.stdout.strip() == "yes", f"koord-manager may not {verb} {resource}: {answer.stderr}"
