"""The custom-resource models accept Koordinator's YAML unchanged and reject what its CRDs reject."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from apis.base import KoordModel
from apis.config import ClusterColocationProfile
from apis.fielddocs import field_docstrings
from apis.meta import KoordResource
from apis.quota import ElasticQuotaProfile
from apis.registry import ALL_RESOURCES
from apis.scheduling import (
    ClusterNetworkTopology,
    Device,
    DeviceInfo,
    DeviceTopology,
    ElasticQuota,
    PodGroup,
    PodMigrationJob,
    Reservation,
    ReservationOwner,
    VirtualFunction,
)
from apis.slo import (
    IOCfg,
    NodeMetric,
    NodeSLO,
    NodeSLOSpec,
    NUMAMetricInfo,
    ResourceQOS,
    ResourceQOSPolicies,
    ResourceThresholdStrategy,
)
from apis.topology import NodeResourceTopology

# --------------------------------------------------------------------------------------------
# Realistic objects, as users and Koordinator components write them. Every schema default is
# spelled out, because the API server fills them in before anyone reads the object back.
# Quantities are quoted: the API server stores what it is given, and the models write strings.
# --------------------------------------------------------------------------------------------

PODGROUP_NETWORK_TOPOLOGY = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: training-job
  namespace: default
  annotations:
    gang.scheduling.koordinator.sh/network-topology-spec: |
      {"gatherStrategy": [{"layer": "BlockLayer", "strategy": "PreferGather"}]}
spec:
  minMember: 8
  scheduleTimeoutSeconds: 300
"""

PODGROUP_WITH_STATUS = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: hp-training-job
  namespace: default
  creationTimestamp: "2025-09-01T08:00:00Z"
spec:
  minMember: 2
  minResources:
    cpu: "8"
    nvidia.com/gpu: "2"
  scheduleTimeoutSeconds: 300
status:
  phase: Running
  occupiedBy: default/hp-training-job
  scheduled: 2
  running: 2
  succeeded: 0
  failed: 0
  scheduleStartTime: "2025-09-01T08:00:05Z"
"""

ELASTICQUOTA_PARENT = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: parentA
  namespace: default
  labels:
    quota.scheduling.koordinator.sh/is-parent: "true"
    quota.scheduling.koordinator.sh/allow-lent-resource: "true"
spec:
  max:
    cpu: "100"
    memory: 200Gi
  min:
    cpu: "100"
    memory: 200Gi
"""

ELASTICQUOTA_CHILD = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: childA1
  namespace: default
  labels:
    quota.scheduling.koordinator.sh/is-parent: "false"
    quota.scheduling.koordinator.sh/parent: "parentA"
    quota.scheduling.koordinator.sh/allow-lent-resource: "true"
spec:
  max:
    cpu: "40"
    memory: 100Gi
  min:
    cpu: "20"
    memory: 40Gi
status:
  used:
    cpu: 2500m
    memory: 8Gi
"""

RESERVATION_FULL = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata:
  name: reservation-demo
spec:
  template:
    metadata:
      namespace: default
    spec:
      schedulerName: koord-scheduler
      priorityClassName: koord-prod
      containers:
      - name: stress
        image: polinux/stress
        resources:
          requests:
            cpu: 500m
            memory: 1Gi
  owners:
  - object:
      name: pod-demo-0
      namespace: default
  - controller:
      apiVersion: apps/v1
      kind: ReplicaSet
      name: web
      uid: 5e3f0b0a-2d3c-4c56-9c1e-0f8a3c2d1b7e
      controller: true
      namespace: default
  - labelSelector:
      matchLabels:
        app: web
  ttl: 1h
  allocateOnce: false
  allocatePolicy: Restricted
  taints:
  - effect: NoSchedule
    key: test-taint-key
    value: test-taint-value
  preAllocation: true
  preAllocationPolicy:
    mode: Cluster
    enableMultiple: true
status:
  phase: Available
  nodeName: node-1
  conditions:
  - type: Scheduled
    status: "True"
    reason: Scheduled
    lastProbeTime: "2025-09-01T08:00:00Z"
    lastTransitionTime: "2025-09-01T08:00:00Z"
  - type: Ready
    status: "True"
    reason: Available
  currentOwners:
  - name: pod-demo-0
    namespace: default
    uid: 0d8c1b2a-1111-2222-3333-444455556666
  allocatable:
    cpu: 500m
    memory: 1Gi
  allocated:
    cpu: 500m
"""

RESERVATION_TAINTS = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata:
  name: test-reservation
spec:
  template:
    spec:
      schedulerName: koord-scheduler
  owners:
  - labelSelector:
      matchExpressions:
      - key: app
        operator: In
        values: [test]
  taints:
  - effect: NoSchedule
    key: test-taint-key
    value: test-taint-value
  ttl: 24h
  allocateOnce: true
"""

DEVICE_NVIDIA = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata:
  name: worker01
  labels:
    node.koordinator.sh/gpu-model: NVIDIA-H20
    node.koordinator.sh/gpu-vendor: nvidia
spec:
  devices:
  - health: true
    id: GPU-a43e0de9-28a0-1e87-32f8-f5c4994b3e69
    minor: 0
    resources:
      koordinator.sh/gpu-core: "100"
      koordinator.sh/gpu-memory: 97871Mi
      koordinator.sh/gpu-memory-ratio: "100"
    topology:
      busID: 0000:0e:00.0
      nodeID: 0
      pcieID: pci0000:0b
      socketID: 0
    type: gpu
"""

