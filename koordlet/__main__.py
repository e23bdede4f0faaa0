"""``koordlet``: the node agent, reporting node, system and pod usage into the node's NodeMetric.

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
import signal
import sys
from pathlib import Path

from pydantic import ValidationError

from koordlet.agent import Agent
from koordlet.cgroups import detect_version
from koordlet.client import QoSClient
from koordlet.config import KoordletConfig
from koordlet.devices.description import load_devices_file
from koordlet.devices.reporter import DeviceSimulation, NodeDeviceReporter
from koordlet.fs import HostFS
from koordlet.metrics import KoordletMetrics, serve
from koordlet.qos.manager import QoSManager
from koordlet.qos.node_qos import NodeQoS
from koordlet.qos.simulated import SimulatedQoS
from koordlet.simulate.model import load_file
from koordlet.simulate.runner import Simulation
from koordlet.simulate.topology import TopologySimulation
from koordlet.states.node_states import ClusterStates, NodeStates
from koordlet.topology.agent import host_topology_reporter

__all__ = ["main", "parse_args"]

log = logging.getLogger("koordlet")


def parse_args(argv: list[str] | None) -> KoordletConfig:
    parser = argparse.ArgumentParser(prog="koordlet", description=__doc__.splitlines()[0])
    parser.add_argument("--node-name", help="the node to report for (required unless --simulate)")
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
    parser.add_argument("--cgroup-root", help="kubelet's --cgroup-root, the parent of kubepods (default /)")
    parser.add_argument("--cgroup-version", type=int, choices=(1, 2), help="force cgroups v1 or v2")
    parser.add_argument("--collect-interval-seconds", type=float, help="sampling period (default 1)")
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
        "--apply-cpusets",
        action=argparse.BooleanOptionalAction,
        help="write pods' cpusets into their cgroups (default on; never in simulation)",
    )
    parser.add_argument("--metrics-bind", help="listen address of /metrics and /healthz (default 0.0.0.0)")
    parser.add_argument(
        "--metrics-port", type=int, help="port of /metrics and /healthz (default 9316, 0: off)"
    )
    parser.add_argument(
        "--feature-gates",
        help="koordlet feature gates, Name=true|false separated by commas: BECPUSuppress, BECPUEvict, "
        "BEMemoryEvict, RdtResctrl, BECPUManager, GroupIdentity, Resctrl (docs/colocation.md)",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    try:
        return KoordletConfig(**{k: v for k, v in vars(args).items() if v is not None})
    except ValidationError as exc:
        parser.error("; ".join(str(error["msg"]) for error in exc.errors()))


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
                HostFS(config.host_root),
                config.device_config,
                config.report_interval_seconds,
            )
            fs = HostFS(config.host_root)
            version = config.cgroup_version or detect_version(fs)
            node_qos = None if version is None else NodeQoS(fs, version, config.gates, config.cgroup_root)
            qos = QoSManager(config.node_name or "", node_qos, agent.cache, config.gates, metrics=metrics)
            host_topology = host_topology_reporter(config)
            node_states = NodeStates(api, config.node_name or "")
            await asyncio.gather(
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
        level=logging.DEBUG if config.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
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
