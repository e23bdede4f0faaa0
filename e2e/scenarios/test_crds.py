"""The CRDs are installed, answer to kubectl with useful columns, and reject invalid objects."""

from __future__ import annotations

import json
import textwrap

import pytest

from apis.registry import ALL_RESOURCES
from e2e.cluster.controlplane import ControlPlane
from e2e.kubectl_table import header, rows


def test_every_crd_is_established(control_plane: ControlPlane) -> None:
    crds = json.loads(control_plane.kubectl("get", "crd", "-o", "json"))["items"]
    established = {
        c["metadata"]["name"]
        for c in crds
        if any(
            cond["type"] == "Established" and cond["status"] == "True" for cond in c["status"]["conditions"]
        )
    }
    assert {m.crd.crd_name for m in ALL_RESOURCES} <= established


def test_short_names_resolve(control_plane: ControlPlane) -> None:
    resources = control_plane.kubectl("api-resources", "--api-group=scheduling.sigs.k8s.io", "-o", "wide")
    lines = {line.split()[0]: line.split() for line in resources.splitlines()[1:]}
    assert "pg" in lines["podgroups"][1]
    assert "eq" in lines["elasticquotas"][1]


PODGROUP = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata: {name: columns-pg, namespace: default}
spec: {minMember: 4, scheduleTimeoutSeconds: 60}
status: {phase: Pending, scheduled: 1}
"""
QUOTAS = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: columns-parent
  namespace: default
  labels: {quota.scheduling.koordinator.sh/is-parent: "true"}
spec: {min: {cpu: "10", memory: 20Gi}, max: {cpu: "20", memory: 40Gi}}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: columns-child
  namespace: default
  labels: {quota.scheduling.koordinator.sh/parent: columns-parent}
# A child's max names the same resources as its parent's (koord-manager's webhook, algorithms 4.9 rule 9).
spec: {min: {cpu: "5"}, max: {cpu: "10", memory: 20Gi}}
"""
RESERVATION = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: columns-reservation}
spec:
  template:
    metadata: {namespace: default}
    spec:
      schedulerName: koord-scheduler
      containers: [{name: main, image: busybox, resources: {requests: {cpu: "2"}}}]
  owners:
  - labelSelector: {matchLabels: {app: demo}}
