"""Block-IO QoS (K13) on fake cgroupfs v1 and v2 trees: the BE class's and a pod's limits and
weights, the v2 ``io.max`` / ``io.weight`` lines, resets, a kernel without the weight knob, blk-iocost
on the root cgroup, and the problems a pod's annotation gets reported for."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.fs import HostFS
from koordlet.metric_cache import MetricCache
from koordlet.qos.blkio import block_devices, parse_device_lines
from koordlet.qos.node_qos import NodeQoS
from koordlet.qos.pods import QoSPod, qos_pod
from koordlet.qos.slo import effective_spec
from tests.koordlet.qos.cgroupfs import CgroupTree
from tests.koordlet.qos.podfactory import pod

NOW = 1000.0
VDA = "254:0"
GATES = KoordletFeatureGates(blkio_reconcile=True, group_identity=False, be_cpu_suppress=False)


def _spec(be_blocks: list[dict[str, Any]] | None, enable: bool = True, **classes: Any) -> NodeSLOSpec:
    strategy: dict[str, Any] = dict(classes)
    if be_blocks is not None:
        strategy["beClass"] = {"blkioQOS": {"enable": enable, "blocks": be_blocks}}
    return effective_spec(NodeSLOSpec.model_validate({"resourceQOSStrategy": strategy}))


def _block(name: str = "/dev/vda", kind: str = "device", **io: int) -> dict[str, Any]:
    return {"name": name, "type": kind, "ioCfg": io}


def _node(tmp_path: Path, version: int = 1, anolis: bool = False) -> tuple[CgroupTree, NodeQoS]:
    tree = CgroupTree(tmp_path, version, anolis=anolis)  # type: ignore[arg-type]
    tree.block_device("vda", VDA, partitions={"vda1": "254:1"})
    tree.block_device("zram0", "253:0")
    for qos_dir in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
        tree.add(qos_dir)
    return tree, NodeQoS(HostFS(tmp_path), version, GATES)  # type: ignore[arg-type]


def _with_cgroups(tree: CgroupTree, node_qos: NodeQoS, *pods: QoSPod) -> list[QoSPod]:
    for p in pods:
        tree.add(node_qos.layout.pod_dir(p.kube_qos, p.uid))
    return list(pods)


def test_block_devices_map_partitions_to_their_disk(tmp_path: Path) -> None:
    _node(tmp_path)
    assert block_devices(HostFS(tmp_path)) == {"vda": VDA, "vda1": VDA, "zram0": "253:0"}


def test_parse_device_lines_of_v1_and_v2_files() -> None:
    assert parse_device_lines("254:0 1048576\n8:0 10\n") == {"254:0": {"": "1048576"}, "8:0": {"": "10"}}
    assert parse_device_lines("default 100\n254:0 rbps=1 wbps=max riops=max wiops=3") == {
        "254:0": {"rbps": "1", "wbps": "max", "riops": "max", "wiops": "3"}
    }


def test_v1_be_class_limits_on_the_besteffort_cgroup(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree, node_qos = _node(tmp_path)
    spec = _spec([_block(readBPS=1 << 20, writeIOPS=100, ioWeightPercent=50)])
    with caplog.at_level(logging.WARNING, "koordlet.qos"):
        for _ in range(3):
            report = node_qos.reconcile(spec, [], MetricCache(), NOW)
    assert report.annotation_errors == []
    be = "kubepods/besteffort"
    assert tree.read(be, "blkio.throttle.read_bps_device", "blkio") == f"{VDA} {1 << 20}"
    assert tree.read(be, "blkio.throttle.write_iops_device", "blkio") == f"{VDA} 100"
    # 0 is "no limit": a device the file does not list already has it, nothing is written
    assert tree.read(be, "blkio.throttle.read_iops_device", "blkio") == ""
    # an upstream kernel has no blk-iocost on v1: said once, the limits still written
    missing = [r.getMessage() for r in caplog.records if "blkio.cost.weight" in r.getMessage()]
    assert len(missing) == 1, missing
    assert "ioWeightPercent skipped" in missing[0]


def test_v1_weight_where_the_kernel_has_blk_iocost(tmp_path: Path) -> None:
    tree, node_qos = _node(tmp_path, anolis=True)
    node_qos.reconcile(_spec([_block("vda1", ioWeightPercent=40)]), [], MetricCache(), NOW)
    assert tree.read("kubepods/besteffort", "blkio.cost.weight", "blkio") == f"{VDA} 40"


def test_a_disabled_class_resets_the_devices_it_left(tmp_path: Path) -> None:
    tree, node_qos = _node(tmp_path)
    be = tmp_path / "sys/fs/cgroup/blkio/kubepods/besteffort"
    (be / "blkio.throttle.write_bps_device").write_text(f"{VDA} 4096\n")
    node_qos.reconcile(_spec([_block(writeBPS=4096)], enable=False), [], MetricCache(), NOW)
    assert tree.read("kubepods/besteffort", "blkio.throttle.write_bps_device", "blkio") == f"{VDA} 0"


@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"])
def test_v2_io_max_and_io_weight_lines(tmp_path: Path, driver: str) -> None:
    tree = CgroupTree(tmp_path, 2)
    tree.block_device("vda", VDA)
    qos_dirs = (
        ("kubepods.slice", "kubepods.slice/kubepods-besteffort.slice")
        if driver == "systemd"
        else ("kubepods", "kubepods/besteffort")
    )
    for qos_dir in qos_dirs:
        tree.add(qos_dir)
    node_qos = NodeQoS(HostFS(tmp_path), 2, GATES)
    assert node_qos.layout.driver == driver
    spec = _spec([_block(readBPS=1 << 20, writeIOPS=100, ioWeightPercent=50)])
    node_qos.reconcile(spec, [], MetricCache(), NOW)
    be = qos_dirs[1]
    assert tree.read(be, "io.max") == f"{VDA} rbps={1 << 20} wbps=max riops=max wiops=100"
    assert tree.read(be, "io.weight") == f"{VDA} 50"
    # the kernel's own rendering of what was written counts as applied: nothing is rewritten
    (tmp_path / f"sys/fs/cgroup/{be}/io.weight").write_text(f"default 100\n{VDA} 50\n")
    node_qos.reconcile(spec, [], MetricCache(), NOW)
    assert tree.read(be, "io.weight") == f"default 100\n{VDA} 50"


def test_a_pods_annotation_on_its_pod_cgroup_and_its_problems_reported(tmp_path: Path) -> None:
    tree, node_qos = _node(tmp_path)

    def annotated(name: str, value: str, qos: str | None = "LS") -> QoSPod:
        return qos_pod(pod(name, qos=qos, annotations={"koordinator.sh/blkioQOS": value}))

    good = '{"blocks": [{"name": "/dev/vda", "type": "device", "ioCfg": {"writeBPS": 2097152}}]}'
    pods = _with_cgroups(
        tree,
        node_qos,
        annotated("ls", good),
        annotated("no-qos-class", good, qos=None),
        annotated("malformed", "{not json"),
        annotated("unknown-disk", '{"blocks": [{"name": "sdz", "type": "device", "ioCfg": {}}]}'),
        annotated("volume-group", '{"blocks": [{"name": "vg0", "type": "volumegroup", "ioCfg": {}}]}'),
    )
    report = node_qos.reconcile(_spec(None), pods, MetricCache(), NOW)
    written = {
        p.name: tree.read(
            node_qos.layout.pod_dir(p.kube_qos, p.uid), "blkio.throttle.write_bps_device", "blkio"
        )
        for p in pods
    }
    assert written == {
        "ls": f"{VDA} 2097152",
        "no-qos-class": "",  # Koordinator leaves pods without a QoS class alone
        "malformed": "",
        "unknown-disk": "",
        "volume-group": "",
    }
    problems = {p.name: problem for p, problem in report.annotation_errors}
    assert set(problems) == {"malformed", "unknown-disk", "volume-group"}
    assert "koordinator.sh/blkioQOS" in problems["malformed"]
    assert "no block device 'sdz'" in problems["unknown-disk"]
    assert "only type 'device'" in problems["volume-group"]


def test_a_pod_whose_cgroup_is_not_there_yet_waits_silently(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, node_qos = _node(tmp_path)
    late = qos_pod(
        pod("late", qos="BE", kube_qos="BestEffort", annotations={"koordinator.sh/blkioQOS": "{}"})
    )
    with caplog.at_level(logging.WARNING, "koordlet.qos"):
        node_qos.reconcile(_spec(None), [late], MetricCache(), NOW)
    assert not [r for r in caplog.records if "blkio" in r.getMessage()]


def test_no_blkio_controller_is_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _, node_qos = _node(tmp_path)
    for name in ("read_bps", "write_bps", "read_iops", "write_iops"):
        (tmp_path / f"sys/fs/cgroup/blkio/kubepods/besteffort/blkio.throttle.{name}_device").unlink()
    with caplog.at_level(logging.WARNING, "koordlet.qos"):
        for _ in range(3):
            node_qos.reconcile(_spec([_block(readBPS=1)]), [], MetricCache(), NOW)
    said = [r.getMessage() for r in caplog.records if "blkio QoS: no" in r.getMessage()]
    assert len(said) == 1, said


def test_cgroup_root_iocost_where_the_kernel_has_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tree, node_qos = _node(tmp_path, version=2)
    root = {"cgroupRoot": {"blkioQOS": {"enable": True, "blocks": [_block(readLatency=2000)]}}}
    with caplog.at_level(logging.WARNING, "koordlet.qos"):
        node_qos.reconcile(_spec(None, **root), [], MetricCache(), NOW)
    assert [r.getMessage() for r in caplog.records if "io.cost.qos" in r.getMessage()] == [
        "blkio QoS: the kernel has no io.cost.qos: cgroupRoot blkioQOS skipped"
    ]
    (tmp_path / "sys/fs/cgroup/io.cost.qos").write_text("")
    (tmp_path / "sys/fs/cgroup/io.cost.model").write_text("")
    node_qos.reconcile(_spec(None, **root), [], MetricCache(), NOW)
    assert tree.read("", "io.cost.qos") == f"{VDA} enable=1 ctrl=user rpct=95 rlat=2000 wpct=95 wlat=3000"
    assert tree.read("", "io.cost.model") == f"{VDA} ctrl=auto"
    # the kernel renders it with floats and more fields: that holds what was asked
    (tmp_path / "sys/fs/cgroup/io.cost.qos").write_text(
        f"{VDA} enable=1 ctrl=user rpct=95.00 rlat=2000 wpct=95.00 wlat=3000 min=1.00 max=10000.00\n"
    )
    disabled = {"cgroupRoot": {"blkioQOS": {"enable": False}}}
    node_qos.reconcile(_spec(None, **disabled), [], MetricCache(), NOW)
    assert tree.read("", "io.cost.qos") == f"{VDA} enable=0"