DEVICE_ASCEND = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata:
  name: node-1
  labels:
    node.koordinator.sh/gpu-model: Ascend-910B3
    node.koordinator.sh/gpu-vendor: huawei
  annotations:
    scheduling.koordinator.sh/gpu-partitions: |
      {"4": [{"minors": [0,1,2,3], "gpuLinkType": "HCCS", "allocationScore": "1"}]}
spec:
  devices:
  - health: true
    id: GPU-fd971b33-4891-fd2e-ed42-ce6adf324615
    minor: 0
    resources:
      huawei.com/npu-core: "20"
      huawei.com/npu-cpu: "7"
      huawei.com/npu-dvpp: "100"
      koordinator.sh/gpu-memory: 64Gi
      koordinator.sh/gpu-memory-ratio: "100"
    topology:
      busID: 0000:3b:00.0
      nodeID: 0
      pcieID: pci0000:3a
      socketID: 0
    type: gpu
"""

DEVICE_RDMA_WITH_STATUS = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata:
  name: node-2
  ownerReferences:
  - apiVersion: v1
    kind: Node
    name: node-2
    uid: 9a1c2e4f-0000-4000-8000-000000000002
    controller: true
    blockOwnerDeletion: true
spec:
  devices:
  - health: true
    id: "0000:1f:00.0"
    minor: 0
    moduleID: 3
    labels:
      type: fakeW
    resources:
      koordinator.sh/rdma: "100"
    topology:
      busID: 0000:1f:00.0
      nodeID: 0
      pcieID: pci0000:1d
      socketID: 0
    type: rdma
    vfGroups:
    - labels:
        type: general
      vfs:
      - busID: 0000:1f:00.2
        minor: 0
      - busID: 0000:1f:00.3
        minor: 1
    conditions:
    - type: Healthy
      status: "True"
      reason: DeviceHealthy
      message: ""
      lastTransitionTime: "2025-09-01T08:00:00Z"
  - health: false
    id: GPU-00000000-0000-0000-0000-000000000001
    minor: 1
    type: gpu
status:
  allocations:
  - type: rdma
    entries:
    - name: trainer-0
      namespace: default
      uuid: "0000:1f:00.0"
      minors: [0]
"""

CLUSTER_NETWORK_TOPOLOGY = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: ClusterNetworkTopology
metadata:
  name: default
spec:
  networkTopologySpec:
  - labelKey:
    - network.topology.nvidia.com/spine
    topologyLayer: SpineLayer
  - labelKey:
    - network.topology.nvidia.com/block
    parentTopologyLayer: SpineLayer
    topologyLayer: BlockLayer
  - parentTopologyLayer: BlockLayer
    topologyLayer: NodeTopologyLayer
status:
  detailStatus:
  - topologyInfo:
      topologyLayer: ClusterTopologyLayer
      topologyName: ""
    childTopologyLayer: SpineLayer
    childTopologyNames: [s1]
    nodeNum: 2
  - topologyInfo:
      topologyLayer: SpineLayer
      topologyName: s1
    parentTopologyInfo:
      topologyLayer: ClusterTopologyLayer
      topologyName: ""
    childTopologyLayer: BlockLayer
    childTopologyNames: [b1]
    nodeNum: 2
"""

POD_MIGRATION_JOB = """
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: PodMigrationJob
metadata:
  name: migrationtest
spec:
  paused: false
  ttl: 5m
  mode: ReservationFirst
  podRef:
    namespace: default
    name: nginx-5c6ffd8645-njnwx
  reservationOptions:
    reservationRef:
      name: migrationtest-reservation
    template:
      metadata:
        name: migrationtest-reservation
      spec:
        ttl: 1h
    preemptionOptions: {}
  deleteOptions:
    gracePeriodSeconds: 30
    propagationPolicy: Background
    preconditions:
      uid: 9d2c6a16-3a4f-4b9e-8f6c-6d9a2f1e0b11
status:
  phase: Running
  status: ReservationCreated
  nodeName: node-3
  conditions:
  - type: ReservationCreated
    status: "True"
    reason: ReservationCreated
    lastTransitionTime: "2025-09-01T08:00:00Z"
  podRef:
    namespace: default
    name: nginx-5c6ffd8645-x7k2p
  preemptedPodsReservation:
  - name: preempted-reservation
    nodeName: node-4
    phase: Available
    preemptedPodRef:
      namespace: default
      name: batch-0
    podsRef:
    - namespace: default
      name: batch-0-new
"""

ELASTIC_QUOTA_PROFILE = """
apiVersion: quota.koordinator.sh/v1alpha1
kind: ElasticQuotaProfile
metadata:
  name: profile-gpu-pool
  namespace: kubeflow
spec:
  quotaName: gpu-pool-quota
  quotaLabels:
    quota.scheduling.koordinator.sh/is-parent: "true"
  resourceRatio: "0.9"
  nodeSelector:
    matchLabels:
      pool: gpu
"""

NODE_METRIC = """
apiVersion: slo.koordinator.sh/v1alpha1
kind: NodeMetric
metadata:
  name: master-01
spec:
  metricCollectPolicy:
    aggregateDurationSeconds: 300
    nodeAggregatePolicy:
      durations: [5m0s, 10m0s, 30m0s]
    nodeMemoryCollectPolicy: usageWithoutPageCache
    reportIntervalSeconds: 60
