"""``koordlet``: the node agent, reporting node, system and pod usage into the node's NodeMetric.

Koordinator's koordlet command line is taken as is, in Go's flag syntax (docs/flags.md).
``koordlet --node-name NODE [--kubeconfig FILE]`` collects this host's usage and writes its Device;
``koordlet --simulate FILE [--kubeconfig FILE] [--report-interval-seconds S]`` reports for every node
a load file describes instead (docs/koordlet.md), ``--simulate-devices FILE`` writes the Device of
every node a devices file describes (docs/devices.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

from pydantic import ValidationError

from apis.duration import parse_go_duration
from apis.goflags import GoFlagParser, level_for_verbosity, log_flag_notes
from apis.koordlet_features import koordlet_feature_gate_notes, parse_koordlet_feature_gates
from koordlet.agent import Agent
from koordlet.cgroups import detect_version
from koordlet.client import QoSClient
from koordlet.config import KoordletConfig, NRIOptions
from koordlet.devices.description import load_devices_file
from koordlet.devices.reporter import DeviceSimulation, NodeDeviceReporter
from koordlet.metrics import KoordletMetrics, serve
from koordlet.nri.plugin import NRIPlugin
from koordlet.nri.pod_cgroups import HostPodCgroups
from koordlet.nri.server import NRIServer
from koordlet.nri.states import StatesPodSource
from koordlet.podresources.proxy import PodResourcesProxy
from koordlet.qos.manager import QoSManager
from koordlet.qos.node_qos import NodeQoS
from koordlet.simulate.model import load_file
from koordlet.simulate.qos import SimulatedQoS
from koordlet.simulate.runner import Simulation
from koordlet.simulate.topology import TopologySimulation
from koordlet.states.node_states import ClusterStates, NodeStates
from koordlet.topology.agent import host_topology_reporter

__all__ = ["main", "parse_args"]

log = logging.getLogger("koordlet")


_NO_HOOKS = (
    "no runtime hooks server (runtime proxy): the reconcile writes the cgroups, NRI new pods' and "
    "containers' settings"
)
_FIXED = "this collector or strategy runs on its own period here (docs/koordlet.md)"
_ACCEPTED: dict[str, tuple[str, bool]] = {
    "enable-pprof": ("no pprof server", True),
    "pprof-addr": ("no pprof server", False),
    "kube-api-qps": ("the API client is not rate limited here", False),
    "kube-api-burst": ("the API client is not rate limited here", False),
    **dict.fromkeys(
        (
            "audit-log-dir",
            "audit-verbose",
            "audit-max-disk-space-mb",
            "audit-max-concurrent-readers",
            "audit-max-events-limit",
        ),
        ("no audit log", False),
    ),
    "configmap-name": ("koordlet reads its settings from the NodeSLO, not a ConfigMap", False),
    "configmap-namespace": ("koordlet reads its settings from the NodeSLO, not a ConfigMap", False),
    **dict.fromkeys(
        (
            "metric-gc-interval-seconds",
            "metric-expire-seconds",
            "tsdb-path",
            "tsdb-retention-duration",
            "tsdb-stripe-size",
            "tsdb-wal-segment-size",
            "tsdb-min-block-duration",
            "tsdb-max-block-duration",
            "tsdb-head-chunks-write-buffer-size",
            "tsdb-max-block-chunk-segment-size",
            "tsdb-max-bytes",
        ),
        ("metrics are kept in memory, not in a TSDB", False),
    ),
    "tsdb-enable-prometheus-metric": ("metrics are kept in memory, not in a TSDB", True),
    **dict.fromkeys(
        (
            "collect-sys-metric-outdated-interval",
            "collect-node-cpu-info-interval",
            "collect-node-storage-info-interval",
            "cpi-collector-interval",
            "psi-collector-interval",
            "collect-cpi-timewindow",
            "coldpage-collector-interval",
            "resctrl-collector-interval",
            "reconcile-interval-seconds",
            "cpu-suppress-interval-seconds",
            "cpu-evict-interval-seconds",
            "memory-evict-interval-seconds",
            "memory-evict-cool-time-seconds",
            "cpu-evict-cool-time-seconds",
            "resource-force-update-seconds",
        ),
        (_FIXED, False),
    ),
    "enable-pagecache-collector": (_FIXED, True),
    "enable-resctrl-collector": (_FIXED, True),
    "only-evict-by-api": ("pods are always evicted through the Eviction API", True),
    **dict.fromkeys(
        (
            "prediction-checkpoint-filepath",
            "prediction-cold-start-duration",
            "prediction-safety-margin-percent",
            "prediction-memory-histogram-decay-halflife",
            "prediction-cpu-histogram-decay-halflife",
            "prediction-training-interval",
            "prediction-model-expiration-duration",
            "prediction-model-checkpoint-interval",
            "prediction-model-checkpoint-max-per-step",
        ),
        ("the prediction's settings are fixed here, with no checkpoint file", False),
    ),
    **dict.fromkeys(
        (
            "runtime-hooks-network",
            "runtime-hooks-addr",
            "runtime-hooks-failure-policy",
            "runtime-hooks-plugin-failure-policy",
            "runtime-hooks-config-path",
            "runtime-hooks-host-endpoint",
            "runtime-hooks-disable-stages",
            "runtime-hooks-reconcile-interval",
            "containerd-endpoint",
            "docker-endpoint",
            "pouch-endpoint",
            "default-runtime-type",
            "qos-extension-plugins",
        ),
        (_NO_HOOKS, False),
    ),
    **dict.fromkeys(
        (
            "kubelet-preferred-address-type",
            "kubelet-sync-interval",
            "kubelet-sync-timeout",
            "kubelet-read-only-port",
        ),
        ("pods come from the API server and the kubelet's settings from --kubelet-config", False),
    ),
    "kubelet-insecure-tls": ("pods come from the API server, not the kubelet", True),
    "disable-query-kubelet-config": ("the kubelet's settings come from --kubelet-config", True),
    "report-interval": (
        "deprecated by Koordinator: the NodeMetric's reportIntervalSeconds (or "
        "--report-interval-seconds) sets it",
        False,
    ),
    "enable-node-metric-report": ("the NodeMetric status is always reported", True),
    "enable-pod-taskids": ("pods' task ids are not collected", True),
    "xpu-enforce-collect-from-device-infos": ("devices come from sysfs, NVML or --device-config", True),
    **dict.fromkeys(
        (
            "run-root-dir",
            "hami-core-library-directory-path",
            "xpu-device-infos-dir",
        ),
        ("this host path is not read here (see --host-root and --kubelet-config)", False),
    ),
}
"""Koordinator's koordlet flags accepted with a warning: why, and whether a Go bool flag."""


