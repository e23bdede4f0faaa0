"""Pods' cgroups found as kubelet names them, read through cgroups v1 and v2, on a fake host tree."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from koordlet.cgroups import CgroupReader, detect_version, discover_pods, parse_idle_page_stats
from koordlet.collectors import series
from koordlet.collectors.base import CollectorSet
from koordlet.collectors.cold_memory import ColdMemoryCollector
from koordlet.collectors.node import NodeCollector
from koordlet.collectors.pods import PodCollector
from koordlet.collectors.system import SystemCollector
from koordlet.fs import HostFS
from koordlet.metric_cache import MetricCache
from tests.koordlet.fake_host import Driver, FakeHost

UID_A = "7712555c-ce62-454a-9e18-9ff0217b8941"
UID_B = "0b6b2a4e-1f0a-4c57-a1a4-58c8d1ef2e11"
UID_C = "f1a2b3c4-d5e6-4f70-8a9b-0c1d2e3f4a5b"
CONTAINER = "a" * 64
GI = 1 << 30

LAYOUTS = [(1, "cgroupfs"), (1, "systemd"), (2, "cgroupfs"), (2, "systemd")]


class FakeCPUTimes(tuple[float, ...]):
    """psutil's scputimes shape: user, nice, system, idle, iowait."""

    def __new__(cls, busy: float, idle: float) -> FakeCPUTimes:
        return super().__new__(cls, (busy, 0.0, 0.0, idle, 0.0))

    @property
    def idle(self) -> float:
        return self[3]

    @property
    def iowait(self) -> float:
        return self[4]


class FakeMemory:
    def __init__(self, total: int, available: int, free: int) -> None:
        self.total, self.available, self.free = total, available, free


class FakeNode:
    """Node counters the test advances: busy CPU seconds and memory."""

    def __init__(self) -> None:
        self.busy = 0.0
        self.memory = FakeMemory(total=16 * GI, available=10 * GI, free=4 * GI)

    def collector(self) -> NodeCollector:
        return NodeCollector(
            cpu_times=lambda: FakeCPUTimes(self.busy, 1000.0), virtual_memory=lambda: self.memory, cpu_count=8
        )


def _reader(tmp_path: Path, version: int) -> CgroupReader:
    fs = HostFS(tmp_path)
    detected = detect_version(fs)
    assert detected == version
    return CgroupReader(fs, detected)


@pytest.mark.parametrize(("version", "driver"), LAYOUTS)
def test_pods_are_found_by_uid_in_every_qos_group(tmp_path: Path, version: Any, driver: Driver) -> None:
    host = FakeHost(tmp_path, version)
    host.add_pod(driver, UID_A, 0, GI, qos="guaranteed", containers={CONTAINER: (0, GI)})
    host.add_pod(driver, UID_B, 0, GI, qos="burstable")
    host.add_pod(driver, UID_C, 0, GI, qos="besteffort")
    pods = {pod.uid: pod for pod in discover_pods(_reader(tmp_path, version))}
    assert set(pods) == {UID_A, UID_B, UID_C}
    assert list(pods[UID_A].containers) == [CONTAINER]
    assert pods[UID_B].containers == {}


@pytest.mark.parametrize(("version", "driver"), LAYOUTS)
def test_pod_and_container_usage_from_cgroup_counters(tmp_path: Path, version: Any, driver: Driver) -> None:
    host = FakeHost(tmp_path, version)
    path = host.add_pod(driver, UID_A, 5 * 10**9, 2 * GI, containers={CONTAINER: (4 * 10**9, GI)})
    cache = MetricCache()
    pods = PodCollector(_reader(tmp_path, version))
    pods.collect(100.0, cache)
    assert cache.query((series.POD_CPU, UID_A), 0, 200) is None  # one counter reading is no rate yet
    host.set_cpu(path, 5 * 10**9 + 3 * 10**9)  # 3 CPU-seconds in 2 s: 1.5 cores
    host.set_cpu(
        f"{path}/{'cri-containerd-' + CONTAINER + '.scope' if driver == 'systemd' else CONTAINER}", 5 * 10**9
    )
    pods.collect(102.0, cache)
    assert cache.latest((series.POD_CPU, UID_A)) == pytest.approx(1.5)
    assert cache.latest((series.CONTAINER_CPU, CONTAINER)) == pytest.approx(0.5)
    assert cache.latest((series.POD_MEMORY, UID_A)) == 2 * GI
    assert cache.latest((series.CONTAINER_MEMORY, CONTAINER)) == GI


@pytest.mark.parametrize("version", [1, 2])
def test_memory_with_and_without_page_cache(tmp_path: Path, version: Any) -> None:
    host = FakeHost(tmp_path, version)
    path = host.add_pod("cgroupfs", UID_A, 0, 0)
    host.set_memory(path, anon=3 * GI, file=2 * GI, unevictable=GI)
    stat = _reader(tmp_path, version).memory_stat(path)
    assert stat.usage == 4 * GI  # anonymous + unevictable
    assert stat.usage_with_page_cache == 6 * GI


def test_hybrid_host_reads_v1_controllers_beside_the_unified_mount(tmp_path: Path) -> None:
    host = FakeHost(tmp_path, 1)
    (tmp_path / "sys/fs/cgroup/unified").mkdir()
    (tmp_path / "sys/fs/cgroup/unified/cgroup.controllers").write_text("")
    host.add_pod("cgroupfs", UID_A, 10, GI)
    assert detect_version(HostFS(tmp_path)) == 1


