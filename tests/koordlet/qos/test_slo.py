"""koordlet's effective NodeSLO: the received spec over the defaults, disabled classes neutral."""

from __future__ import annotations

from apis.slo.nodeslo import NodeSLOSpec
from koordlet.qos.slo import class_qos, effective_spec


def test_no_node_slo_means_defaults_with_every_feature_off() -> None:
    spec = effective_spec(None)
    threshold = spec.resource_used_threshold_with_be
    assert threshold is not None
    assert (threshold.enable, threshold.cpu_suppress_threshold_percent, threshold.cpu_suppress_policy) == (
        False,
        65,
        "cpuset",
    )
    assert (threshold.memory_evict_threshold_percent, threshold.cpu_evict_policy) == (70, "evictByRealLimit")
    for klass in ("LSR", "LS", "BE", "SYSTEM"):
        qos = class_qos(spec, klass)
        assert qos.cpu_qos is not None
        assert qos.resctrl_qos is not None
        assert (qos.cpu_qos.enable, qos.cpu_qos.group_identity) == (False, 0)
        assert (qos.resctrl_qos.cat_range_start_percent, qos.resctrl_qos.cat_range_end_percent) == (0, 100)
        assert qos.resctrl_qos.mba_percent == 100


def test_enabled_class_keeps_its_defaults_and_overrides_others_go_neutral() -> None:
    received = NodeSLOSpec.model_validate(
        {
            "resourceUsedThresholdWithBE": {"enable": True, "memoryEvictThresholdPercent": 80},
            "resourceQOSStrategy": {
                "beClass": {"cpuQOS": {"enable": True}, "resctrlQOS": {"enable": True}},
                "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 1}},
                "lsrClass": {"cpuQOS": {"enable": False, "groupIdentity": 2}},
            },
        }
    )
    spec = effective_spec(received)
    threshold = spec.resource_used_threshold_with_be
    assert threshold is not None
    assert (
        threshold.enable,
        threshold.memory_evict_threshold_percent,
        threshold.cpu_suppress_threshold_percent,
    ) == (
        True,
        80,
        65,
    )
    be, ls, lsr = class_qos(spec, "BE"), class_qos(spec, "LS"), class_qos(spec, "LSE")
    assert be.cpu_qos is not None
    assert be.resctrl_qos is not None
    assert (be.cpu_qos.group_identity, be.cpu_qos.sched_idle) == (-1, 1)
    assert (be.resctrl_qos.cat_range_end_percent, be.resctrl_qos.mba_percent) == (30, 100)
    assert ls.cpu_qos is not None
    assert ls.cpu_qos.group_identity == 1
    assert lsr.cpu_qos is not None
    assert lsr.cpu_qos.group_identity == 0
