"""The NodeSLO koordlet enforces: the received spec overlaid on koordlet's defaults, as Koordinator's
``statesinformer/impl/states_nodeslo.go`` does.

The spec is laid over ``DefaultNodeSLOSpecConfig`` (Koordinator's ``MergeCfg``); then every class
whose ``cpuQOS`` / ``resctrlQOS`` is not enabled gets the "None" values (group identity 0, schedIdle
0, L3 0-100 %, MBA 100 %), so turning a class off resets its cgroups rather than leaving the last
values. Without a NodeSLO koordlet runs on the defaults, where every feature is off.
"""

from __future__ import annotations

from apis.slo.nodeslo import (
    CPUQOSCfg,
    NodeSLOSpec,
    ResctrlQOSCfg,
    ResourceQOS,
    ResourceQOSPolicies,
    ResourceQOSStrategy,
    ResourceThresholdStrategy,
)
from apis.slo.sloconfig.merge import merge_cfg

__all__ = ["QOS_CLASS_FIELDS", "class_qos", "default_spec", "effective_spec"]

QOS_CLASS_FIELDS = {"LSR": "lsr_class", "LS": "ls_class", "BE": "be_class", "SYSTEM": "system_class"}
"""Koordinator QoS class -> its field of ResourceQOSStrategy (LSE pods use the LSR class)."""


def _class(group_identity: int, sched_idle: int, expeller: bool, l3_end: int) -> ResourceQOS:
    return ResourceQOS(
        cpu_qos=CPUQOSCfg(
            enable=False, group_identity=group_identity, sched_idle=sched_idle, core_expeller=expeller
        ),
        resctrl_qos=ResctrlQOSCfg(
            enable=False, cat_range_start_percent=0, cat_range_end_percent=l3_end, mba_percent=100
        ),
    )


def default_spec() -> NodeSLOSpec:
    return NodeSLOSpec(
        resource_used_threshold_with_be=ResourceThresholdStrategy(
            enable=False,
            cpu_suppress_threshold_percent=65,
            cpu_suppress_policy="cpuset",
            memory_evict_threshold_percent=70,
            cpu_evict_policy="evictByRealLimit",
        ),
        resource_qos_strategy=ResourceQOSStrategy(
            policies=ResourceQOSPolicies(cpu_policy="groupIdentity"),
            lsr_class=_class(2, 0, True, 100),
            ls_class=_class(2, 0, True, 100),
            be_class=_class(-1, 1, False, 30),
            system_class=_class(0, 0, False, 100),
        ),
        host_applications=[],
    )


def _none_values(qos: ResourceQOS | None) -> ResourceQOS:
    qos = qos.model_copy(deep=True) if qos is not None else ResourceQOS()
    cpu = qos.cpu_qos or CPUQOSCfg()
    if not cpu.enable:
        qos.cpu_qos = CPUQOSCfg(enable=False, group_identity=0, sched_idle=0, core_expeller=False)
    resctrl = qos.resctrl_qos or ResctrlQOSCfg()
    if not resctrl.enable:
        qos.resctrl_qos = ResctrlQOSCfg(
            enable=False, cat_range_start_percent=0, cat_range_end_percent=100, mba_percent=100
        )
    return qos


def effective_spec(received: NodeSLOSpec | None) -> NodeSLOSpec:
    """The spec koordlet acts on: defaults, the received spec on top, disabled classes neutral."""
    spec = merge_cfg(default_spec(), received)
    strategy = spec.resource_qos_strategy or ResourceQOSStrategy()
    for name in QOS_CLASS_FIELDS.values():
        setattr(strategy, name, _none_values(getattr(strategy, name)))
    spec.resource_qos_strategy = strategy
    return spec


def class_qos(spec: NodeSLOSpec, qos_class: str) -> ResourceQOS:
    """The settings of a Koordinator QoS class (LSE -> LSR; none -> the LS class's)."""
    strategy = spec.resource_qos_strategy or ResourceQOSStrategy()
    name = QOS_CLASS_FIELDS.get("LSR" if qos_class == "LSE" else qos_class, "ls_class")
    found: ResourceQOS | None = getattr(strategy, name)
    return found or ResourceQOS()
