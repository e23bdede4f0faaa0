"""koordlet's command line, /healthz and /metrics."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from apis.slo.nodemetric import NodeMetricInfo, NodeMetricStatus, ResourceMap
from koordlet.__main__ import main, parse_args
from koordlet.metrics import KoordletMetrics, serve


def test_flags() -> None:
    config = parse_args(["--node-name", "n1", "--cgroup-root", "/custom", "--report-interval-seconds", "2"])
    assert (config.node_name, config.cgroup_root, config.report_interval_seconds) == ("n1", "/custom", 2)
    assert config.metrics_port == 9316
    simulate = parse_args(["--simulate", "load.yaml", "--kubeconfig", "k"])
    assert simulate.simulate == Path("load.yaml")
    assert simulate.kubeconfig == Path("k")


def test_a_node_name_is_required_without_a_simulation(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args([])
    assert "--node-name is required unless --simulate is given" in capsys.readouterr().err


def test_an_invalid_load_file_stops_koordlet_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "load.yaml"
    bad.write_text("nodes:\n- name: a\n  usage: {cpu: lots}\n")
    assert main(["--simulate", str(bad)]) == 2
    assert "lots" in capsys.readouterr().err


async def test_healthz_and_metrics_under_koordinators_names(unused_tcp_port: int) -> None:
    metrics = KoordletMetrics()
    metrics.started("n1")
    status = NodeMetricStatus(
        node_metric=NodeMetricInfo(
            node_usage=ResourceMap.model_validate({"resources": {"cpu": "1500m", "memory": "2Gi"}})
        )
    )
    metrics.record("n1", status)
    runner = await serve(metrics, "127.0.0.1", unused_tcp_port)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{unused_tcp_port}/healthz") as response:
                assert response.status == 200
                assert await response.text() == "ok"
            async with session.get(f"http://127.0.0.1:{unused_tcp_port}/metrics") as response:
                text = await response.text()
    finally:
        await runner.cleanup()
    assert 'koordlet_start_time{node="n1"}' in text
    assert 'koordlet_node_metric_node_usage{node="n1",resource="cpu",unit="core"} 1.5' in text
    assert 'koordlet_node_metric_node_usage{node="n1",resource="memory",unit="byte"} 2.147483648e+09' in text


def test_topology_and_cpuset_flags() -> None:
    default = parse_args(["--node-name", "n1"])
    assert default.kubelet_config == Path("/var/lib/kubelet/config.yaml")
    assert (default.topology_interval_seconds, default.apply_cpusets) == (3.0, True)
    assert not default.gates.be_cpu_manager
    config = parse_args(
        [
            "--node-name",
            "n1",
            "--kubelet-config",
            "/etc/kubernetes/kubelet.yaml",
            "--topology-interval-seconds",
            "10",
            "--no-apply-cpusets",
            "--feature-gates",
            "BECPUManager=true",
        ]
    )
    assert config.kubelet_config == Path("/etc/kubernetes/kubelet.yaml")
    assert (config.topology_interval_seconds, config.apply_cpusets) == (10.0, False)
    assert config.gates.be_cpu_manager  # Koordinator's gate: BE pods with NUMA resources on BE pools


def test_a_load_file_with_a_bad_topology_stops_koordlet_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "load.yaml"
    bad.write_text("nodes:\n- name: a\n  topology: {coresPerNUMANode: 4, memoryPerNUMANode: lots}\n")
    assert main(["--simulate", str(bad)]) == 2
    assert "memoryPerNUMANode" in capsys.readouterr().err


def test_pod_resources_proxy_flags_and_gate() -> None:
    default = parse_args(["--node-name", "n1"])
    assert not default.gates.pod_resources_proxy  # alpha, off, as Koordinator's
    assert default.kubelet_pod_resources_socket == Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    assert default.pod_resources_proxy_path == Path("/var/run/koordlet/pod-resources")
    config = parse_args(
        [
            "-node-name=n1",
            "-feature-gates=PodResourcesProxy=true",
            "-var-lib-kubelet-dir=/host/kubelet",
            "-pod-resources-proxy-path=/run/proxy",
        ]
    )
    assert config.gates.pod_resources_proxy
    assert config.kubelet_pod_resources_socket == Path("/host/kubelet/pod-resources/kubelet.sock")
    assert config.pod_resources_proxy_path == Path("/run/proxy")
    assert not [note for note in config.flag_notes if "pod-resources" in note or "PodResources" in note]
