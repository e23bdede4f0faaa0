"""docs/colocation.md "NUMA level": its worked example is what koord-manager computes per zone and
what the e2e test expects."""

from __future__ import annotations

from pathlib import Path

from apis.slo.sloconfig.colocation import parse_colocation_config
from e2e.scenarios import test_numa_batch_resources as e2e_scenario
from operators.logic.noderesource.inputs import node_inputs
from operators.logic.noderesource.node_resources import compute
from operators.logic.noderesource.numa import zone_outcome
from tests.operators.logic.noderesource.builders import NOW, metric, node, numa_pinned, pod, topology

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "colocation.md"


def test_the_numa_worked_example_is_what_koord_manager_computes() -> None:
    section = GUIDE.read_text().split("### NUMA level", 1)[1].split("\n## ", 1)[0]
    worked = node(cpu="16", memory="64Gi", alloc_cpu="16", alloc_memory="64Gi")
    pods = [
        pod("pinned", "4", "8Gi", priority_class="koord-prod", annotations=numa_pinned(0)),
        pod("unpinned", "1", "2Gi", priority_class="koord-prod"),
    ]
    reported = metric(system=("1", "2Gi"), pods={"pinned": ("2", "4Gi", "koord-prod")})
    strategy = parse_colocation_config('{"enable": true}').cluster
    inputs = node_inputs(worked, pods, reported)
    outcome = compute(inputs, strategy, NOW, None)
    nrt = topology({"node-0": ("8", "32Gi"), "node-1": ("8", "32Gi")})
    zones = zone_outcome(outcome, inputs, nrt, strategy, None)
    assert zones is not None
    figures = {zone: {name: q.value() for name, q in values.items()} for zone, values in zones.items()}
    assert figures == e2e_scenario._expected()
    for values in figures.values():
        for value in values.values():
            assert f'"{value}"' in section
            assert f"**{value}**" in section
