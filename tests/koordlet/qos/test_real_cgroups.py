"""The writer against this machine's kernel: a scratch cgroup gets cpu QoS, cpuset and quota and the
kernel's values are read back. Skipped (with the reason) where the hierarchy is absent or not writable."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from apis.core import Node, Pod
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.collectors import series
from koordlet.fs import HostFS
from koordlet.metric_cache import MetricCache
from koordlet.qos.evictor import Evictor
from koordlet.qos.manager import QoSManager
from koordlet.qos.node_qos import NodeQoS
from koordlet.qos.resources import CgroupResource as R
from koordlet.qos.slo import effective_spec
from koordlet.qos.writer import CgroupWriter
from koordlet.states.resources import Kind
from koordlet.states.store import States

CGROUP = Path("/sys/fs/cgroup")


def _scratch(parent: Path) -> Iterator[str]:
    if not parent.is_dir():
        pytest.skip(f"{parent} is not mounted on this machine")
    name = f"koordpy-test-{uuid.uuid4().hex[:8]}"
    try:
        (parent / name).mkdir()
    except OSError as exc:
        pytest.skip(f"cannot create a cgroup under {parent}: {exc}")
    try:
        yield name
    finally:
        (parent / name).rmdir()


@pytest.fixture
def v1_cpu() -> Iterator[str]:
    if (CGROUP / "cgroup.controllers").exists():
        pytest.skip("pure cgroups v2 host: no v1 cpu controller")
    mount = CGROUP / "cpu" if (CGROUP / "cpu").is_dir() else CGROUP / "cpu,cpuacct"
    yield from _scratch(mount)


@pytest.fixture
def v1_cpuset() -> Iterator[str]:
    yield from _scratch(CGROUP / "cpuset")


def test_v1_cpu_knobs_read_back_from_the_kernel(v1_cpu: str) -> None:
    writer = CgroupWriter(HostFS("/"), 1)
    assert writer.write(v1_cpu, R.CPU_SHARES, 2)
    assert writer.write(v1_cpu, R.CPU_CFS_QUOTA, 50000)
    assert writer.read_int(v1_cpu, R.CPU_SHARES) == 2
    assert writer.read_int(v1_cpu, R.CPU_CFS_QUOTA) == 50000
    if writer.supported(v1_cpu, R.CPU_IDLE):
        assert writer.write(v1_cpu, R.CPU_IDLE, 1)
        assert writer.read_int(v1_cpu, R.CPU_IDLE) == 1
    if writer.supported(v1_cpu, R.CPU_BURST):
        assert writer.write(v1_cpu, R.CPU_BURST, 10000)
        assert writer.read_int(v1_cpu, R.CPU_BURST) == 10000
    assert writer.write(v1_cpu, R.CPU_CFS_QUOTA, -1)
    assert writer.read_int(v1_cpu, R.CPU_CFS_QUOTA) == -1
    # the kernel's own refusal (shares out of range are clamped, a bad quota is EINVAL) is skipped, not raised
    assert not writer.write(v1_cpu, R.CPU_CFS_QUOTA, 1)
    assert writer.failures
    assert writer.failures[-1].reason.startswith("EINVAL")
    if not writer.supported(v1_cpu, R.CPU_BVT_WARP_NS):
        assert not writer.write(v1_cpu, R.CPU_BVT_WARP_NS, 2)


def test_v1_cpuset_read_back_from_the_kernel(v1_cpuset: str) -> None:
    writer = CgroupWriter(HostFS("/"), 1)
    cpus = sorted(os.sched_getaffinity(0))
    want = (
        f"{cpus[0]}"
        if len(cpus) == 1
        else f"{cpus[0]}-{cpus[1]}"
        if cpus[1] == cpus[0] + 1
        else f"{cpus[0]},{cpus[1]}"
    )
    assert writer.write(v1_cpuset, R.CPUSET_CPUS, want)
    assert writer.read(v1_cpuset, R.CPUSET_CPUS) == want


def test_v2_cpu_max_and_weight_read_back_from_the_kernel() -> None:
    unified = CGROUP if (CGROUP / "cgroup.controllers").exists() else CGROUP / "unified"
    if not (unified / "cgroup.controllers").exists():
        pytest.skip("no cgroups v2 hierarchy mounted")
    if "cpu" not in (unified / "cgroup.controllers").read_text().split():
        pytest.skip(f"the cpu controller is bound to v1, not available in the v2 hierarchy at {unified}")
    hierarchy = "sys/fs/cgroup" if unified == CGROUP else "sys/fs/cgroup/unified"
    for name in _scratch(unified):
        if "cpu" not in (unified / name / "cgroup.controllers").read_text().split():
            pytest.skip(f"cpu is not enabled in {unified}/cgroup.subtree_control")
        writer = CgroupWriter(HostFS("/"), 2)
        path = f"{name}" if hierarchy == "sys/fs/cgroup" else f"unified/{name}"
        assert writer.write(path, R.CPU_CFS_QUOTA, 50000)
        assert writer.read(path, R.CPU_CFS_QUOTA) == "50000 100000"
        assert writer.write(path, R.CPU_SHARES, 1024)
        assert writer.read(path, R.CPU_SHARES) == "39"


def test_v2_knob_the_kernel_lacks_is_reported_and_skipped() -> None:
    """On a hybrid host the unified hierarchy has no cpu files: the writer says so and goes on."""
    unified = CGROUP / "unified"
    if (
        not (unified / "cgroup.controllers").exists()
        or "cpu" in (unified / "cgroup.controllers").read_text().split()
    ):
        pytest.skip("needs a hybrid host whose v2 hierarchy lacks the cpu controller")
    for name in _scratch(unified):
        writer = CgroupWriter(HostFS("/"), 2)
        assert not writer.write(f"unified/{name}", R.CPU_CFS_QUOTA, 50000)
        assert not (unified / name / "cpu.max").exists()
        assert writer.failures[0].reason.startswith("missing")


def test_node_qos_on_the_kernels_cgroups(v1_cpu: str) -> None:
    """BE suppression (cfsQuota, then cpuset) and coreSched's cpu.idle through NodeQoS, with a
    scratch cgroup as kubelet's cgroup root, read back from the kernel."""
    if not (CGROUP / "cpuset").is_dir():
        pytest.skip("no v1 cpuset controller mounted")
    cpus = sorted(os.sched_getaffinity(0))[:2]
    cpuset_root = CGROUP / "cpuset"
    allowed = ",".join(str(c) for c in cpus)
    mems = (cpuset_root / "cpuset.mems").read_text().strip().split(",")[0].split("-")[0]
    cpu_mount = CGROUP / "cpu" if (CGROUP / "cpu").is_dir() else CGROUP / "cpu,cpuacct"
    made: list[Path] = []
    try:
        for base in (cpu_mount, cpuset_root):
            for part in (v1_cpu, f"{v1_cpu}/kubepods", f"{v1_cpu}/kubepods/besteffort"):
                path = base / part
                if not path.exists():
                    path.mkdir()
                    made.append(path)
                if base == cpuset_root:
                    (path / "cpuset.mems").write_text(mems)
                    (path / "cpuset.cpus").write_text(allowed)
        gates = KoordletFeatureGates()
        node_qos = NodeQoS(HostFS("/"), 1, gates, cgroup_root=v1_cpu)
        be = f"{v1_cpu}/kubepods/besteffort"
        cache = MetricCache()
        now = time.time()
        for t in range(-3, 1):
            cache.append((series.NODE_CPU,), now + t, 1.0)
        quota = effective_spec(
            NodeSLOSpec.model_validate(
                {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}
            )
        )
        # len(cpus) cores x 65 % - 1 core of system usage
        suppress = len(cpus) * 650 - 1000
        report = node_qos.reconcile(quota, [], cache, now)
        expected = max(suppress * 100, 2000)
        assert report.be_quota == expected
        assert int((cpu_mount / be / "cpu.cfs_quota_us").read_text()) == expected
        cpuset = effective_spec(NodeSLOSpec.model_validate({"resourceUsedThresholdWithBE": {"enable": True}}))
        report = node_qos.reconcile(cpuset, [], cache, now)
        assert int((cpu_mount / be / "cpu.cfs_quota_us").read_text()) == -1
        assert (cpuset_root / be / "cpuset.cpus").read_text().strip() == report.be_cpuset
        if (cpu_mount / be / "cpu.idle").exists():
            core_sched = effective_spec(
                NodeSLOSpec.model_validate(
                    {
                        "resourceQOSStrategy": {
                            "policies": {"cpuPolicy": "coreSched"},
                            "beClass": {"cpuQOS": {"enable": True}},
                        }
                    }
                )
            )
            node_qos.reconcile(core_sched, [], cache, now)
            assert (cpu_mount / be / "cpu.idle").read_text().strip() == "1"
    finally:
        for path in reversed(made):
            path.rmdir()