"""


def _row(output: str) -> dict[str, str]:
    """The first row."""
    return next(iter(rows(output).values()))


def test_kubectl_get_shows_printer_columns(control_plane: ControlPlane) -> None:
    for manifest in (PODGROUP, QUOTAS, RESERVATION):
        control_plane.kubectl("apply", "-f", "-", input=manifest)

    pg = control_plane.kubectl("get", "pg", "columns-pg", "-n", "default")
    assert header(pg) == ["NAME", "MINMEMBER", "PHASE", "SCHEDULED", "AGE"]
    assert _row(pg) | {"AGE": ""} == {
        "NAME": "columns-pg",
        "MINMEMBER": "4",
        "PHASE": "Pending",
        "SCHEDULED": "1",
        "AGE": "",
    }

    eq = control_plane.kubectl("get", "eq", "columns-parent", "columns-child", "-n", "default")
    # One short quantity per cell; USED is what koord-scheduler writes (status.used), none here.
    assert header(eq) == [
        "NAME", "PARENT", "CPU-MIN", "CPU-USED", "MEM-MIN", "MEM-USED", "GPU-MIN", "GPU-USED", "AGE"
    ]  # fmt: skip
    got = rows(eq)
    assert (got["columns-child"]["PARENT"], got["columns-child"]["CPU-MIN"]) == ("columns-parent", "5")
    assert (got["columns-parent"]["CPU-MIN"], got["columns-parent"]["MEM-MIN"]) == ("10", "20Gi")

    wide = control_plane.kubectl("get", "eq", "columns-child", "-n", "default", "-o", "wide")
    assert header(wide)[-6:] == ["IS-PARENT", "TREE-ID", "MIN", "MAX", "USED", "RUNTIME"]
    assert (_row(wide)["MIN"], _row(wide)["MAX"]) == ('{"cpu":"5"}', '{"cpu":"10","memory":"20Gi"}')

    rsv = control_plane.kubectl("get", "reservations", "columns-reservation")
    assert header(rsv) == ["NAME", "PHASE", "AGE", "NODE", "TTL", "EXPIRES", "OWNERS"]
    assert _row(rsv)["TTL"] == "24h"  # the schema default of spec.ttl

    devices = control_plane.kubectl("get", "devices")
    assert header(devices) == ["NAME", "VENDOR", "MODEL", "AGE"]
    assert _row(devices) | {"AGE": ""} == {
        "NAME": "gpu-0",
        "VENDOR": "nvidia",
        "MODEL": "NVIDIA-H100",
        "AGE": "",
    }


def test_reservation_schema_defaults_apply(control_plane: ControlPlane) -> None:
    control_plane.kubectl("apply", "-f", "-", input=RESERVATION)
    got = json.loads(control_plane.kubectl("get", "reservation", "columns-reservation", "-o", "json"))
    assert got["spec"]["ttl"] == "24h"
    assert got["spec"]["allocateOnce"] is True


INVALID = [
    pytest.param(
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: PodGroup\n"
        "metadata: {name: bad-min, namespace: default}\nspec: {minMember: -1}\n",
        ["spec.minMember", "greater than or equal to 0"],
        id="podgroup-negative-minMember",
    ),
    pytest.param(
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: PodGroup\n"
        "metadata: {name: bad-type, namespace: default}\nspec: {minMember: eight}\n",
        ["spec.minMember", "integer"],
        id="podgroup-minMember-wrong-type",
    ),
    pytest.param(
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\n"
        "metadata: {name: bad-quantity, namespace: default}\nspec: {max: {cpu: lots}}\n",
        ["spec.max.cpu"],
        id="elasticquota-max-not-a-quantity",
    ),
    pytest.param(
        "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: Reservation\n"
        "metadata: {name: bad-owners}\nspec: {template: {spec: {}}, owners: []}\n",
        ["spec.owners"],
        id="reservation-no-owners",
    ),
    pytest.param(
        "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: Reservation\n"
        "metadata: {name: bad-policy}\nspec:\n  template: {spec: {}}\n"
        "  owners: [{object: {name: x}}]\n  allocatePolicy: Sometimes\n",
        ["spec.allocatePolicy", "Sometimes"],
        id="reservation-unknown-allocatePolicy",
    ),
    pytest.param(
        "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: ClusterNetworkTopology\n"
        "metadata: {name: bad-layer}\nspec:\n  networkTopologySpec:\n  - labelKey: [a]\n",
        ["topologyLayer", "Required"],
        id="networktopology-layer-missing",
    ),
    pytest.param(
        "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: Device\n"
        "metadata: {name: bad-device}\nspec:\n  devices:\n  - {type: gpu, minor: zero, health: true}\n",
        ["spec.devices[0].minor", "integer"],
        id="device-minor-wrong-type",
    ),
    pytest.param(
        "apiVersion: config.koordinator.sh/v1alpha1\nkind: ClusterColocationProfile\n"
        "metadata: {name: bad-qos}\nspec: {qosClass: GOLD}\n",
        ["spec.qosClass", "GOLD"],
        id="colocationprofile-unknown-qosClass",
    ),
    pytest.param(
        "apiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeMetric\n"
        "metadata: {name: bad-policy}\nspec: {metricCollectPolicy: {nodeMemoryCollectPolicy: everything}}\n",
        ["nodeMemoryCollectPolicy", "everything"],
        id="nodemetric-unknown-memory-policy",
    ),
    pytest.param(
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: bad-gather\n"
        "  namespace: default\n  annotations:\n    gang.scheduling.koordinator.sh/network-topology-spec: "
        '\'{"gatherStrategy":[{"layer":"BlockLayer","strategy":"Sometimes"}]}\'\n'
        "spec: {minMember: 8}\n",
        [
            "denied the request",
            "metadata.annotations[gang.scheduling.koordinator.sh/network-topology-spec]",
            "gatherStrategy[0].strategy",
            "Sometimes",
        ],
        id="podgroup-gatherStrategy-Sometimes",
    ),
    pytest.param(
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: bad-json\n"
        "  namespace: default\n  annotations:\n    gang.scheduling.koordinator.sh/network-topology-spec: "
        "'{gatherStrategy: ['\nspec: {minMember: 8}\n",
        ["denied the request", "network-topology-spec", "JSON"],
        id="podgroup-network-topology-spec-not-json",
    ),
    pytest.param(
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: bad-groups\n"
        "  namespace: default\n  annotations:\n    gang.scheduling.koordinator.sh/groups: "
        "'[\"no-namespace\"]'\nspec: {minMember: 2}\n",
        ["denied the request", "gang.scheduling.koordinator.sh/groups", "no-namespace"],
        id="podgroup-groups-without-namespace",
    ),
    pytest.param(
        "apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: Reservation\n"
        "metadata: {name: bad-ttl}\nspec:\n  ttl: forever\n  template: {spec: {}}\n"
        "  owners: [{object: {name: x}}]\n",
        ["denied the request", "spec.ttl", "forever"],
        id="reservation-ttl-not-a-duration",
    ),
    pytest.param(
        "apiVersion: quota.koordinator.sh/v1alpha1\nkind: ElasticQuotaProfile\n"
        "metadata: {name: bad-ratio, namespace: default}\n"
        "spec: {quotaName: q, resourceRatio: '1e999999999', nodeSelector: {}}\n",
        ["denied the request", "spec.resourceRatio", "1e999999999"],
        id="elasticquotaprofile-ratio-out-of-any-range",
    ),
    pytest.param(
        "apiVersion: quota.koordinator.sh/v1alpha1\nkind: ElasticQuotaProfile\n"
        "metadata: {name: bad-ratio, namespace: default}\n"
        "spec: {quotaName: q, resourceRatio: ninety percent, nodeSelector: {}}\n",
        ["denied the request", "spec.resourceRatio", "ninety percent"],
        id="elasticquotaprofile-ratio-not-a-number",
    ),
]


def test_a_resource_ratio_above_one_is_accepted_with_a_warning(control_plane: ControlPlane) -> None:
    """Koordinator reads a ratio outside (0, 1] as 1; we accept it too, but say so."""
    manifest = (
        "apiVersion: quota.koordinator.sh/v1alpha1\nkind: ElasticQuotaProfile\n"
        "metadata: {name: generous-ratio, namespace: default}\n"
        "spec: {quotaName: generous, resourceRatio: '1.5', nodeSelector: {matchLabels: {none: none}}}\n"
    )
    result = control_plane.run_kubectl("apply", "-f", "-", input=manifest)
    try:
        assert result.returncode == 0, result.stderr
        assert "Warning:" in result.stderr
        assert "spec.resourceRatio" in result.stderr
        assert "the quota uses 1" in result.stderr
    finally:
        control_plane.run_kubectl("delete", "elasticquotaprofile", "generous-ratio", "-n", "default")


def test_unknown_gang_mode_is_accepted_with_a_warning(control_plane: ControlPlane) -> None:
    """Koordinator falls back to Strict for an unknown mode; we accept it too, but say so."""
    manifest = (
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: sloppy-mode\n"
        "  namespace: default\n  annotations:\n    gang.scheduling.koordinator.sh/mode: Sloppy\n"
        "spec: {minMember: 2}\n"
    )
    result = control_plane.run_kubectl("apply", "-f", "-", input=manifest)
    assert result.returncode == 0, result.stderr
    assert "Warning:" in result.stderr
    assert "using Strict" in result.stderr


@pytest.mark.parametrize(("manifest", "expected"), INVALID)
def test_invalid_objects_are_rejected_naming_the_field(
    control_plane: ControlPlane, manifest: str, expected: list[str]
) -> None:
    result = control_plane.run_kubectl("apply", "-f", "-", input=textwrap.dedent(manifest))
    assert result.returncode != 0, f"accepted: {result.stdout}"
    for fragment in expected:
        assert fragment in result.stderr, result.stderr