def _seconds(text: str) -> float:
    try:
        return parse_go_duration(text).total_seconds()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected [HOST]:PORT, got {text!r}")
    return host or "0.0.0.0", int(port)


def _gates(text: str) -> str:
    parse_koordlet_feature_gates(text)  # InvalidValue names the gate
    return text


def _nri_flags(parser: GoFlagParser) -> None:
    """Koordinator's NRI flags (pkg/koordlet/runtimehooks/config.go), with its defaults."""
    parser.add_go_bool(
        "enable-nri-runtime-hook",
        help="register with the runtime's NRI and set each new pod's and container's cpuset, batch "
        "resources, CPU QoS and resctrl as they are created (default true; the reconcile writes "
        "them either way)",
    )
    parser.add_argument(
        "--var-run-root-dir",
        dest="nri_var_run_root_dir",
        help="where the host's /var/run is mounted: the NRI socket path is under it (default /var/run/)",
    )
    parser.add_argument(
        "--runtime-hooks-nri-socket-path",
        dest="nri_socket",
        help="the runtime's NRI socket under --var-run-root-dir (default nri/nri.sock)",
    )
    parser.add_argument(
        "--runtime-hooks-nri-plugin-name", dest="nri_plugin_name", help="NRI plugin name (koordlet_nri)"
    )
    parser.add_argument(
        "--runtime-hooks-nri-plugin-index",
        dest="nri_plugin_index",
        help="NRI plugin index, two digits: plugins are called in ascending order (00)",
    )
    parser.add_argument(
        "--runtime-hooks-nri-connect-timeout",
        dest="nri_connect_timeout_seconds",
        type=_seconds,
        help="a Go duration: dialling and registering must finish in this time (6s)",
    )
    parser.add_argument(
        "--runtime-hooks-nri-backoff-duration",
        dest="nri_backoff_seconds",
        type=_seconds,
        help="a Go duration: the first delay before dialling NRI again (1s)",
    )
    parser.add_argument(
        "--runtime-hooks-nri-backoff-cap",
        dest="nri_backoff_cap_seconds",
        type=_seconds,
        help="a Go duration: the longest delay before dialling NRI again (none)",
    )
    parser.add_argument(
        "--runtime-hooks-nri-backoff-steps",
        dest="nri_backoff_steps",
        type=int,
        help="failed dials before the delay starts again from the first (2^31-1)",
    )
    parser.add_argument(
        "--runtime-hooks-nri-backoff-factor",
        dest="nri_backoff_factor",
        type=float,
        help="each failed dial multiplies the delay by this (2)",
    )
    parser.add_go_bool(
        "disable-unset-cpu-quota",
        help="keep the CFS quota of pods bound to CPUs (LSE, LSR) instead of lifting it",
    )