status:
  updateTime: "2025-05-25T03:36:38Z"
  nodeMetric:
    nodeUsage:
      resources:
        cpu: 1366m
        memory: 5938812Ki
    aggregatedNodeUsages:
    - duration: 5m0s
      usage:
        p50:
          resources:
            cpu: 429m
            memory: 5712464Ki
        p99:
          resources:
            cpu: 1366m
            memory: 5938812Ki
    systemUsage:
      resources:
        cpu: 200m
        memory: 1Gi
    numaUsages:
    - numaNodeID: 0
      nodeUsage:
        resources:
          cpu: 700m
  podsMetric:
  - name: my-kafka-controller-0
    namespace: kafka
    podUsage:
      resources:
        cpu: 57m
        memory: "1101719261"
    priority: koord-prod
    qos: LS
    extensions:
      vendor.example.com/score: 3
  hostApplicationMetric:
  - name: nginx
    priority: koord-prod
    qos: LS
    usage:
      resources:
        cpu: 100m
  prodReclaimableMetric:
    resource:
      resources:
        cpu: 2380m
        memory: "0"
  prodPeakMetric:
    resource:
      resources:
        cpu: "6"
"""

NODE_SLO = """
apiVersion: slo.koordinator.sh/v1alpha1
kind: NodeSLO
metadata:
  name: node-1
spec:
  resourceUsedThresholdWithBE:
    enable: true
    cpuSuppressThresholdPercent: 65
    cpuSuppressPolicy: cpuset
    memoryEvictThresholdPercent: 70
    cpuEvictBESatisfactionUpperPercent: 80
    cpuEvictBESatisfactionLowerPercent: 60
    cpuEvictBEUsageThresholdPercent: 90
    evictEnabledPriorityThreshold: 5999
  resourceQOSStrategy:
    policies:
      cpuPolicy: groupIdentity
      netQOSPolicy: tc
    lsrClass:
      cpuQOS:
        enable: true
        groupIdentity: 2
      memoryQOS:
        enable: true
        wmarkRatio: 95
        wmarkScalePermill: 20
        wmarkMinAdj: -25
      resctrlQOS:
        enable: true
        catRangeStartPercent: 0
        catRangeEndPercent: 100
        mbaPercent: 100
    beClass:
      cpuQOS:
        enable: true
        groupIdentity: -1
      blkioQOS:
        enable: true
        blocks:
        - name: /dev/vda
          type: device
          ioCfg:
            readIOPS: 1000
            writeBPS: 10485760
            ioWeightPercent: 50
      networkQOS:
        enable: true
        ingressRequest: 0
        ingressLimit: 50M
        egressRequest: 0
        egressLimit: 100
  cpuBurstStrategy:
    policy: auto
    cpuBurstPercent: 1000
    cfsQuotaBurstPercent: 300
    cfsQuotaBurstPeriodSeconds: -1
    sharePoolThresholdPercent: 50
  systemStrategy:
    minFreeKbytesFactor: 100
    watermarkScaleFactor: 150
    memcgReapBackGround: 0
    schedFeatures:
      ID_ABSOLUTE_EXPEL: true
    totalNetworkBandwidth: 10k
  extensions:
    vendor.example.com/anything: {nested: [1, 2]}
  hostApplications:
  - name: nginx
    priority: koord-prod
    qos: LS
    cgroupPath:
      base: CgroupRoot
      parentDir: host-latency-sensitive/
      relativePath: nginx/
    strategy: {}
"""

CLUSTER_COLOCATION_PROFILE = """
apiVersion: config.koordinator.sh/v1alpha1
kind: ClusterColocationProfile
metadata:
  name: colocation-profile-example
spec:
  namespaceSelector:
    matchLabels:
      koordinator.sh/enable-colocation: "true"
  selector:
    matchLabels:
      koordinator.sh/enable-colocation: "true"
  probability: "50%"
  qosClass: BE
  priorityClassName: koord-batch
  koordinatorPriority: 1000
  schedulerName: koord-scheduler
  labels:
    koordinator.sh/mutated: "true"
  annotations:
    koordinator.sh/intercepted: "true"
  labelKeysMapping:
    app: koordinator.sh/app
  labelSuffixes:
    app: -batch
  patch:
    spec:
      terminationGracePeriodSeconds: 30
"""

NODE_RESOURCE_TOPOLOGY = """
apiVersion: topology.node.k8s.io/v1alpha1
kind: NodeResourceTopology
metadata:
  name: node-1
  labels:
    app.kubernetes.io/managed-by: Koordinator
  annotations:
    kubelet.koordinator.sh/cpu-manager-policy: '{"policy":"static","reservedCPUs":"0-1"}'
    node.koordinator.sh/cpu-topology: '{"detail":[{"id":0,"core":0,"socket":0,"node":0}]}'
  ownerReferences:
  - apiVersion: v1
    kind: Node
    name: node-1
    uid: 0f4a1c52-3a5e-4b8f-9d2e-2c1f6a7b8c9d
    controller: true
    blockOwnerDeletion: true
topologyPolicies:
- SingleNUMANodePodLevel
zones:
- name: node-0
  type: Node
  resources:
  - name: cpu
    capacity: "32"
    allocatable: "32"
    available: "32"
  - name: memory
    capacity: 131917776Ki
    allocatable: 131917776Ki
    available: 131917776Ki
  - name: kubernetes.io/batch-cpu
    capacity: 12k
    allocatable: 12k
    available: 12k
- name: node-1
  type: Node
  costs:
  - name: node-0
    value: 21
  attributes:
  - name: vendor
    value: intel
  resources:
  - name: cpu
    capacity: "32"
    allocatable: "30"
    available: "30"
