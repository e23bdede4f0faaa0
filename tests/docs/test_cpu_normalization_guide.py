"""docs/colocation.md's CPU normalization section: its ConfigMap is the one the e2e test applies, and
its NodeResourceTopology, labels and kubelet report give the annotations and allocatable it shows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from apis.extension.numa import get_cpu_basic_info
from apis.extension.qosannotations import ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO
from apis.slo.sloconfig.cpu_normalization import parse_cpu_normalization_cfg, parse_resource_amplification_cfg
from apis.topology import NodeResourceTopology
from e2e.scenarios import test_cpu_normalization as e2e_scenario
from operators.logic.cpu_normalization import decide_ratio
from operators.logic.node_amplification import amplify_status
from operators.logic.resource_amplification import amplification_annotation, amplification_ratios

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "colocation.md"


def section() -> str:
    text = GUIDE.read_text()
    start = text.index("## CPU normalization and resource amplification")
    return text[start : text.index("\n## ", start + 1)]


def yaml_blocks() -> list[dict[str, Any]]:
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section(), flags=re.DOTALL)]


def _parsed(cm: dict[str, Any]) -> dict[str, Any]:
    return {**cm, "data": {k: json.loads(v) for k, v in cm["data"].items()}}


def test_the_e2e_applies_the_guides_configmap() -> None:
    (cm,) = [b for b in yaml_blocks() if b["kind"] == "ConfigMap"]
    assert _parsed(cm) == _parsed(yaml.safe_load(e2e_scenario.CONFIGMAP))


def test_the_guides_node_gets_the_ratios_and_allocatable_it_shows() -> None:
    blocks = yaml_blocks()
    (cm,) = [b for b in blocks if b["kind"] == "ConfigMap"]
    (nrt,) = [NodeResourceTopology.model_validate(b) for b in blocks if b["kind"] == "NodeResourceTopology"]
    labels = {"node.koordinator.sh/cpu-normalization-enabled": "true", "e2e-cpunorm": "true"}
    normalization = parse_cpu_normalization_cfg(cm["data"]["cpu-normalization-config"]).strategy_for(labels)
    decision = decide_ratio(normalization, "true", get_cpu_basic_info(nrt.metadata.annotations))
    assert decision.value == "1.20"
    amplification = parse_resource_amplification_cfg(cm["data"]["resource-amplification-config"])
    annotation = amplification_annotation(amplification_ratios(amplification.strategy_for(labels), 1.20))
    assert annotation == '{"cpu":1.20,"memory":1.50}'
    assert f'"node.koordinator.sh/resource-amplification-ratio": {json.dumps(annotation)}' in section()
    mutation = amplify_status(
        {ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO: annotation}, {"cpu": "32", "memory": "128Gi"}, None
    )
    shown = f"{mutation.allocatable['cpu']} {mutation.allocatable['memory']} "
    shown += mutation.annotations["node.koordinator.sh/raw-allocatable"] or ""
    assert shown in section()
    assert decide_ratio(normalization, "false", None).value == "1.00"
