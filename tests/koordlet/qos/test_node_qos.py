"""The QoS behaviours written to fake cgroupfs v1/v2 and resctrl trees: group identity per class and
annotation, cpu.idle with coreSched, BE suppression (cfsQuota and cpuset), resctrl and host apps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from apis.cpulist import format_cpus, parse_cpus
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.collectors import series
from koordlet.fs import HostFS
from koordlet.metric_cache import MetricCache
from koordlet.qos import cpu_suppress as sup
from koordlet.qos.node_qos import NodeQoS, read_topology
from koordlet.qos.pods import QoSPod, qos_pod
from koordlet.qos.slo import effective_spec
from tests.koordlet.qos.cgroupfs import CgroupTree, resctrl_tree
from tests.koordlet.qos.podfactory import pod

NOW = 1000.0
CPU_QOS_ON = {
    "resourceQOSStrategy": {
        "lsrClass": {"cpuQOS": {"enable": True}},
        "lsClass": {"cpuQOS": {"enable": True}},
        "beClass": {"cpuQOS": {"enable": True}},
    }
}


def _spec(raw: dict[str, Any]) -> NodeSLOSpec:
    return effective_spec(NodeSLOSpec.model_validate(raw))


def _pods(tree: CgroupTree, node_qos: NodeQoS, *pods: QoSPod) -> list[QoSPod]:
    for p in pods:
        path = node_qos.layout.pod_dir(p.kube_qos, p.uid)
        tree.add(path)
        tree.add(f"{path}/{'a' * 64}")
    return list(pods)


def _tree(tmp_path: Path, version: int = 1, anolis: bool = True) -> tuple[CgroupTree, NodeQoS]:
    tree = CgroupTree(tmp_path, version, anolis=anolis)  # type: ignore[arg-type]
    gates = KoordletFeatureGates(resctrl_hook=True)
    for qos_dir in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
        tree.add(qos_dir)
    return tree, NodeQoS(HostFS(tmp_path), version, gates)  # type: ignore[arg-type]


def test_group_identity_per_class_and_annotation(tmp_path: Path) -> None:
    tree, node_qos = _tree(tmp_path)
    pods = _pods(
        tree,
        node_qos,
        qos_pod(pod("lsr", qos="LSR", kube_qos="Guaranteed")),
        qos_pod(pod("ls", qos="LS")),
        qos_pod(pod("be", qos="BE", kube_qos="BestEffort")),
        qos_pod(pod("plain-guaranteed", kube_qos="Guaranteed")),
        qos_pod(pod("ls-drop", qos="LS", annotations={"koordinator.sh/cpuQOS": '{"groupIdentity": 1}'})),
        qos_pod(
            pod(
                "ls-off",
                qos="LS",
                annotations={"koordinator.sh/cpuQOS": '{"enable": false, "groupIdentity": 2}'},
            )
        ),
        qos_pod(pod("ls-bad", qos="LS", annotations={"koordinator.sh/cpuQOS": '{"groupIdentity": 7}'})),
    )
    report = node_qos.reconcile(_spec(CPU_QOS_ON), pods, MetricCache(), NOW)
    bvt = {p.name: tree.read(node_qos.layout.pod_dir(p.kube_qos, p.uid), "cpu.bvt_warp_ns") for p in pods}
    assert bvt == {
        "lsr": "2",
        "ls": "2",
        "be": "-1",
        "plain-guaranteed": "2",
        "ls-drop": "1",  # the v1.6 example means enabled with 1 (Koordinator would write 0)
        "ls-off": "0",
        "ls-bad": "2",  # a bad annotation leaves the class value, with an event
    }
    container = f"{node_qos.layout.pod_dir('BestEffort', 'uid-be')}/{'a' * 64}"
    assert tree.read(container, "cpu.bvt_warp_ns") == "-1"
    assert [
        tree.read(d, "cpu.bvt_warp_ns") for d in ("kubepods", "kubepods/burstable", "kubepods/besteffort")
    ] == [
        "0",
        "2",
        "-1",
    ]
    [(bad, problem)] = report.annotation_errors
    assert bad.name == "ls-bad"
    assert "koordinator.sh/cpuQOS" in problem
    assert "groupIdentity" in problem
    # turning the classes off resets every cgroup to 0
    node_qos.reconcile(_spec({}), pods, MetricCache(), NOW)
    assert tree.read(node_qos.layout.pod_dir("BestEffort", "uid-be"), "cpu.bvt_warp_ns") == "0"
    assert tree.read("kubepods/besteffort", "cpu.bvt_warp_ns") == "0"


def test_upstream_kernel_writes_no_bvt_and_core_sched_sets_cpu_idle(tmp_path: Path) -> None:
    tree, node_qos = _tree(tmp_path, version=2, anolis=False)
    pods = _pods(
        tree, node_qos, qos_pod(pod("be", qos="BE", kube_qos="BestEffort")), qos_pod(pod("ls", qos="LS"))
    )
    node_qos.reconcile(_spec(CPU_QOS_ON), pods, MetricCache(), NOW)
    assert not (tmp_path / "sys/fs/cgroup/kubepods/besteffort/cpu.bvt_warp_ns").exists()
    core_sched = {
        **CPU_QOS_ON,
        "resourceQOSStrategy": {**CPU_QOS_ON["resourceQOSStrategy"], "policies": {"cpuPolicy": "coreSched"}},
    }
    node_qos.reconcile(_spec(core_sched), pods, MetricCache(), NOW)
    assert tree.read("kubepods/besteffort", "cpu.idle") == "1"
    assert tree.read(node_qos.layout.pod_dir("BestEffort", "uid-be"), "cpu.idle") == "1"
    assert tree.read(node_qos.layout.pod_dir("Burstable", "uid-ls"), "cpu.idle") == "0"


def test_with_apply_cpu_qos_off_the_reconcile_leaves_cpu_idle_to_nri(tmp_path: Path) -> None:
    tree = CgroupTree(tmp_path, 2)
    for qos_dir in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
        tree.add(qos_dir)
    node_qos = NodeQoS(HostFS(tmp_path), 2, KoordletFeatureGates(), apply_cpu_qos=False)
    pods = _pods(tree, node_qos, qos_pod(pod("be", qos="BE", kube_qos="BestEffort")))
    core_sched = {
        **CPU_QOS_ON,
        "resourceQOSStrategy": {**CPU_QOS_ON["resourceQOSStrategy"], "policies": {"cpuPolicy": "coreSched"}},
    }
    node_qos.reconcile(_spec(core_sched), pods, MetricCache(), NOW)
    assert tree.read("kubepods/besteffort", "cpu.idle") == "0"
    assert tree.read(node_qos.layout.pod_dir("BestEffort", "uid-be"), "cpu.idle") == "0"


def test_suppress_formula() -> None:
    pods = [sup.UsageOf(4000, be=False), sup.UsageOf(3000, be=True)]
    # sys = 9000 - 7000 = 2000; suppress = 16000 x 65 % - 4000 - 2000 = 4400
    assert sup.suppress_milli(16000, 65, 9000, pods) == 4400
    # reserved above the measured system usage counts instead
    assert sup.suppress_milli(16000, 65, 9000, pods, reserved_milli=3000) == 3400
    # a non-BE host application counts like an LS pod; cpuSuppressMinPercent floors the result
    assert sup.suppress_milli(16000, 65, 9000, pods, [sup.UsageOf(1000, be=False)]) == 4400 - 1000 + 1000
    assert sup.suppress_milli(16000, 65, 15000, [sup.UsageOf(14000, be=False)], min_percent=10) == 1600


@pytest.mark.parametrize(
    ("suppress", "current", "expected"),
    [
        (4400, -1, 440_000),  # first write: no growth limit
        (10, -1, 2000),  # floor
        (10, 2000, 2000),  # at the floor: written even though unchanged
        (4400, 440_500, None),  # under 1 % of 16 cores x period: skipped
        (9000, 440_000, 600_000),  # growth capped at 10 % of 16 cores x period
        (1000, 440_000, 100_000),  # shrinking is not capped
    ],
)
def test_cfs_quota(suppress: int, current: int, expected: int | None) -> None:
    assert sup.cfs_quota(suppress, current, 16) == expected


def test_cpuset_size_growth_and_lsr_split() -> None:
    assert sup.cpuset_size(4400, 0, 16) == 5
    assert sup.cpuset_size(100, 0, 16) == 2
    assert sup.cpuset_size(12000, 4, 16) == 6  # +ceil(10 % x 16) = +2
    assert sup.cpuset_size(1000, 8, 16) == 2
    assert sup.split_lsr(5, 4, 8) == 1
    assert sup.split_lsr(5, 0, 0) == 0


def test_select_cpus_takes_whole_cores_round_robin_over_buckets() -> None:
    # 2 sockets x 2 cores x 2 threads: cpu n and n+4 are siblings
    infos = [sup.CPUInfo(cpu, cpu % 4, socket=(cpu % 4) // 2, numa=(cpu % 4) // 2) for cpu in range(8)]
    assert sup.select_cpus(infos, 4) == [0, 2, 4, 6]
    # an odd count: one whole core, then single CPUs from the buckets in order
    assert sup.select_cpus(infos, 3) == [0, 1, 4]
    assert format_cpus([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert parse_cpus("0-2,5,7-8") == {0, 1, 2, 5, 7, 8}


def _usage_cache(node_cpu: float, **pods: float) -> MetricCache:
    cache = MetricCache()
    for t in range(int(NOW) - 5, int(NOW) + 1):
        cache.append((series.NODE_CPU,), t, node_cpu)
        for uid, value in pods.items():
            cache.append((series.POD_CPU, uid), t, value)
    return cache


def test_suppress_cfs_quota_written_to_besteffort_and_restored_when_disabled(tmp_path: Path) -> None:
    tree, node_qos = _tree(tmp_path)
    for d in ("", "kubepods", "kubepods/besteffort"):
        (tmp_path / "sys/fs/cgroup/cpuset" / d / "cpuset.cpus").write_text("0-15\n")
    pods = _pods(
        tree, node_qos, qos_pod(pod("ls", qos="LS")), qos_pod(pod("be", qos="BE", kube_qos="BestEffort"))
    )
    spec = _spec({"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}})
    report = node_qos.reconcile(spec, pods, _usage_cache(9, **{"uid-ls": 4, "uid-be": 3}), NOW)
    assert report.be_quota == 440_000
    assert tree.read("kubepods/besteffort", "cpu.cfs_quota_us") == "440000"
    node_qos.reconcile(_spec({}), pods, _usage_cache(9), NOW)
    assert tree.read("kubepods/besteffort", "cpu.cfs_quota_us") == "-1"
    assert tree.read("kubepods/besteffort", "cpuset.cpus", "cpuset") == "0-15"


def test_suppress_cpuset_written_top_down_and_bottom_up(tmp_path: Path) -> None:
    tree, node_qos = _tree(tmp_path)
    for d in ("", "kubepods", "kubepods/besteffort"):
        (tmp_path / "sys/fs/cgroup/cpuset" / d / "cpuset.cpus").write_text("0-15\n")
    be = qos_pod(pod("be", qos="BE", kube_qos="BestEffort"))
    pods = _pods(tree, node_qos, qos_pod(pod("ls", qos="LS")), be)
    spec = _spec({"resourceUsedThresholdWithBE": {"enable": True}})
    report = node_qos.reconcile(spec, pods, _usage_cache(9, **{"uid-ls": 4, "uid-be": 3}), NOW)
    assert report.be_cpuset == "0-4"  # ceil(4400 / 1000) = 5 CPUs
    assert tree.read("kubepods/besteffort", "cpuset.cpus", "cpuset") == "0-4"
    assert tree.read(node_qos.layout.pod_dir("BestEffort", be.uid), "cpuset.cpus", "cpuset") == "0-4"
    assert node_qos.be_real_limit_milli() == 5000


def test_class_and_pod_resctrl(tmp_path: Path) -> None:
    tree, node_qos = _tree(tmp_path)
    base = resctrl_tree(tmp_path, cbm="7ff", l3_ids=2)
    be = qos_pod(pod("be", qos="BE", kube_qos="BestEffort"))
    own = qos_pod(
        pod(
            "own",
            qos="LS",
            annotations={
                "node.koordinator.sh/resctrl": '{"llc": {"schemata": {"range": [0, 50]}}, '
                '"mb": {"schemata": {"percent": 35}}}'
            },
        )
    )
    bad = qos_pod(
        pod(
            "bad",
            qos="LS",
            annotations={"node.koordinator.sh/resctrl": '{"llc": {"schemata": {"range": [60, 10]}}}'},
        )
    )
    pods = _pods(tree, node_qos, be, own, bad)
    (
        tmp_path / "sys/fs/cgroup/cpu" / node_qos.layout.pod_dir("BestEffort", be.uid) / "cgroup.procs"
    ).write_text("41\n42\n")
    (
        tmp_path / "sys/fs/cgroup/cpu" / node_qos.layout.pod_dir("Burstable", own.uid) / "cgroup.procs"
    ).write_text("51\n")
    spec = _spec({"resourceQOSStrategy": {"beClass": {"resctrlQOS": {"enable": True, "mbaPercent": 55}}}})
    report = node_qos.reconcile(spec, pods, MetricCache(), NOW)
    assert (base / "BE/schemata").read_text() == "L3:0=f;1=f\nMB:0=60;1=60\n"
    assert (base / "LS/schemata").read_text() == "L3:0=7ff;1=7ff\nMB:0=100;1=100\n"
    assert node_qos.resctrl.tasks("BE") == {41, 42}
    assert node_qos.resctrl.tasks("LS") == set()  # LS class not enabled: its tasks stay
    assert (base / f"koordlet-{own.uid}/schemata").read_text() == "L3:0=3f;1=3f\nMB:0=40;1=40\n"
    assert node_qos.resctrl.tasks(f"koordlet-{own.uid}") == {51}
    assert [p.name for p, _ in report.annotation_errors] == ["bad"]
    # the pod's group goes with the pod
    node_qos.reconcile(spec, [be], MetricCache(), NOW)
    assert not (base / f"koordlet-{own.uid}").exists()


def test_host_application_gets_its_class_settings(tmp_path: Path) -> None:
    tree, node_qos = _tree(tmp_path)
    tree.add("host-latency-sensitive/nginx")
    tree.add("kubepods/besteffort/spark")
    spec = _spec(
        {
            **CPU_QOS_ON,
            "hostApplications": [
                {"name": "nginx", "qos": "LS"},
                {
                    "name": "spark",
                    "qos": "BE",
                    "cgroupPath": {"base": "KubepodsBesteffort", "relativePath": "spark"},
                },
                {"name": "odd", "qos": "LS", "cgroupPath": {"base": "Elsewhere"}},
            ],
        }
    )
    node_qos.reconcile(spec, [], MetricCache(), NOW)
    assert tree.read("host-latency-sensitive/nginx", "cpu.bvt_warp_ns") == "2"
    assert tree.read("kubepods/besteffort/spark", "cpu.bvt_warp_ns") == "-1"


def test_suppress_cpuset_skips_lse_cpus_and_shares_lsr_ones(tmp_path: Path) -> None:
    tree, node_qos = _tree(tmp_path)
    for d in ("", "kubepods", "kubepods/besteffort"):
        (tmp_path / "sys/fs/cgroup/cpuset" / d / "cpuset.cpus").write_text("0-15\n")
    status = "scheduling.koordinator.sh/resource-status"
    pods = _pods(
        tree,
        node_qos,
        qos_pod(pod("lse", qos="LSE", kube_qos="Guaranteed", annotations={status: '{"cpuset": "0-3"}'})),
        qos_pod(pod("lsr", qos="LSR", kube_qos="Guaranteed", annotations={status: '{"cpuset": "4-7"}'})),
        qos_pod(pod("be", qos="BE", kube_qos="BestEffort")),
    )
    spec = _spec({"resourceUsedThresholdWithBE": {"enable": True}})
    # node 9 cores, LSE+LSR pods 4 of them, BE 3: suppress 4400 -> 5 CPUs, of which
    # floor(5 x 4 / (4 + 8)) = 1 from the LSR-bound 4-7 and 4 from 8-15; 0-3 (LSE) never
    report = node_qos.reconcile(spec, pods, _usage_cache(9, **{"uid-lse": 2, "uid-lsr": 2, "uid-be": 3}), NOW)
    assert report.be_cpuset == "4,8-11"


def test_topology_from_sysfs_pairs_hyper_threads(tmp_path: Path) -> None:
    for cpu in range(8):
        topo = tmp_path / f"sys/devices/system/cpu/cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "core_id").write_text(f"{cpu % 4}\n")
        (topo / "physical_package_id").write_text(f"{(cpu % 4) // 2}\n")
    for numa, cpus in ((0, "0-1,4-5"), (1, "2-3,6-7")):
        (tmp_path / f"sys/devices/system/node/node{numa}").mkdir(parents=True)
        (tmp_path / f"sys/devices/system/node/node{numa}/cpulist").write_text(cpus + "\n")
    infos = read_topology(HostFS(tmp_path))
    assert [(c.cpu, c.numa) for c in infos] == [
        (0, 0),
        (1, 0),
        (2, 1),
        (3, 1),
        (4, 0),
        (5, 0),
        (6, 1),
        (7, 1),
    ]
    assert infos[0].core == infos[4].core != infos[1].core
    # four CPUs: a whole core on each NUMA node
    assert sup.select_cpus(infos, 4) == [0, 2, 4, 6]
