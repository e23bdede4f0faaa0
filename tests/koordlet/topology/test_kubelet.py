"""What koordlet takes from the kubelet: the policy mapping, the config file, reserved CPUs, the state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apis.cpulist import format_cpus
from apis.extension.numa import CPUInfo, KubeletCPUManagerPolicy
from koordlet.simulate.topology_spec import NodeTopologySpec
from koordlet.topology.kubelet import (
    KubeletConfig,
    load_kubelet_config,
    parse_cpu_manager_state,
    take_by_topology,
    topology_policy,
)


@pytest.mark.parametrize(
    ("policy", "scope", "expected"),
    [
        ("single-numa-node", "pod", "SingleNUMANodePodLevel"),
        ("single-numa-node", "container", "SingleNUMANodeContainerLevel"),
        ("restricted", "pod", "RestrictedPodLevel"),
        ("restricted", "container", "RestrictedContainerLevel"),
        ("best-effort", "pod", "BestEffortPodLevel"),
        ("best-effort", "container", "BestEffortContainerLevel"),
        ("none", "pod", "None"),
        ("none", "container", "None"),
        ("", "pod", "None"),
        (None, None, "None"),
        ("single-numa-node", "node", "None"),
        ("prefer-closest", "pod", "None"),
    ],
)
def test_kubelet_topology_manager_policy_and_scope_map_to_nrt_policies(
    policy: str | None, scope: str | None, expected: str
) -> None:
    assert topology_policy(policy, scope) == expected


def _cpus() -> tuple[CPUInfo, ...]:
    """2 sockets x 1 NUMA x 4 cores x 2 threads, Linux numbering."""
    return (
        NodeTopologySpec.model_validate({"sockets": 2, "coresPerNUMANode": 4, "memoryPerNUMANode": "1Gi"})
        .host()
        .cpus
    )


def test_config_file_fields_and_the_kubelet_defaults(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "cpuManagerPolicy: static\ncpuManagerPolicyOptions: {full-pcpus-only: 'true'}\n"
        "kubeReserved: {cpu: 500m, memory: 1Gi}\nsystemReserved: {cpu: '1'}\n"
        "topologyManagerPolicy: single-numa-node\nevictionHard: {memory.available: 100Mi}\n"
    )
    config = load_kubelet_config(path)
    assert config.nrt_topology_policy() == "SingleNUMANodeContainerLevel"  # the kubelet's default scope
    # ceil(0.5 + 1) = 2 CPUs, one whole core: CPU 0 and its sibling 8
    assert config.cpu_manager(_cpus()) == KubeletCPUManagerPolicy(
        policy="static", options={"full-pcpus-only": "true"}, reserved_cpus="0,8"
    )
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_kubelet_config(empty).cpu_manager(_cpus()) == KubeletCPUManagerPolicy(policy="none")
    assert load_kubelet_config(empty).nrt_topology_policy() == "None"


def test_reserved_system_cpus_win_over_the_reserved_amounts() -> None:
    config = KubeletConfig.model_validate(
        {"cpuManagerPolicy": "static", "reservedSystemCPUs": "3,1-2", "kubeReserved": {"cpu": "4"}}
    )
    assert config.cpu_manager(_cpus()).reserved_cpus == "1-3"


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (0, ""),
        (1, "0"),
        (2, "0,8"),
        (3, "0-1,8"),
        (8, "0-3,8-11"),
        (9, "0-4,8-11"),
        (16, "0-15"),
        (99, "0-15"),
    ],
)
def test_cpus_are_taken_by_socket_then_core_then_thread(count: int, expected: str) -> None:
    assert format_cpus(take_by_topology(_cpus(), count)) == expected


@pytest.mark.parametrize(
    "content", ["[", "cpuManagerPolicy: [static", "- a list"], ids=["yaml", "unclosed", "not-a-mapping"]
)
def test_a_config_file_that_is_not_a_configuration_is_a_value_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"config\.yaml"):
        load_kubelet_config(path)


def test_cpu_manager_state_merges_a_pods_containers_and_skips_bad_lists() -> None:
    state = {
        "policyName": "static",
        "defaultCpuSet": "0-1,6-15",
        "entries": {
            "uid-b": {"app": "2-3", "sidecar": "4", "broken": "x"},
            "uid-a": {"app": "5"},
            "uid-empty": {"app": ""},
        },
        "checksum": 1,
    }
    assert parse_cpu_manager_state(json.dumps(state)) == {
        "uid-b": frozenset({2, 3, 4}),
        "uid-a": frozenset({5}),
    }
    assert parse_cpu_manager_state('{"policyName":"none","defaultCpuSet":""}') == {}
    with pytest.raises(ValueError, match="cpu_manager_state"):
        parse_cpu_manager_state("{not json")
