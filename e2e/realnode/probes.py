"""What a test reads on the real node's host: a pod's cgroups (v1 controllers or the v2 tree, as the
host mounts them), its container's cpuset and CFS quota, and the CPU pools koordlet reports."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from apis.cpulist import parse_cpus
from apis.extension.numa import ANNOTATION_NODE_BE_CPU_SHARED_POOLS, ANNOTATION_NODE_CPU_SHARED_POOLS
from e2e.cluster.controlplane import ControlPlane
from e2e.realnode.config import RealNodeConfig
from e2e.workloads import get_object


def pod_cpu_seconds(c: RealNodeConfig, uid: str) -> float:
    """The CPU time of a pod from its cgroup on the host: ``cpuacct.usage`` (v1) or ``cpu.stat``'s
    ``usage_usec`` (v2)."""
    root = Path("/sys/fs/cgroup")
    below = f"{c.cgroup_root.lstrip('/')}/kubepods/**/pod{uid}"
    if (root / "cpuacct").is_dir():
        (pod_dir,) = (root / "cpuacct").glob(below)
        return int((pod_dir / "cpuacct.usage").read_text()) / 1e9
    (pod_dir,) = root.glob(below)
    stat = dict(line.split() for line in (pod_dir / "cpu.stat").read_text().splitlines())
    return int(stat["usage_usec"]) / 1e6


def pod_cgroup_dirs(c: RealNodeConfig, uid: str) -> list[Path]:
    root = Path("/sys/fs/cgroup")
    memory = root / "memory" if (root / "memory").is_dir() else root
    return sorted(memory.glob(f"{c.cgroup_root.lstrip('/')}/kubepods/**/pod{uid}"))


def cpuset_hierarchies() -> list[Path]:
    """Every mounted hierarchy whose cgroups have ``cpuset.cpus``: v1's cpuset controller, and the
    v2 tree (pure, or the unified one of a hybrid host) where it has the cpuset controller."""
    root = Path("/sys/fs/cgroup")
    found = []
    for v2 in (root, root / "unified"):
        if "cpuset" in read_or_empty(v2 / "cgroup.controllers").split():
            found.append(v2)
    if (root / "cpuset" / "cpuset.cpus").is_file():
        found.append(root / "cpuset")
    return found


def read_or_empty(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def container_cpusets(c: RealNodeConfig, pod: dict[str, Any]) -> dict[Path, frozenset[int]]:
    """The container's ``cpuset.cpus`` in each hierarchy that has it, and the CPUs its process may
    run on (``Cpus_allowed_list`` under the key ``/proc/<pid>``); {} before its cgroup is there."""
    uid = pod["metadata"]["uid"]
    container_id = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    found: dict[Path, frozenset[int]] = {}
    for hierarchy in cpuset_hierarchies():
        for directory in hierarchy.glob(f"{c.cgroup_root.lstrip('/')}/kubepods/**/pod{uid}/{container_id}"):
            found[directory] = parse_cpus(read_or_empty(directory / "cpuset.cpus"))
            for pid in read_or_empty(directory / "cgroup.procs").split()[:1]:
                for line in read_or_empty(Path(f"/proc/{pid}/status")).splitlines():
                    if line.startswith("Cpus_allowed_list:"):
                        found[Path(f"/proc/{pid}")] = parse_cpus(line.split(":", 1)[1].strip())
    return found


def wait_cpusets(
    cp: ControlPlane, c: RealNodeConfig, name: str, want: frozenset[int], timeout: float = 60
) -> dict[Path, frozenset[int]]:
    """Wait until the pod's container holds exactly ``want`` in every cpuset hierarchy and its
    process's affinity; the last reading either way."""
    deadline = time.monotonic() + timeout
    while True:
        pod = cp.get_json(f"/api/v1/namespaces/default/pods/{name}")
        found = container_cpusets(c, pod)
        if (found and all(cpus == want for cpus in found.values())) or time.monotonic() > deadline:
            return found
        time.sleep(1.0)


