"""docs/colocation.md's NodeSLO example: its ConfigMap is accepted key by key, and the NodeSLO it
shows is what koord-manager renders for the labelled node."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from apis.slo.sloconfig.nodeslo_config import (
    parse_cpu_burst_cfg,
    parse_host_application_cfg,
    parse_resource_qos_cfg,
    parse_resource_threshold_cfg,
    parse_system_cfg,
)
from operators.logic.nodeslo import NodeSLOConfig, render

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "colocation.md"


def section_blocks() -> list[dict[str, Any]]:
    text = GUIDE.read_text()
    section = text.split("\n## NodeSLO\n", 1)[1].split("\n## ", 1)[0]
    blocks: list[str] = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    return [yaml.safe_load(block) for block in blocks]


def test_the_guides_node_slo_is_what_its_config_map_renders() -> None:
    [config_map, node_slo] = section_blocks()
    data = config_map["data"]
    config = NodeSLOConfig(
        resource_threshold=parse_resource_threshold_cfg(data["resource-threshold-config"]),
        resource_qos=parse_resource_qos_cfg(data["resource-qos-config"]),
        cpu_burst=parse_cpu_burst_cfg(data["cpu-burst-config"]),
        system=parse_system_cfg(data["system-config"]),
        host_application=parse_host_application_cfg(data["host-application-config"]),
    )
    rendered = render(config, {"colocation": "lsr"}, {}).spec.to_wire()
    shown = node_slo["spec"]
    qos_shown = shown.pop("resourceQOSStrategy")
    qos_rendered = rendered.pop("resourceQOSStrategy")
    assert set(qos_rendered) - set(qos_shown) == {"lsrClass", "systemClass"}  # the two left out
    assert {key: qos_rendered[key] for key in qos_shown} == qos_shown
    assert shown == rendered
    assert node_slo["metadata"]["name"] == "lsr-0"
    other = render(config, {"colocation": "mixed"}, {}).spec
    assert other.resource_used_threshold_with_be is not None
    assert other.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 65
