"""Block-IO QoS (capability K13, Koordinator's ``qosmanager/plugins/blkio``): the limits and weights
of the NodeSLO's ``blkioQOS`` on the block-IO cgroups, every round.

- ``beClass.blkioQOS``: the besteffort QoS cgroup (every BE pod below it); while the class is
  disabled its devices are reset. ``lsrClass``/``lsClass`` blocks are not supported (as in
  Koordinator): said once.
- a pod with a Koordinator QoS class and ``koordinator.sh/blkioQOS`` (``{"blocks": [...]}``): its
  pod cgroup. A malformed annotation or a block that cannot be resolved is returned as the pod's
  problem (an event), and the pod keeps its cgroup as it is.
- ``cgroupRoot.blkioQOS``: the blk-iocost controller of each device (``enable=1 ctrl=user`` with
  the latency targets, and the cost model) on the root cgroup, where the kernel has it.

A block is a device (``type: device``, ``name`` ``/dev/vda`` or ``vda``; a partition counts as its
disk). Volume groups and pod volumes need a local-storage inventory koordlet does not keep: said
once (NodeSLO) or reported on the pod.

Per device, a read/write IOPS/BPS of 0 is no limit and the weight defaults to 100 (percent of the
default weight):

==================  =========================================  ==========================================
                    cgroups v1                                 cgroups v2
==================  =========================================  ==========================================
limits              ``blkio.throttle.{read,write}_{bps,iops}``  ``io.max`` ``<dev> rbps= wbps= riops=``
                    ``_device``: ``<dev> <n>`` (0 removes)      ``wiops=`` (``max`` for no limit)
weight              ``blkio.cost.weight`` ``<dev> <w>``         ``io.weight`` ``<dev> <w>``
                    (Anolis kernels only)
iocost (root)       ``blkio.cost.qos`` / ``blkio.cost.model``   ``io.cost.qos`` / ``io.cost.model``
==================  =========================================  ==========================================

Devices that are in a cgroup's files but no longer configured are reset (Koordinator's remover). A
file the kernel lacks is said once and skipped (:class:`CgroupWriter`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from apis.errors import InvalidAnnotation
from apis.extension.qosannotations import get_blkio_qos
from apis.slo.nodeslo import BlockCfg, IOCfg, NodeSLOSpec, ResourceQOS
from koordlet.fs import HostFS
from koordlet.qos.cpu_qos import PodCgroups
from koordlet.qos.layout import CgroupLayout
from koordlet.qos.pods import QoSPod
from koordlet.qos.resources import CgroupResource as R
from koordlet.qos.writer import CgroupWriter

__all__ = [
    "BLOCK_TYPE_DEVICE",
    "BlkIOQoS",
    "DeviceIO",
    "block_devices",
    "device_io",
    "parse_device_lines",
]

BLOCK_TYPE_DEVICE = "device"
DEFAULT_WEIGHT = 100
DEFAULT_LATENCY_US = 3000
DEFAULT_LATENCY_PERCENT = 95
_THROTTLES = (
    (R.BLKIO_READ_BPS, "rbps", "read_bps"),
    (R.BLKIO_WRITE_BPS, "wbps", "write_bps"),
    (R.BLKIO_READ_IOPS, "riops", "read_iops"),
    (R.BLKIO_WRITE_IOPS, "wiops", "write_iops"),
)

Once = Callable[..., None]
"""``once(key, message, *args)``: log the message the first time the key is seen."""


@dataclass(frozen=True)
class DeviceIO:
    """One device's settings of one cgroup: limits (0 none) and weight (percent of the default)."""

    device: str
    """``major:minor`` of the whole disk."""
    read_bps: int = 0
    write_bps: int = 0
    read_iops: int = 0
    write_iops: int = 0
    weight: int = DEFAULT_WEIGHT


def device_io(device: str, cfg: IOCfg | None) -> DeviceIO:
    cfg = cfg or IOCfg()
    return DeviceIO(
        device,
        read_bps=cfg.read_bps or 0,
        write_bps=cfg.write_bps or 0,
        read_iops=cfg.read_iops or 0,
        write_iops=cfg.write_iops or 0,
        weight=cfg.io_weight_percent or DEFAULT_WEIGHT,
    )


def block_devices(fs: HostFS) -> dict[str, str]:
    """Block device name -> its disk's ``major:minor`` from ``/sys/class/block`` (a partition maps
    to the disk that holds it: ``vda1`` -> ``vda``'s number)."""
    base = "sys/class/block"
    found: dict[str, str] = {}
    for name in fs.subdirs(base):
        try:
            number = fs.read_text(f"{base}/{name}/dev").strip()
            if fs.exists(f"{base}/{name}/partition"):
                disk = fs.path(f"{base}/{name}").resolve().parent
                number = (disk / "dev").read_text().strip()
        except OSError:
            continue
        found[name] = number
    return found


