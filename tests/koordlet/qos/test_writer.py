"""The cgroup writer on fake v1/v2 trees (both drivers) and the resctrl writer's formulas."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from koordlet.fs import HostFS
from koordlet.qos.layout import CgroupLayout
from koordlet.qos.resctrl import ResctrlWriter, l3_mask, mb_value, render_schemata
from koordlet.qos.resources import CgroupResource as R
from koordlet.qos.resources import shares_to_weight
from koordlet.qos.writer import CgroupWriter
from tests.koordlet.qos.cgroupfs import CgroupTree, resctrl_tree

UID = "1b2c3d4e-0000-4000-8000-000000000001"


@pytest.mark.parametrize("cpu_mount", ["cpu", "cpu,cpuacct"])
def test_v1_files_per_controller(tmp_path: Path, cpu_mount: str) -> None:
    tree = CgroupTree(tmp_path, 1, anolis=True, cpu_mount=cpu_mount)
    layout = CgroupLayout.detect(HostFS(tmp_path), f"sys/fs/cgroup/{cpu_mount}")
    be = layout.qos_dir("BestEffort")
    tree.add(be)
    writer = CgroupWriter(HostFS(tmp_path), 1)
    assert writer.write(be, R.CPUSET_CPUS, "0-3")
    assert writer.write(be, R.CPU_CFS_QUOTA, 250000)
    assert writer.write(be, R.CPU_SHARES, 2)
    assert writer.write(be, R.CPU_BURST, 50000)
    assert writer.write(be, R.CPU_BVT_WARP_NS, -1)
    assert writer.write(be, R.CPU_IDLE, 1)
    assert writer.write(be, R.MEMORY_LIMIT, 1 << 30)
    assert tree.read(be, "cpuset.cpus", "cpuset") == "0-3"
    assert tree.read(be, "cpu.cfs_quota_us") == "250000"
    assert tree.read(be, "cpu.shares") == "2"
    assert tree.read(be, "cpu.cfs_burst_us") == "50000"
    assert tree.read(be, "cpu.bvt_warp_ns") == "-1"
    assert tree.read(be, "cpu.idle") == "1"
    assert tree.read(be, "memory.limit_in_bytes", "memory") == str(1 << 30)
    assert writer.read_int(be, R.CPU_CFS_QUOTA) == 250000
    assert writer.failures == []


@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"])
def test_v2_unified_files_and_conversions(tmp_path: Path, driver: str) -> None:
    tree = CgroupTree(tmp_path, 2)
    if driver == "systemd":
        tree.add("kubepods.slice")
    layout = CgroupLayout.detect(HostFS(tmp_path), "sys/fs/cgroup")
    assert layout.driver == driver
    pod = layout.pod_dir("BestEffort", UID)
    tree.add(pod)
    writer = CgroupWriter(HostFS(tmp_path), 2)
    assert writer.write(pod, R.CPU_CFS_QUOTA, 150000)
    assert tree.read(pod, "cpu.max") == "150000 100000"
    assert writer.read_int(pod, R.CPU_CFS_QUOTA) == 150000
    assert writer.write(pod, R.CPU_CFS_QUOTA, -1)
    assert tree.read(pod, "cpu.max") == "max 100000"
    assert writer.read_int(pod, R.CPU_CFS_QUOTA) == -1
    assert writer.write(pod, R.CPU_SHARES, 1024)
    assert tree.read(pod, "cpu.weight") == "39"
    assert writer.write(pod, R.CPU_BURST, 20000)
    assert tree.read(pod, "cpu.max.burst") == "20000"
    assert writer.write(pod, R.MEMORY_LIMIT, -1)
    assert tree.read(pod, "memory.max") == "max"
    assert writer.write(pod, R.CPUSET_CPUS, "2,4-5")
    assert tree.read(pod, "cpuset.cpus") == "2,4-5"
    if driver == "systemd":
        slice_uid = UID.replace("-", "_")
        assert pod == f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{slice_uid}.slice"
    else:
        assert pod == f"kubepods/besteffort/pod{UID}"


def test_shares_to_weight_matches_kubelet() -> None:
    assert [shares_to_weight(v) for v in (2, 1024, 262144, 1, 10**9)] == [1, 39, 10000, 1, 10000]


def test_missing_knob_is_reported_once_and_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    CgroupTree(tmp_path, 2)  # upstream kernel: no cpu.bvt_warp_ns
    writer = CgroupWriter(HostFS(tmp_path), 2)
    with caplog.at_level(logging.WARNING, logger="koordlet.qos"):
        assert not writer.write("", R.CPU_BVT_WARP_NS, 2)
        assert not writer.write("", R.CPU_BVT_WARP_NS, 2)
        assert not writer.write("kubepods/gone", R.CPU_IDLE, 1)
    assert [f.file for f in writer.failures] == [
        "sys/fs/cgroup/cpu.bvt_warp_ns",
        "sys/fs/cgroup/kubepods/gone/cpu.idle",
    ]
    assert len([r for r in caplog.records if "cpu.bvt_warp_ns" in r.getMessage()]) == 1
    assert not (tmp_path / "sys/fs/cgroup/cpu.bvt_warp_ns").exists()


def test_permission_error_is_reported_and_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    CgroupTree(tmp_path, 1)
    writer = CgroupWriter(HostFS(tmp_path), 1)

    def denied(self: Path, data: str) -> int:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(Path, "write_text", denied)
    assert not writer.write("", R.CPU_SHARES, 2)
    assert writer.failures[0].reason.startswith("EPERM")


def test_a_refused_write_is_retried_with_backoff_and_reported_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    CgroupTree(tmp_path, 1)
    now = [100.0]
    writer = CgroupWriter(HostFS(tmp_path), 1, clock=lambda: now[0])
    tries: list[str] = []
    refuse = [True]
    real_write = Path.write_text

    def busy(self: Path, data: str) -> int:
        tries.append(data)
        if refuse[0]:
            raise OSError(16, "Device or resource busy")
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_text", busy)
    with caplog.at_level(logging.WARNING, "koordlet.qos"):
        # every round asks again; the kernel is asked at 100, 101, 103, 107 (1, 2, 4 s apart)
        for t in (100.0, 100.5, 101.0, 102.0, 103.0, 106.0, 107.0):
            now[0] = t
            assert not writer.write("", R.CPU_SHARES, 2)
        assert len(tries) == 4
        assert writer.retry_in("", R.CPU_SHARES) == 8.0
        # another value is tried at once
        assert not writer.write("", R.CPU_SHARES, 4)
        assert len(tries) == 5
        refuse[0] = False
        now[0] = 108.0
        assert writer.write("", R.CPU_SHARES, 4)
        assert writer.retry_in("", R.CPU_SHARES) is None
    said = [r.getMessage() for r in caplog.records if "EBUSY" in r.getMessage()]
    assert len(said) == 1, said
    assert "retrying with backoff" in said[0], said
    assert [f.reason.split(":")[0] for f in writer.failures] == ["EBUSY"]


def test_the_backoff_never_exceeds_a_minute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    CgroupTree(tmp_path, 1)
    now = [0.0]
    writer = CgroupWriter(HostFS(tmp_path), 1, clock=lambda: now[0])

    def refused(self: Path, data: str) -> int:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(Path, "write_text", refused)
    delays = []
    for _ in range(9):
        writer.write("", R.CPU_SHARES, 2)
        delays.append(writer.retry_in("", R.CPU_SHARES) or 0.0)
        now[0] += delays[-1]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]


@pytest.mark.parametrize(
    ("ways", "start", "end", "mask"),
    [(11, 0, 100, 0x7FF), (11, 0, 30, 0xF), (12, 0, 30, 0xF), (20, 10, 50, 0x3FC), (11, 30, 100, 0x7F0)],
)
def test_l3_mask(ways: int, start: int, end: int, mask: int) -> None:
    assert l3_mask(ways, start, end) == mask


def test_mb_values_intel_and_amd() -> None:
    assert [mb_value("intel", p) for p in (100, 55, 1, 0, 101)] == [100, 60, 10, None, None]
    assert [mb_value("amd", p) for p in (100, 50, 1, 0)] == [2048, 80, 1, None]


@pytest.mark.parametrize(("vendor", "mb"), [("GenuineIntel", "60"), ("AuthenticAMD", "88")])
def test_resctrl_group_schemata_and_tasks(tmp_path: Path, vendor: str, mb: str) -> None:
    base = resctrl_tree(tmp_path, cbm="7ff", l3_ids=2, vendor=vendor)
    writer = ResctrlWriter(HostFS(tmp_path))
    info = writer.info()
    assert info is not None
    assert (info.ways, info.l3_ids, info.mb_ids) == (11, ("0", "1"), ("0", "1"))
    assert writer.write_schemata("BE", render_schemata(info, 0, 30, 55))
    assert (base / "BE/schemata").read_text() == f"L3:0=f;1=f\nMB:0={mb};1={mb}\n"
    assert writer.add_tasks("BE", [10, 11]) == 2
    assert writer.add_tasks("BE", [10, 12]) == 1
    assert writer.tasks("BE") == {10, 11, 12}


def test_resctrl_without_mb_writes_l3_only(tmp_path: Path) -> None:
    resctrl_tree(tmp_path, cbm="fff", l3_ids=1, mb=False)
    writer = ResctrlWriter(HostFS(tmp_path))
    info = writer.info()
    assert info is not None
    assert render_schemata(info, 0, 100, 100) == "L3:0=fff\n"
    assert render_schemata(info, 0, 100, 0) == "L3:0=fff\n"
