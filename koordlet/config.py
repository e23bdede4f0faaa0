"""koordlet's settings: command-line flags validated into one typed model."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from apis.errors import InvalidValue
from apis.koordlet_features import KoordletFeatureGates, parse_koordlet_feature_gates
from koordlet.fs import HostFS

__all__ = ["KoordletConfig", "NRIOptions"]


class NRIOptions(BaseModel):
    """Koordinator's ``-runtime-hooks-nri-*`` settings, with its defaults."""

    model_config = ConfigDict(frozen=True)

    socket_path: Path = Path("/var/run/nri/nri.sock")
    """The runtime's NRI socket (``-var-run-root-dir`` joined with ``-runtime-hooks-nri-socket-path``)."""
    plugin_name: str = "koordlet_nri"
    plugin_index: str = Field(default="00", pattern=r"^[0-9]{2}$")
    """Two digits: plugins are called in ascending index order."""
    connect_timeout_seconds: float = Field(default=6.0, gt=0)
    """Dialling and registering must finish in this time (a little over containerd's 5 s
    registration timeout)."""
    backoff_seconds: float = Field(default=1.0, gt=0)
    backoff_cap_seconds: float = Field(default=float(1 << 62) / 1e9, gt=0)
    backoff_steps: int = Field(default=2**31 - 1, ge=1)
    """After this many failed dials the delay starts again from ``backoff_seconds``."""
    backoff_factor: float = Field(default=2.0, ge=1)


class KoordletConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    node_name: str | None = None
    """The node to report for (the DaemonSet passes ``spec.nodeName``); not used with ``simulate``."""
    kubeconfig: Path | None = None
    """Kubeconfig to use; None means in-cluster service-account credentials."""
    simulate: Path | None = None
    """A load file (docs/koordlet.md): report for every node it describes instead of this host."""
    simulate_devices: Path | None = None
    """A devices file (docs/devices.md): write the Device of every node it describes instead of
    this host's."""
    device_config: Path | None = None
    """A device description of this host's NPUs and MLUs (as koord-device-daemon provides them)."""
    report_interval_seconds: float | None = Field(default=None, gt=0)
    """Report this often instead of the NodeMetric's ``reportIntervalSeconds`` (and its 30 s floor)."""
    host_root: Path = Path("/")
    """Where the host's ``sys/fs/cgroup`` is found (the chart mounts the host's at /host)."""
    cgroup_root: str = "/"
    """kubelet's ``--cgroup-root``: the parent of the ``kubepods`` cgroup."""
    cgroup_version: Literal[1, 2] | None = None
    """Force cgroups v1 or v2; detected from the mount when None."""
    collect_interval_seconds: float = Field(default=1.0, gt=0)
    """How often the collectors sample (Koordinator's ``CollectResUsedInterval``, 1 s)."""
    kubelet_config: Path = Path("/var/lib/kubelet/config.yaml")
    """The kubelet's KubeletConfiguration file (under ``host_root``): CPU manager and topology manager
    policies, reserved CPUs; ``cpu_manager_state`` is read beside it."""
    topology_interval_seconds: float = Field(default=3.0, gt=0)
    """How often the NodeResourceTopology is reported and cpusets applied (Koordinator's
    ``NodeTopologySyncInterval``, 3 s)."""
    apply_cpusets: bool = True
    """Write each pod's cpuset into its cgroups (Koordinator's CPUSetAllocator hook); never in
    simulation mode."""
    apply_cpu_qos: bool = True
    """The reconcile writes pod-level CPU QoS (group identity or ``cpu.idle``) every round; off, only
    NRI sets it, on new pods (a test's way to see NRI's writes alone)."""
    apply_batch_resources: bool = True
    """The reconcile writes BE pods' CFS quota from their batch-cpu every round; off, only NRI sets
    batch resources, on new pods."""
    enable_nri_runtime_hook: bool = True
    """Koordinator's ``-enable-nri-runtime-hook``: register with the runtime's NRI and set each new
    pod's and container's settings as they are created (docs/koordlet.md#nri); the reconcile writes
    them either way."""
    nri: NRIOptions = Field(default_factory=NRIOptions)
    disable_unset_cpu_quota: bool = False
    """Koordinator's ``-disable-unset-cpu-quota``: keep the CFS quota of pods bound to CPUs (LSE,
    LSR) instead of lifting it."""
    metrics_bind: str = "0.0.0.0"
    metrics_port: int = Field(default=9316, ge=0, le=65535)
    """Port of /metrics and /healthz (Koordinator's koordlet serves its metrics on 9316); 0 turns the
    server off."""
    feature_gates: str = ""
    """Koordinator's koordlet feature gates, ``Name=true,Other=false`` (``BECPUSuppress``,
    ``BECPUEvict``, ``BEMemoryEvict``, ``RdtResctrl``, ``BECPUManager``, ``GroupIdentity``, ``Resctrl``,
    ``PodResourcesProxy``, ...)."""
    verbosity: int = Field(default=0, ge=0)
    """klog's ``-v``: 0-1 INFO, 2-3 klog's V(2)/V(3), 4 and above DEBUG (``apis.goflags``)."""
    cgroup_root_dir: Path | None = None
    """Koordinator's ``-cgroup-root-dir``: where the host's ``/sys/fs/cgroup`` is mounted (else under
    ``host_root``)."""
    sys_root_dir: Path | None = None
    """Koordinator's ``-sys-root-dir``: where the host's ``/sys`` is mounted."""
    sys_fs_root_dir: Path | None = None
    """Koordinator's ``-sys-fs-root-dir``: where the host's ``/sys/fs`` is mounted (resctrl)."""
    proc_root_dir: Path | None = None
    """Koordinator's ``-proc-root-dir``: where the host's ``/proc`` is mounted."""
    var_lib_kubelet_dir: Path = Path("/var/lib/kubelet")
    """Koordinator's ``-var-lib-kubelet-dir``: the kubelet's root directory as koordlet sees it; the
    PodResources proxy reads the kubelet's ``pod-resources/kubelet.sock`` below it."""
    pod_resources_proxy_path: Path = Path("/var/run/koordlet/pod-resources")
    """Koordinator's ``-pod-resources-proxy-path``: the directory of the PodResources proxy's socket,
    ``kubelet.sock`` (feature gate ``PodResourcesProxy``)."""
    flag_notes: tuple[str, ...] = ()
    """Warnings about flags accepted for compatibility with Koordinator, logged at start."""

    def host_fs(self) -> HostFS:
        """The host's files: ``host_root``, with the directories Koordinator's ``-*-root-dir`` flags
        place elsewhere."""
        mounts = {
            "sys/fs/cgroup": self.cgroup_root_dir,
            "sys/fs": self.sys_fs_root_dir,
            "sys": self.sys_root_dir,
            "proc": self.proc_root_dir,
        }
        return HostFS(self.host_root, {key: value for key, value in mounts.items() if value is not None})

    @property
    def kubelet_pod_resources_socket(self) -> Path:
        """The kubelet's PodResources socket (Koordinator's fixed ``/var/lib/kubelet/pod-resources``
        moves with ``var_lib_kubelet_dir`` here)."""
        return self.var_lib_kubelet_dir / "pod-resources" / "kubelet.sock"

    @field_validator("feature_gates")
    @classmethod
    def _gates(cls, value: str) -> str:
        try:
            parse_koordlet_feature_gates(value)
        except InvalidValue as exc:
            raise ValueError(str(exc)) from exc
        return value

    @property
    def gates(self) -> KoordletFeatureGates:
        return parse_koordlet_feature_gates(self.feature_gates)

    @model_validator(mode="after")
    def _node_or_simulation(self) -> KoordletConfig:
        if self.simulate is None and self.simulate_devices is None and not self.node_name:
            raise ValueError("--node-name is required unless --simulate is given (or --simulate-devices)")
        return self
