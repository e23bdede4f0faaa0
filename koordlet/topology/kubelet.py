"""What koordlet takes from the kubelet: its configuration file and the CPU manager's checkpoint.

- ``--kubelet-config`` (``/var/lib/kubelet/config.yaml``): a KubeletConfiguration; the CPU manager
  policy and its options, the reserved CPUs, the topology manager policy and scope. Fields left out
  take the kubelet's defaults (``none`` policies, ``container`` scope), as ``/configz`` would show.
- ``cpu_manager_state`` beside it: the CPUs the static policy gave each pod's containers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from apis.cpulist import format_cpus, parse_cpus
from apis.extension.numa import KUBELET_CPU_MANAGER_POLICY_STATIC, CPUInfo, KubeletCPUManagerPolicy
from apis.quantity import Quantity
from apis.yamltext import load_yaml

__all__ = [
    "DEFAULT_KUBELET_CONFIG",
    "KubeletConfig",
    "load_kubelet_config",
    "parse_cpu_manager_state",
    "reserved_cpus",
    "take_by_topology",
    "topology_policy",
]

DEFAULT_KUBELET_CONFIG = Path("/var/lib/kubelet/config.yaml")
CPU_MANAGER_STATE = "cpu_manager_state"


class KubeletConfig(BaseModel):
    """The fields of a KubeletConfiguration (kubelet.config.k8s.io/v1beta1) koordlet reads."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    cpu_manager_policy: str = "none"
    cpu_manager_policy_options: dict[str, str] | None = None
    reserved_system_cpus: str | None = Field(default=None, alias="reservedSystemCPUs")
    kube_reserved: dict[str, Quantity] | None = None
    system_reserved: dict[str, Quantity] | None = None
    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"

    def nrt_topology_policy(self) -> str:
        """The NRT ``topologyPolicies`` value of the topology manager's policy and scope."""
        return topology_policy(self.topology_manager_policy, self.topology_manager_scope)

    def cpu_manager(self, cpus: Sequence[CPUInfo]) -> KubeletCPUManagerPolicy:
        """The ``kubelet.koordinator.sh/cpu-manager-policy`` annotation's value; ``reservedCPUs``
        only under the static policy, picked as the kubelet picks them."""
        reserved = None
        if self.cpu_manager_policy == KUBELET_CPU_MANAGER_POLICY_STATIC:
            reserved = format_cpus(reserved_cpus(self, cpus))
        return KubeletCPUManagerPolicy(
            policy=self.cpu_manager_policy or None,
            options=self.cpu_manager_policy_options or None,
            reserved_cpus=reserved or None,
        )


def load_kubelet_config(path: Path) -> KubeletConfig:
    """Raises OSError when the file cannot be read, ValueError when it is not a configuration."""
    try:
        raw = load_yaml(path.read_text(), str(path)) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: not a KubeletConfiguration object")
        return KubeletConfig.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(f"{path}: {exc}") from exc


_POLICIES = {"single-numa-node": "SingleNUMANode", "restricted": "Restricted", "best-effort": "BestEffort"}
_SCOPES = {"pod": "PodLevel", "container": "ContainerLevel"}


def topology_policy(policy: str | None, scope: str | None) -> str:
    """The NRT ``topologyPolicies`` value of a kubelet topology manager policy and scope:
    ``single-numa-node`` + ``pod`` -> ``SingleNUMANodePodLevel``; ``none``, an empty or unknown
    policy or scope -> ``None``."""
    name, level = _POLICIES.get(policy or ""), _SCOPES.get(scope or "")
    return f"{name}{level}" if name and level else "None"


def parse_cpu_manager_state(text: str) -> dict[str, frozenset[int]]:
    """Pod UID -> the union of its containers' CPUs, from a ``cpu_manager_state`` checkpoint
    (``{"policyName", "defaultCpuSet", "entries": {uid: {container: "cpus"}}, "checksum"}``).
    A container whose CPU list does not parse is left out; raises ValueError on bad JSON."""
    try:
        checkpoint = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{CPU_MANAGER_STATE}: {exc}") from exc
    entries = checkpoint.get("entries") if isinstance(checkpoint, dict) else None
    pods: dict[str, frozenset[int]] = {}
    for uid, containers in (entries or {}).items():
        cpus: set[int] = set()
        for value in (containers or {}).values() if isinstance(containers, dict) else ():
            try:
                cpus |= parse_cpus(str(value))
            except ValueError:
                continue
        if cpus:
            pods[str(uid)] = frozenset(cpus)
    return pods


def take_by_topology(cpus: Sequence[CPUInfo], count: int) -> frozenset[int]:
    """``count`` CPUs as the kubelet's static policy takes its reserved ones: whole sockets while
    at least a socket is needed, then whole cores while at least a core is needed, then single CPUs,
    each in socket then core then CPU order. All of them when ``count`` is not smaller."""
    if count <= 0:
        return frozenset()
    if count >= len(cpus):
        return frozenset(cpu.id for cpu in cpus)
    ordered = sorted(cpus, key=lambda c: (c.socket, c.core, c.id))
    sockets: dict[int, list[int]] = {}
    cores: dict[tuple[int, int], list[int]] = {}
    for cpu in ordered:
        sockets.setdefault(cpu.socket, []).append(cpu.id)
        cores.setdefault((cpu.socket, cpu.core), []).append(cpu.id)
    taken: list[int] = []

    def free(group: list[int]) -> bool:
        return not set(group) & set(taken)

    for group in sockets.values():
        if count - len(taken) >= len(group) and free(group):
            taken += group
    for group in cores.values():
        if count - len(taken) >= len(group) and free(group):
            taken += group
    for cpu in ordered:
        if len(taken) >= count:
            break
        if cpu.id not in taken:
            taken.append(cpu.id)
    return frozenset(taken)


def reserved_cpus(config: KubeletConfig, cpus: Sequence[CPUInfo]) -> frozenset[int]:
    """The static policy's reserved CPUs: ``reservedSystemCPUs`` when given, else
    ceil(kubeReserved.cpu + systemReserved.cpu) CPUs taken by topology."""
    if config.reserved_system_cpus:
        return parse_cpus(config.reserved_system_cpus)
    millis = sum(
        reserved["cpu"].milli_value()
        for reserved in (config.kube_reserved, config.system_reserved)
        if reserved and "cpu" in reserved
    )
    return take_by_topology(cpus, math.ceil(millis / 1000))