def parse_args(argv: list[str] | None) -> KoordletConfig:
    parser = GoFlagParser(prog="koordlet", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME") or None,
        help="the node to report for (default $NODE_NAME, as Koordinator's koordlet; "
        "required unless --simulate)",
    )
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig; in-cluster credentials when omitted")
    parser.add_argument("--simulate", type=Path, metavar="FILE", help="report for the nodes of a load file")
    parser.add_argument(
        "--simulate-devices", type=Path, metavar="FILE", help="write the Devices of a devices file's nodes"
    )
    parser.add_argument(
        "--device-config", type=Path, metavar="FILE", help="this host's NPUs and MLUs (a device description)"
    )
    parser.add_argument(
        "--report-interval-seconds",
        type=float,
        help="report this often instead of the NodeMetric's reportIntervalSeconds (no 30 s floor)",
    )
    parser.add_argument(
        "--host-root", type=Path, help="where the host's sys/fs/cgroup is mounted (default /)"
    )
    parser.add_argument(
        "--cgroup-root-dir",
        type=Path,
        help="Koordinator's flag: where the host's /sys/fs/cgroup is mounted (default: under --host-root)",
    )
    parser.add_argument(
        "--sys-root-dir", type=Path, help="Koordinator's flag: where the host's /sys is mounted"
    )
    parser.add_argument(
        "--sys-fs-root-dir", type=Path, help="Koordinator's flag: where the host's /sys/fs is mounted"
    )
    parser.add_argument(
        "--proc-root-dir", type=Path, help="Koordinator's flag: where the host's /proc is mounted"
    )
    parser.add_argument("--cgroup-root", help="kubelet's --cgroup-root, the parent of kubepods (default /)")
    parser.add_argument("--cgroup-version", type=int, choices=(1, 2), help="force cgroups v1 or v2")
    parser.add_argument("--collect-interval-seconds", type=float, help="sampling period (default 1)")
    parser.add_argument(
        "--collect-res-used-interval",
        dest="collect_interval_seconds",
        type=_seconds,
        help="Koordinator's flag, a Go duration: the same as --collect-interval-seconds",
    )
    parser.add_argument(
        "--kubelet-config",
        type=Path,
        help="the kubelet's config file under --host-root (default /var/lib/kubelet/config.yaml)",
    )
    parser.add_argument(
        "--topology-interval-seconds",
        type=float,
        help="report the NodeResourceTopology and apply cpusets this often (default 3)",
    )
    parser.add_argument(
        "--node-topology-sync-interval",
        dest="topology_interval_seconds",
        type=_seconds,
        help="Koordinator's flag, a Go duration: the same as --topology-interval-seconds",
    )
    parser.add_go_bool(
        "apply-cpusets",
        negatable=True,
        help="write pods' cpusets into their cgroups (default on; never in simulation)",
    )
    parser.add_go_bool(
        "apply-cpu-qos",
        negatable=True,
        help="the reconcile writes pod-level CPU QoS (cpu.bvt_warp_ns or cpu.idle) every round "
        "(default on; NRI still writes a new pod's)",
    )
    parser.add_go_bool(
        "apply-batch-resources",
        negatable=True,
        help="the reconcile writes BE pods' CFS quota from their batch-cpu every round "
        "(default on; NRI still sets a new pod's batch resources)",
    )
    parser.add_argument(
        "--var-lib-kubelet-dir",
        type=Path,
        help="Koordinator's flag: the kubelet's root directory; the PodResources proxy reads its "
        "pod-resources/kubelet.sock (default /var/lib/kubelet)",
    )
    parser.add_argument(
        "--pod-resources-proxy-path",
        type=Path,
        help="Koordinator's flag: the directory of the PodResources proxy's socket kubelet.sock, with the "
        "feature gate PodResourcesProxy (default /var/run/koordlet/pod-resources)",
    )
    _nri_flags(parser)
    parser.add_argument("--metrics-bind", help="listen address of /metrics and /healthz (default 0.0.0.0)")
    parser.add_argument(
        "--metrics-port", type=int, help="port of /metrics and /healthz (default 9316, 0: off)"
    )
    parser.add_argument(
        "--addr",
        type=_address,
        help="Koordinator's flag, [HOST]:PORT of /metrics and /healthz (default :9316)",
    )
    parser.add_feature_gates(
        _gates,
        koordlet_feature_gate_notes,
        help="koordlet feature gates, Name=true|false separated by commas, and AllAlpha/AllBeta: "
        "BECPUSuppress, BECPUEvict, BEMemoryEvict, RdtResctrl, BECPUManager, GroupIdentity, Resctrl, "
        "BatchResource, CPUNormalization take effect (docs/colocation.md), and PodResourcesProxy "
        "(docs/koordlet.md); Koordinator's other koordlet "
        "gates are accepted "
        "with a warning",
    )
    parser.add_klog_flags(verbose_alias=True)
    parser.add_accepted(
        "legacy_stderr_threshold_behavior", "this project logs to stderr", bool_flag=True, quiet_value=False
    )
    for name, (why, is_bool) in _ACCEPTED.items():
        parser.add_accepted(name, why, bool_flag=is_bool)
    args = parser.parse_go_args(argv)
    values = {k: v for k, v in vars(args).items() if v is not None}
    nri = {k.removeprefix("nri_"): values.pop(k) for k in list(values) if k.startswith("nri_")}
    var_run = nri.pop("var_run_root_dir", "/var/run/")
    socket = nri.pop("socket", "nri/nri.sock")
    # Go's filepath.Join: an absolute socket path still lands under the var-run root
    nri["socket_path"] = Path(var_run) / socket.lstrip("/")
    if (address := values.pop("addr", None)) is not None:
        values.setdefault("metrics_bind", address[0])
        values.setdefault("metrics_port", address[1])
    try:
        return KoordletConfig(**values, nri=NRIOptions(**nri))
    except ValidationError as exc:
        parser.error("; ".join(str(error["msg"]) for error in exc.errors()))


