"""docs/numa.md's NodeResourceTopology walkthrough, replayed against the in-memory API: the pools
and policy it prints are what koordlet computes from the example file and the pod it applies."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from apis.core import Node, Pod
from koordlet.simulate.model import load_file
from koordlet.simulate.topology import TopologySimulation
from tests.koordlet.topology.fake_api import FakeTopologyAPI

ROOT = Path(__file__).parents[2]
GUIDE = (ROOT / "docs" / "numa.md").read_text()


def _printed_after(command_fragment: str) -> str:
    lines = GUIDE.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("$ ") and command_fragment in line)
    return lines[index + 1]


async def test_the_walkthrough_prints_what_koordlet_computes() -> None:
    manifest = re.search(r"kubectl apply -f - <<EOF\n(.*?)\nEOF", GUIDE, re.S)
    assert manifest is not None
    pod = Pod.model_validate(yaml.safe_load(manifest.group(1)))
    pod.metadata.uid = "u-lse-demo"
    load = load_file(ROOT / "docs" / "examples" / "koordlet" / "topology.yaml")
    nodes = [
        Node.model_validate({"metadata": {"name": name, "uid": f"uid-{name}"}}) for name in load.topologies()
    ]
    api = FakeTopologyAPI(nodes, [pod])
    await TopologySimulation(load, 1.0).report_once(api, api.states())
    gpu0 = api.topologies["gpu-0"].metadata.annotations or {}
    assert gpu0["node.koordinator.sh/cpu-shared-pools"] == _printed_after("cpu-shared-pools}'")
    assert gpu0["kubelet.koordinator.sh/cpu-manager-policy"] == _printed_after("cpu-manager-policy}'")
    cpu0 = api.topologies["cpu-0"]
    shown = re.search(r"cpu-shared-pools: '(.*?)'", GUIDE)
    assert shown is not None
    assert (cpu0.metadata.annotations or {})["node.koordinator.sh/cpu-shared-pools"] == shown.group(1)
    assert json.loads((cpu0.metadata.annotations or {})["node.koordinator.sh/cpu-basic-info"]) == {
        "hyperThreadEnabled": True
    }
