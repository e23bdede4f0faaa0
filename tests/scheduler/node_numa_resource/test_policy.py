"""Policy resolution (algorithms 11.1): node label x kubelet policy x pod spec, who gets a cpuset,
and the node's bind policy."""

from __future__ import annotations

import pytest

from apis.extension.numa import NUMATopologySpec, ResourceSpec
from scheduler.plugins.node_numa_resource.policy import (
    ERR_BIND_POLICY_CONFLICT,
    ERR_NON_INTEGER_CPUS,
    CPURequest,
    NodeCPUBind,
    cpu_request,
    kubelet_numa_policy,
    merge_policy,
    node_cpu_bind,
    node_numa_policy,
)

KUBELET = [
    (["None"], ""),
    (["SingleNUMANodePodLevel"], "SingleNUMANode"),
    (["SingleNUMANodeContainerLevel"], "SingleNUMANode"),
    (["RestrictedPodLevel"], "Restricted"),
    (["RestrictedContainerLevel"], "Restricted"),
    (["BestEffortPodLevel"], "BestEffort"),
    (["BestEffortContainerLevel"], "BestEffort"),
    (["Unknown", "RestrictedPodLevel"], "Restricted"),
    ([], ""),
]


@pytest.mark.parametrize(("policies", "expected"), KUBELET, ids=[str(p) for p, _ in KUBELET])
def test_every_level_koordlet_writes_maps_to_its_policy(policies: list[str], expected: str) -> None:
    assert kubelet_numa_policy(policies) == expected


LABELS = ["", "BestEffort", "Restricted", "SingleNUMANode", "Bogus"]
KUBELET_POLICIES = ["", "BestEffort", "Restricted", "SingleNUMANode"]
POD = ["", "BestEffort", "Restricted", "SingleNUMANode"]


@pytest.mark.parametrize("label", LABELS)
@pytest.mark.parametrize("kubelet", KUBELET_POLICIES)
@pytest.mark.parametrize("pod", POD)
def test_policy_matrix(label: str, kubelet: str, pod: str) -> None:
    """The kubelet's policy wins over the label; an unknown label is None; a pod policy that is set
    must equal a node policy that is set, and then wins."""
    node = node_numa_policy(label, kubelet)
    expected_node = kubelet or (label if label != "Bogus" else "")
    assert node == expected_node
    merged = merge_policy(pod, node)
    if pod and expected_node and pod != expected_node:
        assert merged is None
    else:
        assert merged == (pod or expected_node)


def request(
    cpu: int = 4000,
    qos: str | None = "LSR",
    spec: ResourceSpec | None = None,
    numa: NUMATopologySpec | None = None,
    default: str = "FullPCPUs",
    priority: int | None = None,
) -> CPURequest | str:
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    return cpu_request(
        milli_cpu=cpu,
        labels=labels,
        priority=priority,
        spec=spec or ResourceSpec(),
        numa_spec=numa or NUMATopologySpec(),
        default_bind_policy=default,
    )


@pytest.mark.parametrize(
    ("qos", "priority", "binds"),
    [
        ("LSR", None, True),
        ("LSE", None, True),
        ("LS", None, False),
        ("BE", None, False),
        (None, None, False),
        ("LSR", 5500, False),  # koord-batch by spec.priority: no cpuset
    ],
)
def test_only_lse_and_lsr_pods_of_koord_prod_ask_for_a_cpuset(
    qos: str | None, priority: int | None, binds: bool
) -> None:
    got = request(qos=qos, priority=priority)
    assert isinstance(got, CPURequest)
    assert got.bind is binds


def test_the_default_bind_policy_fills_in_and_is_implicit() -> None:
    got = request()
    assert isinstance(got, CPURequest)
    assert (got.bind_policy, got.required_policy, got.implicit_spec) == ("FullPCPUs", "", True)
    spread = request(default="SpreadByPCPUs")
    assert isinstance(spread, CPURequest)
    assert spread.bind_policy == "SpreadByPCPUs"
    none = request(default="")
    assert isinstance(none, CPURequest)
    assert not none.bind


def test_a_required_policy_overrides_the_preferred_one() -> None:
    got = request(
        spec=ResourceSpec(preferredCPUBindPolicy="SpreadByPCPUs", requiredCPUBindPolicy="FullPCPUs")
    )
    assert isinstance(got, CPURequest)
    assert (got.bind_policy, got.required_policy, got.implicit_spec) == ("FullPCPUs", "FullPCPUs", False)
    default_required = request(spec=ResourceSpec(requiredCPUBindPolicy="Default"), default="SpreadByPCPUs")
    assert isinstance(default_required, CPURequest)
    assert default_required.required_policy == "SpreadByPCPUs"


def test_a_cpuset_pod_with_a_fractional_cpu_is_refused() -> None:
    assert request(cpu=1500) == ERR_NON_INTEGER_CPUS
    ls = request(cpu=1500, qos="LS")
    assert isinstance(ls, CPURequest)
    assert not ls.integer


def test_a_pod_policy_without_exclusivity_is_required_exclusive() -> None:
    got = request(numa=NUMATopologySpec(numaTopologyPolicy="Restricted"))
    assert isinstance(got, CPURequest)
    assert got.exclusive == "Required"
    preferred = request(
        numa=NUMATopologySpec(numaTopologyPolicy="Restricted", singleNUMANodeExclusive="Preferred")
    )
    assert isinstance(preferred, CPURequest)
    assert preferred.exclusive == "Preferred"


@pytest.mark.parametrize(
    ("qos", "cpu", "spec", "node", "expected"),
    [
        pytest.param("LS", 2000, None, "None", NodeCPUBind(False, "", False), id="ls-free-node"),
        pytest.param(
            "LS", 2000, None, "FullPCPUsOnly", NodeCPUBind(True, "FullPCPUs", True, True), id="ls-forced"
        ),
        pytest.param("LS", 1500, None, "FullPCPUsOnly", ERR_NON_INTEGER_CPUS, id="ls-fractional-forced"),
        pytest.param(
            "LSR",
            2000,
            ResourceSpec(requiredCPUBindPolicy="SpreadByPCPUs"),
            "FullPCPUsOnly",
            ERR_BIND_POLICY_CONFLICT,
            id="conflict",
        ),
        pytest.param(
            "LSR",
            2000,
            ResourceSpec(requiredCPUBindPolicy="SpreadByPCPUs"),
            "SpreadByPCPUs",
            NodeCPUBind(True, "SpreadByPCPUs", True, False),
            id="same-required",
        ),
        pytest.param("LSR", 2000, None, "None", NodeCPUBind(True, "FullPCPUs", False), id="lsr-preferred"),
    ],
)
def test_the_node_bind_policy(
    qos: str, cpu: int, spec: ResourceSpec | None, node: str, expected: NodeCPUBind | str
) -> None:
    got = request(cpu=cpu, qos=qos, spec=spec)
    if isinstance(got, str):
        assert got == expected
        return
    assert node_cpu_bind(got, node) == expected  # type: ignore[arg-type]
