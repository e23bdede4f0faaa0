"""Temporary directory trees shaped like cgroupfs v1, v2 and resctrl, with kernel-like default files."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

MOUNT = "sys/fs/cgroup"

_V1_FILES = {
    "cpu": {
        "cpu.cfs_quota_us": "-1",
        "cpu.cfs_period_us": "100000",
        "cpu.shares": "1024",
        "cpu.cfs_burst_us": "0",
        "cpu.idle": "0",
    },
    "cpuset": {"cpuset.cpus": "0-7", "cpuset.mems": "0"},
    "memory": {"memory.limit_in_bytes": "9223372036854771712"},
    "blkio": {
        "blkio.throttle.read_bps_device": "",
        "blkio.throttle.write_bps_device": "",
        "blkio.throttle.read_iops_device": "",
        "blkio.throttle.write_iops_device": "",
    },
}
_V2_FILES = {
    "cpu.max": "max 100000",
    "cpu.weight": "100",
    "cpu.max.burst": "0",
    "cpu.idle": "0",
    "cpuset.cpus": "",
    "cpuset.mems": "",
    "memory.max": "max",
    "memory.min": "0",
    "memory.low": "0",
    "memory.high": "max",
    "io.max": "",
    "io.weight": "default 100",
}


class CgroupTree:
    """Creates cgroups with the files the kernel would offer; ``anolis`` adds ``cpu.bvt_warp_ns`` (and,
    on v1, ``blkio.cost.weight``). A fake file holds what was last written, not the kernel's merge of
    per-device lines."""

    def __init__(
        self, root: Path, version: Literal[1, 2], *, anolis: bool = False, cpu_mount: str = "cpu"
    ) -> None:
        self.root = root
        self.version = version
        self.anolis = anolis
        self.cpu_mount = cpu_mount
        if version == 2:
            self._write(f"{MOUNT}/cgroup.controllers", "cpuset cpu io memory\n")
        else:
            for controller in (cpu_mount, "cpuacct", "cpuset", "memory", "blkio"):
                (root / MOUNT / controller).mkdir(parents=True, exist_ok=True)
        self.add("")

    def _write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")

    def add(self, cgroup: str) -> None:
        cgroup = cgroup.strip("/")
        if self.version == 2:
            files = dict(_V2_FILES)
            if self.anolis:
                files["cpu.bvt_warp_ns"] = "0"
            for name, value in files.items():
                self._write("/".join(p for p in (MOUNT, cgroup, name) if p), value)
            return
        for controller, v1_files in _V1_FILES.items():
            mount = self.cpu_mount if controller == "cpu" else controller
            files = dict(v1_files)
            if controller == "cpu" and self.anolis:
                files["cpu.bvt_warp_ns"] = "0"
            if controller == "blkio" and self.anolis:
                files["blkio.cost.weight"] = ""
            for name, value in files.items():
                self._write("/".join(p for p in (MOUNT, mount, cgroup, name) if p), value)

    def block_device(self, name: str, number: str, partitions: dict[str, str] | None = None) -> None:
        """A disk in sysfs as the kernel links it: ``/sys/class/block/<name>`` to its device dir,
        its partitions as subdirectories there."""
        disk = self.root / "sys/devices/virtual/block" / name
        disk.mkdir(parents=True)
        (disk / "dev").write_text(number + "\n")
        links = self.root / "sys/class/block"
        links.mkdir(parents=True, exist_ok=True)
        (links / name).symlink_to(disk)
        for part, part_number in (partitions or {}).items():
            (disk / part).mkdir()
            (disk / part / "dev").write_text(part_number + "\n")
            (disk / part / "partition").write_text("1\n")
            (links / part).symlink_to(disk / part)

    def read(self, cgroup: str, name: str, controller: str = "cpu") -> str:
        mount = (
            MOUNT if self.version == 2 else f"{MOUNT}/{self.cpu_mount if controller == 'cpu' else controller}"
        )
        return (self.root / "/".join(p for p in (mount, cgroup.strip("/"), name) if p)).read_text().strip()


def resctrl_tree(
    root: Path, cbm: str = "7ff", l3_ids: int = 2, mb: bool = True, vendor: str = "GenuineIntel"
) -> Path:
    base = root / "sys/fs/resctrl"
    (base / "info/L3").mkdir(parents=True)
    (base / "info/L3/cbm_mask").write_text(cbm + "\n")
    lines = ["L3:" + ";".join(f"{i}={cbm}" for i in range(l3_ids))]
    if mb:
        lines.append("MB:" + ";".join(f"{i}=100" for i in range(l3_ids)))
    (base / "schemata").write_text("\n".join(lines) + "\n")
    (base / "tasks").write_text("1\n")
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc/cpuinfo").write_text(f"processor\t: 0\nvendor_id\t: {vendor}\n")
    return base