def pool_cpus(cp: ControlPlane, c: RealNodeConfig, key: str) -> frozenset[int]:
    """The CPUs of the node's LS or BE shared pools, as koordlet's NodeResourceTopology says."""
    topology = get_object(cp, "noderesourcetopology", c.node_name)
    pools = json.loads((topology["metadata"].get("annotations") or {}).get(key) or "[]")
    return frozenset().union(*(parse_cpus(pool.get("cpuset") or "") for pool in pools))


def wait_pools(
    cp: ControlPlane, c: RealNodeConfig, ls: frozenset[int], be: frozenset[int], timeout: float = 30
) -> tuple[frozenset[int], frozenset[int]]:
    deadline = time.monotonic() + timeout
    while True:
        found = (
            pool_cpus(cp, c, ANNOTATION_NODE_CPU_SHARED_POOLS),
            pool_cpus(cp, c, ANNOTATION_NODE_BE_CPU_SHARED_POOLS),
        )
        if found == (ls, be) or time.monotonic() > deadline:
            return found
        time.sleep(1.0)


def container_cfs_quotas(c: RealNodeConfig, pod: dict[str, Any]) -> dict[Path, str]:
    """The container's CFS quota in each hierarchy with the cpu controller (v1 ``cpu.cfs_quota_us``,
    v2 the first field of ``cpu.max``)."""
    uid = pod["metadata"]["uid"]
    container_id = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    root = Path("/sys/fs/cgroup")
    found: dict[Path, str] = {}
    for hierarchy, name in (
        (root / "cpu", "cpu.cfs_quota_us"),
        (root, "cpu.max"),
        (root / "unified", "cpu.max"),
    ):
        for directory in hierarchy.glob(f"{c.cgroup_root.lstrip('/')}/kubepods/**/pod{uid}/{container_id}"):
            if (directory / name).is_file():
                found[directory / name] = read_or_empty(directory / name).split()[0]
    return found


def qos_cgroup_file(c: RealNodeConfig, controller: str, relative: str, name: str) -> Path:
    """A file of the cgroup ``relative`` below kubelet's cgroupRoot (``kubepods/besteffort``): in the
    v1 controller's hierarchy where the host mounts it (v1 or hybrid), else in the v2 tree."""
    root = Path("/sys/fs/cgroup")
    base = root / controller if (root / controller).is_dir() else root
    return base / c.cgroup_root.lstrip("/") / relative / name


def pod_cgroup_file(
    c: RealNodeConfig, controller: str, pod: dict[str, Any], name: str, *, container: bool = False
) -> Path | None:
    """A file of the pod's cgroup (or its first container's), None before kubelet has made it."""
    uid = pod["metadata"]["uid"]
    root = Path("/sys/fs/cgroup")
    base = root / controller if (root / controller).is_dir() else root
    pattern = f"{c.cgroup_root.lstrip('/')}/kubepods/**/pod{uid}"
    if container:
        container_id = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
        pattern += f"/{container_id}"
    found = sorted(base.glob(pattern))
    return found[0] / name if found else None


def node_memory_used() -> tuple[int, int]:
    """(MemTotal - MemAvailable, MemTotal) in bytes, what koordlet counts as the node's memory use."""
    fields = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = int(value.split()[0]) * 1024
    return fields["MemTotal"] - fields["MemAvailable"], fields["MemTotal"]


def root_disk() -> tuple[str, str]:
    """(name, ``major:minor``) of the disk that holds ``/``."""
    device = Path("/sys/dev/block") / _root_device_number()
    disk = device.resolve()
    if (disk / "partition").exists():
        disk = disk.parent
    return disk.name, (disk / "dev").read_text().strip()


def _root_device_number() -> str:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return fields[2]
    raise RuntimeError("no mount of / in /proc/self/mountinfo")