def parse_device_lines(text: str) -> dict[str, dict[str, str]]:
    """``<dev> <n>`` and ``<dev> k=v k=v`` lines -> {dev: {"": n} or {k: v}}; other lines (v2's
    ``default 100``) are left out."""
    found: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        head, _, rest = line.strip().partition(" ")
        if ":" not in head:
            continue
        fields: dict[str, str] = {}
        for item in rest.split():
            key, sep, value = item.partition("=")
            fields.update({key: value} if sep else {"": key})
        found[head] = fields
    return found


def _same(got: str | None, want: str) -> bool:
    if got == want:
        return True
    try:
        return got is not None and float(got) == float(want)
    except ValueError:
        return False


def _holds(device: str, want: dict[str, str], neutral: dict[str, str]) -> Callable[[str], bool]:
    """Whether a file's content gives ``device`` the ``want`` fields (a device missing from the file
    holds the neutral values)."""

    def check(content: str) -> bool:
        fields = parse_device_lines(content).get(device)
        if fields is None:
            return want == neutral
        return all(_same(fields.get(key), value) for key, value in want.items())

    return check


class BlkIOQoS:
    def __init__(self, fs: HostFS, writer: CgroupWriter, layout: CgroupLayout, once: Once) -> None:
        self.fs = fs
        self.writer = writer
        self.layout = layout
        self.once = once

    def reconcile(self, spec: NodeSLOSpec, cgroups: Sequence[PodCgroups]) -> list[tuple[QoSPod, str]]:
        """One round; returns the pods whose annotation could not be applied, with why."""
        devices = block_devices(self.fs)
        strategy = spec.resource_qos_strategy
        errors: list[tuple[QoSPod, str]] = []
        if strategy is None:
            return errors
        for name, qos in (("lsrClass", strategy.lsr_class), ("lsClass", strategy.ls_class)):
            if _blocks(qos):
                self.once(f"blkio:{name}", "blkioQOS of %s is not supported (as in Koordinator)", name)
        be = strategy.be_class
        be_blocks = _blocks(be) if be and be.blkio_qos and be.blkio_qos.enable else []
        be_dir = self.layout.qos_dir("BestEffort")
        if self.supported(be_dir):
            resolved = self._resolve(be_blocks, devices, "beClass")
            self.apply(be_dir, [device_io(device, block.io_cfg) for device, block in resolved])
        for entry in cgroups:
            if not entry.pod.raw_qos:
                continue
            try:
                found = get_blkio_qos(entry.pod.annotations)
                if found is None:
                    continue
                wanted = [device_io(_device_of(block, devices), block.io_cfg) for block in found.blocks or []]
            except InvalidAnnotation as exc:
                errors.append((entry.pod, str(exc)))
                continue
            if self.supported(entry.path):
                self.apply(entry.path, wanted)
        root = strategy.cgroup_root
        if root is not None and root.blkio_qos is not None:
            root_blocks = _blocks(root) if root.blkio_qos.enable else []
            self.apply_iocost(self._resolve(root_blocks, devices, "cgroupRoot"))
        return errors

    def supported(self, path: str) -> bool:
        """Whether the cgroup has the limit files (said once where the cgroup is there without them;
        a pod whose cgroup kubelet has not made yet is silently left for the next round)."""
        if self.writer.supported(path, R.BLKIO_READ_BPS):
            return True
        root = self.writer.subsystem_root("blkio")
        if not self.fs.is_dir("/".join(p for p in (root, path) if p)):
            return False
        self.once(
            "blkio:controller",
            "blkio QoS: no %s in %s (no blkio/io controller there): skipped",
            R.BLKIO_READ_BPS.value if self.writer.version == 1 else "io.max",
            path or "/",
        )
        return False

    def _resolve(
        self, blocks: Sequence[BlockCfg], devices: dict[str, str], where: str
    ) -> list[tuple[str, BlockCfg]]:
        resolved = []
        for block in blocks:
            try:
                resolved.append((_device_of(block, devices), block))
            except InvalidAnnotation as exc:
                self.once(f"blkio:{where}:{exc.problem}", "blkioQOS of %s: %s: skipped", where, exc.problem)
        return resolved

    def apply(self, path: str, wanted: Sequence[DeviceIO]) -> None:
        """The limits and weights of ``path``: ``wanted`` devices set, every other one reset."""
        settings = {io.device: io for io in wanted}
        present: set[str] = set()
        for resource in (R.BLKIO_READ_BPS, R.BLKIO_WRITE_BPS, R.BLKIO_READ_IOPS, R.BLKIO_WRITE_IOPS):
            present |= parse_device_lines(self.writer.read(path, resource) or "").keys()
        weights = parse_device_lines(self.writer.read(path, R.BLKIO_WEIGHT) or "").keys()
        for device in sorted(present | weights):
            settings.setdefault(device, DeviceIO(device))
        for io in settings.values():
            self._limits(path, io)
            self._weight(path, io)

    def _limits(self, path: str, io: DeviceIO) -> None:
        if self.writer.version == 2:
            want = {key: str(getattr(io, attr) or "max") for _, key, attr in _THROTTLES}
            line = " ".join(f"{key}={value}" for key, value in want.items())
            neutral = dict.fromkeys(want, "max")
            self.writer.write(
                path, R.BLKIO_READ_BPS, f"{io.device} {line}", applied=_holds(io.device, want, neutral)
            )
            return
        for resource, _, attr in _THROTTLES:
            value = str(getattr(io, attr))
            self.writer.write(
                path,
                resource,
                f"{io.device} {value}",
                applied=_holds(io.device, {"": value}, {"": "0"}),
            )

    def _weight(self, path: str, io: DeviceIO) -> None:
        if not self.writer.supported(path, R.BLKIO_WEIGHT):
            if io.weight != DEFAULT_WEIGHT:
                self.once(
                    "blkio:weight",
                    "blkio QoS: the kernel has no %s (%s): ioWeightPercent skipped",
                    "blkio.cost.weight" if self.writer.version == 1 else "io.weight",
                    "blk-iocost on cgroups v1 is an Anolis kernel's"
                    if self.writer.version == 1
                    else "no iocost or bfq on this kernel",
                )
            return
        want = {"": str(io.weight)}
        self.writer.write(
            path,
            R.BLKIO_WEIGHT,
            f"{io.device} {io.weight}",
            applied=_holds(io.device, want, {"": str(DEFAULT_WEIGHT)}),
        )

    def apply_iocost(self, wanted: Sequence[tuple[str, BlockCfg]]) -> None:
        """blk-iocost on the root cgroup: each configured device enabled with its latency targets and
        cost model; every other device it lists disabled."""
        if not self.writer.supported("", R.BLKIO_COST_QOS):
            if wanted:
                self.once(
                    "blkio:iocost",
                    "blkio QoS: the kernel has no %s: cgroupRoot blkioQOS skipped",
                    "blkio.cost.qos" if self.writer.version == 1 else "io.cost.qos",
                )
            return
        configured = {device: block.io_cfg or IOCfg() for device, block in wanted}
        for device, cfg in configured.items():
            qos = {
                "enable": "1",
                "ctrl": "user",
                "rpct": str(cfg.read_latency_percent or DEFAULT_LATENCY_PERCENT),
                "rlat": str(cfg.read_latency or DEFAULT_LATENCY_US),
                "wpct": str(cfg.write_latency_percent or DEFAULT_LATENCY_PERCENT),
                "wlat": str(cfg.write_latency or DEFAULT_LATENCY_US),
            }
            line = " ".join(f"{k}={v}" for k, v in qos.items())
            self.writer.write("", R.BLKIO_COST_QOS, f"{device} {line}", applied=_holds(device, qos, {}))
            model = {"ctrl": "auto"}
            if cfg.enable_user_model:
                model = {
                    "ctrl": "user",
                    "rbps": str(cfg.model_read_bps or 0),
                    "rseqiops": str(cfg.model_read_seq_iops or 0),
                    "rrandiops": str(cfg.model_read_rand_iops or 0),
                    "wbps": str(cfg.model_write_bps or 0),
                    "wseqiops": str(cfg.model_write_seq_iops or 0),
                    "wrandiops": str(cfg.model_write_rand_iops or 0),
                }
            line = " ".join(f"{k}={v}" for k, v in model.items())
            self.writer.write("", R.BLKIO_COST_MODEL, f"{device} {line}", applied=_holds(device, model, {}))
        listed = parse_device_lines(self.writer.read("", R.BLKIO_COST_QOS) or "")
        for device, fields in sorted(listed.items()):
            if device not in configured and fields.get("enable") == "1":
                self.writer.write(
                    "", R.BLKIO_COST_QOS, f"{device} enable=0", applied=_holds(device, {"enable": "0"}, {})
                )


def _blocks(qos: ResourceQOS | None) -> list[BlockCfg]:
    return list((qos.blkio_qos.blocks if qos and qos.blkio_qos else None) or [])


def _device_of(block: BlockCfg, devices: dict[str, str]) -> str:
    """The block's disk ``major:minor``; InvalidAnnotation naming the block when it has none."""
    kind = block.type or ""
    if kind != BLOCK_TYPE_DEVICE:
        raise InvalidAnnotation(
            "koordinator.sh/blkioQOS",
            f"block {block.name!r} of type {kind!r}: only type {BLOCK_TYPE_DEVICE!r} is supported "
            "(volume groups and pod volumes need a local-storage inventory)",
        )
    name = (block.name or "").removeprefix("/dev/")
    if name not in devices:
        raise InvalidAnnotation("koordinator.sh/blkioQOS", f"no block device {block.name!r} on this node")
    return devices[name]
