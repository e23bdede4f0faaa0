"""The writer against this machine's kernel: a scratch cgroup gets cpu QoS, cpuset and quota and the
kernel's values are read back. Skipped (with the reason) where the hierarchy is absent or not writable."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from koordlet.fs import HostFS
from koordlet.qos.resources import CgroupResource as R
from koordlet.qos.writer import CgroupWriter

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
