"""A fake host filesystem with kubelet's pod cgroups, for cgroups v1 or v2 and either driver."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

Driver = Literal["cgroupfs", "systemd"]

MOUNT = "sys/fs/cgroup"


def pod_dir(driver: Driver, uid: str, qos: str = "burstable") -> str:
    """The pod's cgroup path as kubelet names it (qos: guaranteed, burstable or besteffort)."""
    if driver == "cgroupfs":
        parts = ["kubepods"] + ([] if qos == "guaranteed" else [qos]) + [f"pod{uid}"]
        return "/".join(parts)
    slice_uid = uid.replace("-", "_")
    if qos == "guaranteed":
        return f"kubepods.slice/kubepods-pod{slice_uid}.slice"
    return f"kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{slice_uid}.slice"


def container_dir(driver: Driver, container_id: str) -> str:
    return container_id if driver == "cgroupfs" else f"cri-containerd-{container_id}.scope"


class FakeHost:
    def __init__(self, root: Path, version: Literal[1, 2]) -> None:
        self.root = root
        self.version = version
        if version == 2:
            self._write(f"{MOUNT}/cgroup.controllers", "cpu memory io\n")
        else:
            (root / MOUNT / "cpuacct").mkdir(parents=True)
            (root / MOUNT / "memory").mkdir(parents=True)

    def _write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def set_cpu(self, cgroup: str, used_ns: int) -> None:
        if self.version == 1:
            self._write(f"{MOUNT}/cpuacct/{cgroup}/cpuacct.usage", f"{used_ns}\n")
        else:
            self._write(
                f"{MOUNT}/{cgroup}/cpu.stat", f"usage_usec {used_ns // 1000}\nuser_usec 0\nsystem_usec 0\n"
            )

    def set_memory(self, cgroup: str, anon: int, file: int = 0, unevictable: int = 0) -> None:
        """anon split over active/inactive, file split over active/inactive."""
        prefix = "total_" if self.version == 1 else ""
        fields = {
            "inactive_anon": anon // 2,
            "active_anon": anon - anon // 2,
            "inactive_file": file // 2,
            "active_file": file - file // 2,
            "unevictable": unevictable,
        }
        lines = [f"{prefix}{key} {value}" for key, value in fields.items()]
        if self.version == 1:
            # v1 also lists the cgroup-local counters, which must not be mistaken for the totals
            lines += [f"{key} 1" for key in fields]
        mount = f"{MOUNT}/memory" if self.version == 1 else MOUNT
        self._write(f"{mount}/{cgroup}/memory.stat", "\n".join(lines) + "\n")

    def set_idle_page_stats(self, cgroup: str, cold_bytes: int, name: str = "memory.idle_page_stats") -> None:
        mount = f"{MOUNT}/memory" if self.version == 1 else MOUNT
        text = (
            "# version: 1.0\n# page_scans: 24\n# scan_period_in_seconds: 120\n"
            "# buckets: 1,2,5,15,30,60,120,240\n"
            "#\n# |||||  [1,2) [2,5) [5,15) [15,30) [30,60) [60,120) [120,240) [240,+inf)\n"
            f"  csei {cold_bytes - 4096} 0 0 0 0 0 0 0\n  cfei 0 4096 0 0 0 0 0 0\n  dsei 0 0 0 0 0 0 0 0\n"
        )
        self._write(f"{mount}/{cgroup.strip('/')}/{name}".replace("//", "/"), text)

    def add_pod(
        self,
        driver: Driver,
        uid: str,
        cpu_ns: int,
        anon: int,
        qos: str = "burstable",
        containers: dict[str, tuple[int, int]] | None = None,
    ) -> str:
        path = pod_dir(driver, uid, qos)
        self.set_cpu(path, cpu_ns)
        self.set_memory(path, anon)
        for container_id, (container_cpu, container_anon) in (containers or {}).items():
            self.set_cpu(f"{path}/{container_dir(driver, container_id)}", container_cpu)
            self.set_memory(f"{path}/{container_dir(driver, container_id)}", container_anon)
        return path