"""

EXAMPLES = [
    pytest.param(PodGroup, PODGROUP_NETWORK_TOPOLOGY, id="podgroup-network-topology-v1.7"),
    pytest.param(PodGroup, PODGROUP_WITH_STATUS, id="podgroup-with-status"),
    pytest.param(ElasticQuota, ELASTICQUOTA_PARENT, id="elasticquota-parent-v0.7"),
    pytest.param(ElasticQuota, ELASTICQUOTA_CHILD, id="elasticquota-child-v0.7"),
    pytest.param(Reservation, RESERVATION_FULL, id="reservation-full"),
    pytest.param(Reservation, RESERVATION_TAINTS, id="reservation-taints-v1.6"),
    pytest.param(Device, DEVICE_NVIDIA, id="device-nvidia-h20"),
    pytest.param(Device, DEVICE_ASCEND, id="device-ascend-910b3"),
    pytest.param(Device, DEVICE_RDMA_WITH_STATUS, id="device-rdma-vf-status"),
    pytest.param(ClusterNetworkTopology, CLUSTER_NETWORK_TOPOLOGY, id="clusternetworktopology-v1.7"),
    pytest.param(PodMigrationJob, POD_MIGRATION_JOB, id="podmigrationjob"),
    pytest.param(ElasticQuotaProfile, ELASTIC_QUOTA_PROFILE, id="elasticquotaprofile"),
    pytest.param(NodeMetric, NODE_METRIC, id="nodemetric"),
    pytest.param(NodeSLO, NODE_SLO, id="nodeslo"),
    pytest.param(ClusterColocationProfile, CLUSTER_COLOCATION_PROFILE, id="clustercolocationprofile"),
    pytest.param(NodeResourceTopology, NODE_RESOURCE_TOPOLOGY, id="noderesourcetopology"),
]


def _load(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(("model", "text"), EXAMPLES)
def test_example_round_trips_unchanged(model: type[KoordResource], text: str) -> None:
    wire = _load(text)
    obj = model.model_validate(wire)
    assert obj.kind == model.crd.kind
    assert obj.api_version == model.crd.api_version
    assert obj.to_wire() == wire


@pytest.mark.parametrize(("model", "text"), EXAMPLES)
def test_example_survives_a_second_trip(model: type[KoordResource], text: str) -> None:
    once = model.model_validate(_load(text))
    assert model.model_validate(once.to_wire()) == once


# --------------------------------------------------------------------------------------------
# Defaults: schema defaults are Python defaults; controller defaults are not.
# --------------------------------------------------------------------------------------------

MINIMAL_RESERVATION = {"spec": {"template": {}, "owners": [{"object": {"name": "p"}}]}, "status": {}}


@pytest.mark.parametrize(
    ("model", "data", "path", "expected"),
    [
        pytest.param(Reservation, MINIMAL_RESERVATION, ("spec", "ttl"), "24h", id="reservation-ttl"),
        pytest.param(
            Reservation, MINIMAL_RESERVATION, ("spec", "allocateOnce"), True, id="reservation-allocate-once"
        ),
        pytest.param(
            Reservation, MINIMAL_RESERVATION, ("status", "phase"), "Pending", id="reservation-status-phase"
        ),
        pytest.param(
            Reservation,
            {**MINIMAL_RESERVATION, "spec": {**MINIMAL_RESERVATION["spec"], "preAllocationPolicy": {}}},
            ("spec", "preAllocationPolicy"),
            {"mode": "Default", "enableMultiple": False},
            id="reservation-pre-allocation-policy",
        ),
        pytest.param(
            Device,
            {"spec": {"devices": [{"id": "GPU-0"}]}},
            ("spec", "devices", 0, "health"),
            False,
            id="device-health",
        ),
        pytest.param(
            NodeSLO,
            {"spec": {"resourceQOSStrategy": {"beClass": {"networkQOS": {"enable": True}}}}},
            ("spec", "resourceQOSStrategy", "beClass", "networkQOS"),
            {
                "enable": True,
                "ingressRequest": 0,
                "ingressLimit": 100,
                "egressRequest": 0,
                "egressLimit": 100,
            },
            id="nodeslo-network-qos",
        ),
    ],
)
def test_schema_defaults_are_applied(
    model: type[KoordResource], data: dict[str, Any], path: tuple[str | int, ...], expected: Any
) -> None:
    node: Any = model.model_validate(data).to_wire()
    for key in path:
        node = node[key]
    assert node == expected


@pytest.mark.parametrize(
    ("model", "data", "absent"),
    [
        pytest.param(
            NodeMetric,
            {"spec": {"metricCollectPolicy": {}}},
            ("spec", "metricCollectPolicy"),
            id="nodemetric-collect-policy",
        ),
        pytest.param(
            NodeSLO,
            {"spec": {"resourceUsedThresholdWithBE": {}, "cpuBurstStrategy": {}, "systemStrategy": {}}},
            ("spec", "resourceUsedThresholdWithBE"),
            id="nodeslo-threshold",
        ),
        pytest.param(
            NodeSLO, {"spec": {"cpuBurstStrategy": {}}}, ("spec", "cpuBurstStrategy"), id="nodeslo-burst"
        ),
        pytest.param(
            NodeSLO,
            {"spec": {"resourceQOSStrategy": {"lsClass": {"cpuQOS": {}, "resctrlQOS": {}}}}},
            ("spec", "resourceQOSStrategy", "lsClass", "resctrlQOS"),
            id="nodeslo-resctrl",
        ),
        pytest.param(
            PodMigrationJob, {"spec": {"podRef": {"name": "p"}}}, ("spec",), id="podmigrationjob-spec"
        ),
        pytest.param(PodGroup, {"spec": {}}, ("spec",), id="podgroup-spec"),
    ],
)
def test_controller_defaults_are_not_python_defaults(
    model: type[KoordResource], data: dict[str, Any], absent: tuple[str, ...]
) -> None:
    """Only what the schema defaults may appear on the wire; controllers fill in the rest."""
    node: Any = model.model_validate(data).to_wire()
    for key in absent:
        node = node[key]
    expected: Any = data
    for key in absent:
        expected = expected[key]
    assert node == expected


# --------------------------------------------------------------------------------------------
# Rejections: the error location names the offending field by its wire name.
# --------------------------------------------------------------------------------------------

RESERVATION_SPEC = {"template": {}, "owners": [{"object": {"name": "p"}}]}

INVALID = [
    pytest.param(
        PodGroup, {"spec": {"minMember": -1}}, ("spec", "minMember"), id="podgroup-negative-min-member"
    ),
    pytest.param(
        PodGroup, {"spec": {"minMember": "eight"}}, ("spec", "minMember"), id="podgroup-min-member-type"
    ),
    pytest.param(
        PodGroup,
        {"spec": {"scheduleTimeoutSeconds": 2**31}},
        ("spec", "scheduleTimeoutSeconds"),
        id="podgroup-int32",
    ),
    pytest.param(
        PodGroup, {"status": {"scheduled": [1]}}, ("status", "scheduled"), id="podgroup-scheduled-type"
    ),
    pytest.param(
        ElasticQuota, {"spec": {"max": {"cpu": [1]}}}, ("spec", "max", "cpu"), id="elasticquota-quantity-type"
    ),
    pytest.param(
        Reservation,
        {"spec": {"owners": RESERVATION_SPEC["owners"]}},
        ("spec", "template"),
        id="reservation-no-template",
    ),
    pytest.param(Reservation, {"spec": {"template": {}}}, ("spec", "owners"), id="reservation-no-owners"),
    pytest.param(
        Reservation,
        {"spec": {"template": {}, "owners": []}},
        ("spec", "owners"),
        id="reservation-owners-empty",
    ),
    pytest.param(
        Reservation,
        {"spec": {"template": {}, "owners": [{}]}},
        ("spec", "owners", 0),
        id="reservation-owner-empty",
    ),
    pytest.param(
        Reservation,
        {"spec": {**RESERVATION_SPEC, "allocatePolicy": "Default"}},
        ("spec", "allocatePolicy"),
        id="reservation-allocate-policy-enum",
    ),
    pytest.param(
        Reservation,
        {"spec": {**RESERVATION_SPEC, "allocatePolicy": ""}},
        ("spec", "allocatePolicy"),
        id="reservation-allocate-policy-empty",
    ),
    pytest.param(
        Reservation,
        {"spec": {**RESERVATION_SPEC, "preAllocationPolicy": {"mode": "Owner"}}},
        ("spec", "preAllocationPolicy", "mode"),
        id="reservation-pre-allocation-mode-enum",
    ),
    pytest.param(
        Reservation,
        {"spec": {**RESERVATION_SPEC, "ttl": "1d"}},
        ("spec", "ttl"),
        id="reservation-ttl-no-day-unit",
    ),
    pytest.param(
        Reservation,
        {"spec": {**RESERVATION_SPEC, "owners": [{"controller": {"kind": "ReplicaSet", "name": "web"}}]}},
        ("spec", "owners", 0, "controller", "apiVersion"),
        id="reservation-controller-required",
    ),
    pytest.param(
        Reservation,
        {"spec": {**RESERVATION_SPEC, "taints": [{"key": "k"}]}},
        ("spec", "taints", 0, "effect"),
        id="reservation-taint-effect-required",
    ),
    pytest.param(
        Device,
        {"spec": {"devices": [{"topology": {"socketID": 0, "nodeID": 0}}]}},
        ("spec", "devices", 0, "topology", "pcieID"),
        id="device-topology-pcie-required",
    ),
    pytest.param(
        Device,
        {"spec": {"devices": [{"topology": {"socketID": "zero", "nodeID": 0, "pcieID": "p"}}]}},
        ("spec", "devices", 0, "topology", "socketID"),
        id="device-topology-socket-type",
    ),
    pytest.param(
        Device,
        {"spec": {"devices": [{"vfGroups": [{"vfs": [{"busID": "0000:1f:00.2"}]}]}]}},
        ("spec", "devices", 0, "vfGroups", 0, "vfs", 0, "minor"),
        id="device-vf-minor-required",
    ),
    pytest.param(
        Device,
        {"spec": {"devices": [{"health": "maybe"}]}},
        ("spec", "devices", 0, "health"),
        id="device-health-type",
    ),
    pytest.param(
        ClusterNetworkTopology, {"spec": {}}, ("spec", "networkTopologySpec"), id="cnt-spec-required"
    ),
    pytest.param(
        ClusterNetworkTopology,
        {"spec": {"networkTopologySpec": [{"labelKey": ["a"]}]}},
        ("spec", "networkTopologySpec", 0, "topologyLayer"),
        id="cnt-topology-layer-required",
    ),
    pytest.param(
        ClusterNetworkTopology,
        {"spec": {"networkTopologySpec": [{"topologyLayer": "L", "labelKey": "scalar"}]}},
        ("spec", "networkTopologySpec", 0, "labelKey"),
        id="cnt-label-key-is-a-list",
    ),
    pytest.param(
        ClusterNetworkTopology,
        {"status": {"detailStatus": [{"topologyInfo": {"topologyLayer": "L", "topologyName": "n"}}]}},
        ("status", "detailStatus", 0, "nodeNum"),
        id="cnt-node-num-required",
    ),
    pytest.param(
        PodMigrationJob, {"spec": {"mode": "EvictDirectly"}}, ("spec", "podRef"), id="pmj-pod-ref-required"
    ),
    pytest.param(
        PodMigrationJob,
        {"spec": {"podRef": {"name": "p"}, "ttl": "five minutes"}},
        ("spec", "ttl"),
        id="pmj-ttl-duration",
    ),
    pytest.param(
        PodMigrationJob,
        {"status": {"conditions": [{"type": "Eviction"}]}},
        ("status", "conditions", 0, "status"),
        id="pmj-condition-status-required",
    ),
    pytest.param(
        ElasticQuotaProfile,
        {"spec": {"quotaName": "q"}},
        ("spec", "nodeSelector"),
        id="eqp-node-selector-required",
    ),
    pytest.param(
        ElasticQuotaProfile,
        {"spec": {"nodeSelector": {}}},
        ("spec", "quotaName"),
        id="eqp-quota-name-required",
    ),
    pytest.param(
        NodeMetric,
        {"spec": {"metricCollectPolicy": {"nodeMemoryCollectPolicy": "usageWithCache"}}},
        ("spec", "metricCollectPolicy", "nodeMemoryCollectPolicy"),
        id="nodemetric-memory-policy-enum",
    ),
    pytest.param(
        NodeMetric,
        {"status": {"nodeMetric": {"numaUsages": [{"nodeUsage": {}}]}}},
        ("status", "nodeMetric", "numaUsages", 0, "numaNodeID"),
        id="nodemetric-numa-node-id-required",
    ),
    pytest.param(
        NodeSLO,
        {"spec": {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 101}}},
        ("spec", "resourceUsedThresholdWithBE", "cpuSuppressThresholdPercent"),
        id="nodeslo-suppress-above-100",
    ),
    pytest.param(
        NodeSLO,
        {"spec": {"resourceQOSStrategy": {"beClass": {"memoryQOS": {"wmarkMinAdj": -26}}}}},
        ("spec", "resourceQOSStrategy", "beClass", "memoryQOS", "wmarkMinAdj"),
        id="nodeslo-wmark-min-adj-range",
    ),
    pytest.param(
        NodeSLO,
        {
            "spec": {
                "resourceQOSStrategy": {
                    "lsClass": {"blkioQOS": {"blocks": [{"ioCfg": {"ioWeightPercent": 0}}]}}
                }
            }
        },
        ("spec", "resourceQOSStrategy", "lsClass", "blkioQOS", "blocks", 0, "ioCfg", "ioWeightPercent"),
        id="nodeslo-io-weight-range",
    ),
    pytest.param(
        NodeSLO,
        {"spec": {"cpuBurstStrategy": {"cpuBurstPercent": 10001}}},
        ("spec", "cpuBurstStrategy", "cpuBurstPercent"),
        id="nodeslo-burst-percent-range",
    ),
    pytest.param(
        NodeSLO,
        {"spec": {"systemStrategy": {"schedFeatures": {"ID_ABSOLUTE_EXPEL": "sometimes"}}}},
        ("spec", "systemStrategy", "schedFeatures", "ID_ABSOLUTE_EXPEL"),
        id="nodeslo-sched-features-bool",
    ),
    pytest.param(
        ClusterColocationProfile,
        {"spec": {"qosClass": "Burstable"}},
        ("spec", "qosClass"),
        id="ccp-qos-class-enum",
    ),
    pytest.param(
        ClusterColocationProfile,
        {"spec": {"koordinatorPriority": "high"}},
        ("spec", "koordinatorPriority"),
        id="ccp-priority-type",
    ),
    pytest.param(
        ClusterColocationProfile,
        {"spec": {"selector": {"matchExpressions": [{"key": "app"}]}}},
        ("spec", "selector", "matchExpressions", 0, "operator"),
        id="ccp-selector-operator-required",
    ),
]


@pytest.mark.parametrize(("model", "data", "loc"), INVALID)
def test_invalid_input_is_rejected_naming_the_field(
    model: type[KoordResource], data: dict[str, Any], loc: tuple[str | int, ...]
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    locations = [tuple(error["loc"]) for error in caught.value.errors()]
    assert any(location[: len(loc)] == loc for location in locations), locations


# --------------------------------------------------------------------------------------------
# JSON names that are not the camelCase of the Python name.
# --------------------------------------------------------------------------------------------

ALIASES = [
    pytest.param(DeviceTopology, "socket_id", "socketID", id="socketID"),
    pytest.param(DeviceTopology, "node_id", "nodeID", id="nodeID"),
    pytest.param(DeviceTopology, "pcie_id", "pcieID", id="pcieID"),
    pytest.param(DeviceTopology, "bus_id", "busID", id="busID"),
    pytest.param(VirtualFunction, "bus_id", "busID", id="vf-busID"),
    pytest.param(DeviceInfo, "uuid", "id", id="device-id"),
    pytest.param(DeviceInfo, "module_id", "moduleID", id="moduleID"),
    pytest.param(NUMAMetricInfo, "numa_node_id", "numaNodeID", id="numaNodeID"),
    pytest.param(ResourceQOS, "cpu_qos", "cpuQOS", id="cpuQOS"),
    pytest.param(ResourceQOS, "memory_qos", "memoryQOS", id="memoryQOS"),
    pytest.param(ResourceQOS, "blkio_qos", "blkioQOS", id="blkioQOS"),
    pytest.param(ResourceQOS, "resctrl_qos", "resctrlQOS", id="resctrlQOS"),
    pytest.param(ResourceQOS, "network_qos", "networkQOS", id="networkQOS"),
    pytest.param(ResourceQOSPolicies, "net_qos_policy", "netQOSPolicy", id="netQOSPolicy"),
    pytest.param(NodeSLOSpec, "resource_qos_strategy", "resourceQOSStrategy", id="resourceQOSStrategy"),
    pytest.param(
        NodeSLOSpec,
        "resource_used_threshold_with_be",
        "resourceUsedThresholdWithBE",
        id="resourceUsedThresholdWithBE",
    ),
    pytest.param(
        ResourceThresholdStrategy,
        "cpu_evict_be_satisfaction_upper_percent",
        "cpuEvictBESatisfactionUpperPercent",
        id="cpuEvictBESatisfactionUpperPercent",
    ),
    pytest.param(
        ResourceThresholdStrategy,
        "cpu_evict_be_usage_threshold_percent",
        "cpuEvictBEUsageThresholdPercent",
        id="cpuEvictBEUsageThresholdPercent",
    ),
    pytest.param(IOCfg, "read_iops", "readIOPS", id="readIOPS"),
    pytest.param(IOCfg, "write_bps", "writeBPS", id="writeBPS"),
    pytest.param(IOCfg, "model_read_seq_iops", "modelReadSeqIOPS", id="modelReadSeqIOPS"),
]


@pytest.mark.parametrize(("model", "attribute", "wire_name"), ALIASES)
def test_irregular_json_names(model: type[KoordModel], attribute: str, wire_name: str) -> None:
    assert model.model_fields[attribute].alias == wire_name
    assert wire_name in model.model_json_schema(by_alias=True)["properties"]


def test_device_topology_wire_names() -> None:
    topology = DeviceTopology.model_validate(
        {"socketID": 1, "nodeID": 2, "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"}
    )
    assert (topology.socket_id, topology.node_id, topology.pcie_id, topology.bus_id) == (
        1,
        2,
        "pci0000:3a",
        "0000:3b:00.0",
    )
    assert topology.to_wire() == {"socketID": 1, "nodeID": 2, "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"}


def test_camel_case_spellings_of_irregular_names_are_ignored() -> None:
    """Go ignores unknown keys, so busId (not busID) is dropped rather than accepted."""
    device = DeviceInfo.model_validate(
        {"topology": {"socketID": 0, "nodeID": 0, "pcieID": "p", "busId": "x"}}
    )
    assert device.topology is not None
    assert device.topology.bus_id is None


# --------------------------------------------------------------------------------------------
# CRD identity and the schema quirks that pydantic alone would not express.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "group", "plural", "scope", "short_names", "status_subresource", "columns"),
    [
        pytest.param(
            PodGroup,
            "scheduling.sigs.k8s.io",
            "podgroups",
            "Namespaced",
            ("pg", "pgs"),
            False,
            ("MINMEMBER", "PHASE", "SCHEDULED", "AGE"),
            id="PodGroup",
        ),
        pytest.param(
            ElasticQuota,
            "scheduling.sigs.k8s.io",
            "elasticquotas",
            "Namespaced",
            ("eq", "eqs"),
            False,
            (
                *("PARENT", "CPU-MIN", "CPU-USED", "MEM-MIN", "MEM-USED", "GPU-MIN", "GPU-USED", "AGE"),
                *("IS-PARENT", "TREE-ID", "MIN", "MAX", "USED", "RUNTIME"),  # -o wide
            ),
            id="ElasticQuota",
        ),
        pytest.param(
            Reservation,
            "scheduling.koordinator.sh",
            "reservations",
            "Cluster",
            (),
            True,
            ("Phase", "Age", "Node", "TTL", "Expires", "Owners"),
            id="Reservation",
        ),
        pytest.param(
            Device,
            "scheduling.koordinator.sh",
            "devices",
            "Cluster",
            (),
            False,
            ("VENDOR", "MODEL", "AGE"),
            id="Device",
        ),
        pytest.param(
            ClusterNetworkTopology,
            "scheduling.koordinator.sh",
            "clusternetworktopologies",
            "Cluster",
            (),
            True,
            (),
            id="ClusterNetworkTopology",
        ),
        pytest.param(
            PodMigrationJob,
            "scheduling.koordinator.sh",
            "podmigrationjobs",
            "Cluster",
            ("pmj",),
            True,
            ("Phase", "Status", "Age", "Node", "Reservation", "PodNamespace", "Pod", "NewPod", "TTL"),
            id="PodMigrationJob",
        ),
        pytest.param(
            ElasticQuotaProfile,
            "quota.koordinator.sh",
            "elasticquotaprofiles",
            "Namespaced",
            ("eqp",),
            False,
            (),
            id="ElasticQuotaProfile",
        ),
        pytest.param(
            NodeMetric, "slo.koordinator.sh", "nodemetrics", "Cluster", (), True, (), id="NodeMetric"
        ),
        pytest.param(NodeSLO, "slo.koordinator.sh", "nodeslos", "Cluster", (), True, (), id="NodeSLO"),
        pytest.param(
            ClusterColocationProfile,
            "config.koordinator.sh",
            "clustercolocationprofiles",
            "Cluster",
            (),
            True,
            (),
            id="ClusterColocationProfile",
        ),
    ],
)
def test_crd_identity(
    model: type[KoordResource],
    group: str,
    plural: str,
    scope: str,
    short_names: tuple[str, ...],
    status_subresource: bool,
    columns: tuple[str, ...],
) -> None:
    info = model.crd
    assert (info.group, info.version, info.kind) == (group, "v1alpha1", model.__name__)
    assert (info.plural, info.singular, info.scope) == (plural, model.__name__.lower(), scope)
    assert info.short_names == short_names
    assert info.status_subresource is status_subresource
    assert tuple(c.name for c in info.printer_columns) == columns
    assert model in ALL_RESOURCES


def test_registry_has_each_kind_once() -> None:
    assert len(ALL_RESOURCES) == len(set(ALL_RESOURCES)) == 11


@pytest.mark.parametrize(
    ("model", "json_path"),
    [
        pytest.param(
            ElasticQuota, r".metadata.labels.quota\.scheduling\.koordinator\.sh/parent", id="eq-parent"
        ),
        pytest.param(ElasticQuota, r".status.used.nvidia\.com/gpu", id="eq-used-gpu"),
        pytest.param(Device, r".metadata.labels.node\.koordinator\.sh/gpu-vendor", id="device-vendor"),
        pytest.param(Device, r".metadata.labels.node\.koordinator\.sh/gpu-model", id="device-model"),
    ],
)
def test_label_printer_columns_escape_dots(model: type[KoordResource], json_path: str) -> None:
    assert json_path in [c.json_path for c in model.crd.printer_columns]


def test_elasticquota_default_columns_pick_single_quantities_and_leave_max_to_wide() -> None:
    """``kubectl get eq`` shows one quantity per cell; spec.max (whose built-in "unlimited" is
    1844674407370955161) and the whole JSON maps appear only with ``-o wide`` (priority 1)."""
    columns = ElasticQuota.crd.printer_columns
    default = {c.name: c.json_path for c in columns if not c.priority}
    wide = {c.name: c.json_path for c in columns if c.priority == 1}
    assert len(default) + len(wide) == len(columns)
    assert not any(path.startswith(".spec.max") for path in default.values())
    assert {p for p in default.values() if p.startswith((".spec", ".status"))} == {
        f"{field}.{key}"
        for field in (".spec.min", ".status.used")
        for key in ("cpu", "memory", r"nvidia\.com/gpu")
    }
    assert (wide["MIN"], wide["MAX"], wide["USED"]) == (".spec.min", ".spec.max", ".status.used")


def test_device_health_is_required_and_defaulted_like_koordinator() -> None:
    schema = DeviceInfo.model_json_schema(by_alias=True)
    assert "health" in schema["required"]
    assert schema["properties"]["health"]["default"] is False


def test_reservation_owner_needs_at_least_one_property() -> None:
    assert ReservationOwner.model_json_schema(by_alias=True)["minProperties"] == 1
    with pytest.raises(ValidationError, match="at least one of"):
        ReservationOwner.model_validate({})


def test_int_quantities_are_written_as_strings() -> None:
    quota = ElasticQuota.model_validate({"spec": {"max": {"cpu": 100, "memory": "200Gi"}}})
    assert quota.to_wire()["spec"]["max"] == {"cpu": "100", "memory": "200Gi"}


def test_network_qos_int_or_string_keeps_its_kind() -> None:
    slo = NodeSLO.model_validate(_load(NODE_SLO))
    assert slo.spec is not None
    assert slo.spec.resource_qos_strategy is not None
    assert slo.spec.resource_qos_strategy.be_class is not None
    network = slo.spec.resource_qos_strategy.be_class.network_qos
    assert network is not None
    assert (network.ingress_limit, network.egress_limit) == ("50M", 100)


def test_preserved_objects_are_kept_verbatim() -> None:
    profile = ClusterColocationProfile.model_validate(_load(CLUSTER_COLOCATION_PROFILE))
    assert profile.spec is not None
    assert profile.spec.patch == {"spec": {"terminationGracePeriodSeconds": 30}}
    assert profile.spec.probability == "50%"


def test_unknown_fields_are_ignored_like_go() -> None:
    group = PodGroup.model_validate({"spec": {"minMember": 1, "futureField": True}})
    assert group.to_wire() == {"metadata": {}, "spec": {"minMember": 1}}


@pytest.mark.parametrize("model", ALL_RESOURCES, ids=lambda m: m.crd.kind)
def test_every_field_is_documented(model: type[KoordResource]) -> None:
    """Field docstrings become `kubectl explain` descriptions (apis.crdgen reads them)."""
    seen: set[type[BaseModel]] = set()
    undocumented: list[str] = []

    def visit(cls: type[BaseModel]) -> None:
        if cls in seen or cls.__module__.startswith("apis.meta"):
            return
        seen.add(cls)
        inherited = {
            n for base in cls.__mro__[1:] if base.__module__ == "apis.meta" for n in base.__annotations__
        }
        docs = field_docstrings(cls, KoordModel)
        for name, field in cls.model_fields.items():
            if name in inherited:  # apis.meta's shapes are documented there
                continue
            if not (field.description or docs.get(name)):
                undocumented.append(f"{cls.__name__}.{name}")
            for sub in _models_in(field.annotation):
                visit(sub)

    visit(model)
    assert undocumented == []


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _models_in(arg)]