def test_kubelet_cgroup_root_is_honoured(tmp_path: Path) -> None:
    host = FakeHost(tmp_path, 2)
    host.set_cpu(f"custom/kubepods/pod{UID_A}", 0)
    host.set_memory(f"custom/kubepods/pod{UID_A}", GI)
    reader = _reader(tmp_path, 2)
    assert discover_pods(reader) == []
    assert [pod.uid for pod in discover_pods(reader, "/custom")] == [UID_A]


def test_idle_page_stats_sum_every_bucket() -> None:
    text = "# version: 1.0\n# buckets: 1,2\n  csei 4096 8192\n  cfei 0 4096\n  slab 0 0\n"
    assert parse_idle_page_stats(text) == 16384


@pytest.mark.parametrize("name", ["memory.idle_page_stats", "memory.idle_stat"])
def test_cold_memory_gives_usage_with_hot_page_cache(tmp_path: Path, name: str) -> None:
    host = FakeHost(tmp_path, 1)
    path = host.add_pod("cgroupfs", UID_A, 0, 0)
    host.set_memory(path, anon=GI, file=GI)
    host.set_idle_page_stats("/", cold_bytes=GI, name=name)
    host.set_idle_page_stats(path, cold_bytes=GI // 4, name=name)
    node = FakeNode()
    reader = _reader(tmp_path, 1)
    pods = PodCollector(reader)
    cold = ColdMemoryCollector(reader, node.collector(), pods)
    cache = MetricCache()
    CollectorSet([node.collector(), pods, cold]).collect(10.0, cache)
    assert cold.supported
    assert cache.latest((series.NODE_MEMORY_WITH_HOT_PAGE,)) == 16 * GI - 4 * GI - GI  # total - free - cold
    assert cache.latest((series.POD_MEMORY_WITH_HOT_PAGE, UID_A)) == 2 * GI - GI // 4


def test_no_idle_page_stats_means_cold_memory_unsupported(tmp_path: Path) -> None:
    FakeHost(tmp_path, 2)
    reader = _reader(tmp_path, 2)
    cold = ColdMemoryCollector(reader, FakeNode().collector(), PodCollector(reader))
    cache = MetricCache()
    cold.collect(1.0, cache)
    assert not cold.supported
    assert len(cache) == 0


def test_node_cpu_is_busy_time_over_wall_time_and_system_is_node_minus_pods(tmp_path: Path) -> None:
    host = FakeHost(tmp_path, 2)
    path = host.add_pod("systemd", UID_A, 0, 3 * GI)
    node = FakeNode()
    reader = _reader(tmp_path, 2)
    pods = PodCollector(reader)
    collectors = CollectorSet([node.collector(), pods, SystemCollector(pods)])
    cache = MetricCache()
    collectors.collect(0.0, cache)
    node.busy += 8.0  # 8 busy CPU-seconds in 2 s: 4 cores
    host.set_cpu(path, 3 * 10**9)  # the pod used 1.5 of them
    collectors.collect(2.0, cache)
    assert cache.latest((series.NODE_CPU,)) == pytest.approx(4.0)
    assert cache.latest((series.NODE_MEMORY,)) == 6 * GI  # total - available
    assert cache.latest((series.NODE_MEMORY_WITH_PAGE_CACHE,)) == 12 * GI  # total - free
    assert cache.latest((series.SYSTEM_CPU,)) == pytest.approx(2.5)
    assert cache.latest((series.SYSTEM_MEMORY,)) == 3 * GI
    node.busy += 20.0  # 10 cores in 2 s on an 8-CPU node: the interval was measured short
    collectors.collect(4.0, cache)
    assert cache.latest((series.NODE_CPU,)) == 8.0


class Broken:
    name = "broken"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    def collect(self, now: float, cache: MetricCache) -> None:
        self.calls += 1
        raise self.error


def test_a_failing_collector_is_logged_once_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    broken = Broken(PermissionError(13, "Permission denied", "/sys/fs/cgroup/memory/memory.stat"))
    node = FakeNode()
    collectors = CollectorSet([broken, node.collector()])
    cache = MetricCache()
    with caplog.at_level(logging.WARNING, logger="koordlet.collectors"):
        for now in (1.0, 2.0, 3.0):
            collectors.collect(now, cache)
    assert broken.calls == 3
    assert cache.latest((series.NODE_MEMORY,)) == 6 * GI  # the others still collect
    warnings = [r.getMessage() for r in caplog.records if "broken" in r.getMessage()]
    assert len(warnings) == 1
    assert "Permission denied" in warnings[0]


def test_missing_cgroup_files_skip_the_pod_not_the_collector(tmp_path: Path) -> None:
    host = FakeHost(tmp_path, 1)
    host.add_pod("cgroupfs", UID_A, 0, GI)
    (tmp_path / f"sys/fs/cgroup/cpuacct/kubepods/burstable/pod{UID_B}").mkdir(parents=True)  # no files yet
    cache = MetricCache()
    PodCollector(_reader(tmp_path, 1)).collect(1.0, cache)
    assert cache.latest((series.POD_MEMORY, UID_A)) == GI
    assert cache.latest((series.POD_MEMORY, UID_B)) is None