def nri_server(
    config: KoordletConfig, states: NodeStates, metrics: KoordletMetrics, node_qos: NodeQoS | None
) -> NRIServer:
    node = config.node_name or ""
    pod_cgroups = (
        HostPodCgroups(node_qos.writer, node_qos.layout, node_qos.resctrl) if node_qos is not None else None
    )
    plugin = NRIPlugin(
        StatesPodSource(states, node),
        gates=config.gates,
        pod_cgroups=pod_cgroups,
        be_cpu_manager=config.gates.be_cpu_manager,
        unset_cpu_quota=not config.disable_unset_cpu_quota,
        record=lambda event, _cpuset: metrics.nri_adjusted(node, event),
    )
    return NRIServer(config.nri, plugin, on_connected=lambda up: metrics.nri_state(node, up))


async def run(config: KoordletConfig) -> None:
    metrics = KoordletMetrics()
    metrics.started(config.node_name or "simulation")
    runner = await serve(metrics, config.metrics_bind, config.metrics_port) if config.metrics_port else None
    api = QoSClient(config.kubeconfig, on_request=metrics.api_request)
    try:
        if config.simulate is not None or config.simulate_devices is not None:
            tasks = []
            if config.simulate is not None:
                load = load_file(config.simulate)
                states = ClusterStates(api)
                simulation = Simulation(config, load, metrics)
                tasks.append(states.run())
                tasks.append(simulation.run(api, states))
                tasks.append(SimulatedQoS(simulation, load, config.gates, metrics=metrics).run(api, states))
                if load.topologies():
                    topology = TopologySimulation(load, config.topology_interval_seconds)
                    tasks.append(topology.run(api, states))
            if config.simulate_devices is not None:
                simulated = DeviceSimulation(config.simulate_devices, config.report_interval_seconds)
                tasks.append(simulated.run(api))
            await asyncio.gather(*tasks)
        else:
            agent = Agent(config, metrics)
            devices = NodeDeviceReporter(
                config.node_name or "",
                config.host_fs(),
                config.device_config,
                config.report_interval_seconds,
            )
            fs = config.host_fs()
            version = config.cgroup_version or detect_version(fs)
            node_qos = (
                None
                if version is None
                else NodeQoS(
                    fs, version, config.gates, config.cgroup_root, apply_cpu_qos=config.apply_cpu_qos
                )
            )
            qos = QoSManager(
                config.node_name or "",
                node_qos,
                agent.cache,
                config.gates,
                metrics=metrics,
                apply_batch_resources=config.apply_batch_resources,
            )
            host_topology = host_topology_reporter(config)
            node_states = NodeStates(api, config.node_name or "")
            hooks = (
                [nri_server(config, node_states, metrics, node_qos).run()]
                if config.enable_nri_runtime_hook
                else []
            )
            if config.gates.pod_resources_proxy:
                proxy = PodResourcesProxy(
                    config.node_name or "",
                    config.kubelet_pod_resources_socket,
                    config.pod_resources_proxy_path,
                )
                hooks.append(proxy.run(node_states))
            await asyncio.gather(
                *hooks,
                node_states.run(),
                agent.collect_forever(),
                agent.report_forever(api, node_states),
                devices.run(api),
                qos.run(api, node_states),
                host_topology.run(api, node_states),
            )
    finally:
        await api.close()
        if runner is not None:
            await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    logging.basicConfig(
        level=level_for_verbosity(config.verbosity),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    log_flag_notes(config.flag_notes, log)
    if config.simulate is not None:
        try:
            load_file(config.simulate)
        except (OSError, ValueError) as exc:
            print(f"koordlet: cannot use load file {config.simulate}: {exc}", file=sys.stderr)
            return 2
    if config.simulate_devices is not None:
        try:
            load_devices_file(config.simulate_devices)
        except (OSError, ValueError) as exc:
            print(f"koordlet: cannot use devices file {config.simulate_devices}: {exc}", file=sys.stderr)
            return 2

    async def main_task() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await run(config)

    asyncio.run(main_task())
    return 0


if __name__ == "__main__":
    sys.exit(main())