def test_cpu_normalization_on_the_kernels_cgroups(v1_cpu: str) -> None:
    """A ratio of 1.25 on the node: an LS pod limited to 2 cores gets 160000 µs per 100000 µs, and
    its container, set by kubelet to the full 200000, is brought down first (the kernel refuses a
    parent quota below a child's)."""
    cpu_mount = CGROUP / "cpu" if (CGROUP / "cpu").is_dir() else CGROUP / "cpu,cpuacct"
    pod_dir = f"{v1_cpu}/kubepods/burstable/poduid-ls"
    parts = [f"{v1_cpu}/kubepods", f"{v1_cpu}/kubepods/burstable", pod_dir, f"{pod_dir}/c0"]
    made: list[Path] = []
    try:
        for part in parts:
            (cpu_mount / part).mkdir()
            made.append(cpu_mount / part)
        writer = CgroupWriter(HostFS("/"), 1)
        assert writer.write(pod_dir, R.CPU_CFS_QUOTA, 200000)
        assert writer.write(f"{pod_dir}/c0", R.CPU_CFS_QUOTA, 200000)
        gates = KoordletFeatureGates(cpu_normalization=True)
        states = States()
        node = {
            "metadata": {"name": "n", "annotations": {"node.koordinator.sh/cpu-normalization-ratio": "1.25"}}
        }
        states.replace(Kind.NODE, [Node.model_validate(node)])
        pod = {
            "metadata": {
                "name": "ls",
                "namespace": "default",
                "uid": "uid-ls",
                "labels": {"koordinator.sh/qosClass": "LS"},
            },
            "spec": {"nodeName": "n", "containers": [{"name": "c0", "resources": {"limits": {"cpu": "2"}}}]},
            "status": {"qosClass": "Burstable", "phase": "Running"},
        }
        states.replace(Kind.POD, [Pod.model_validate(pod)])
        states.replace(Kind.NODE_SLO, [])
        node_qos = NodeQoS(HostFS("/"), 1, gates, cgroup_root=v1_cpu)
        manager = QoSManager("n", node_qos, MetricCache(), gates)

        class _API:
            async def evict(self, namespace: str, name: str) -> None: ...

            async def pod_event(
                self, pod: Pod, reason: str, message: str, event_type: str, host: str
            ) -> None: ...

        asyncio.run(manager.round(states, Evictor(_API())))
        assert (cpu_mount / pod_dir / "cpu.cfs_quota_us").read_text().strip() == "160000"
        assert (cpu_mount / pod_dir / "c0" / "cpu.cfs_quota_us").read_text().strip() == "160000"
    finally:
        for path in reversed(made):
            path.rmdir()
