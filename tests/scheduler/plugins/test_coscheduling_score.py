"""Coscheduling's Score (Koordinator's network-topology order) through the plugin's PreScore and Score."""

from __future__ import annotations

import numpy as np

from apis.client.backend import TOPOLOGIES, EventType, WatchEvent
from apis.core import Pod
from apis.extension.networktopology import ANNOTATION_POD_NETWORK_TOPOLOGY_SELECTOR
from apis.scheduling.networktopology import ClusterNetworkTopology
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.plugins.coscheduling import Coscheduling, CoschedulingArgs, new
from scheduler.plugins.coscheduling.topology_score import normalize_reversed
from tests.scheduler.builders import make_cache, make_node, make_pod
from tests.scheduler.plugins.helpers import scores

TOPOLOGY = ClusterNetworkTopology.model_validate(
    {
        "metadata": {"name": "default"},
        "spec": {
            "networkTopologySpec": [
                {
                    "topologyLayer": "BlockLayer",
                    "parentTopologyLayer": "ClusterTopologyLayer",
                    "labelKey": ["b"],
                },
                {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
            ]
        },
    }
)
BLOCKS = {"n1": "b1", "n2": "b1", "n3": "b1", "n4": "b2", "n5": "b2"}


def selected(name: str, selector: str, node: str | None = None) -> Pod:
    builder = make_pod(name).req(cpu="1")
    if node is not None:
        builder = builder.on(node)
    pod = builder.obj()
    pod.metadata.annotations = {ANNOTATION_POD_NETWORK_TOPOLOGY_SELECTOR: selector}
    return pod


def plugin_over(assigned: list[Pod]) -> tuple[Coscheduling, Snapshot]:
    nodes = [
        make_node(n).alloc(cpu="8", memory="16Gi", pods="110").label("b", b).obj() for n, b in BLOCKS.items()
    ]
    cache = make_cache(nodes, assigned)
    handle = Handle(backend=MemoryBackend(), snapshot=lambda: Snapshot(cache))
    plugin = new(CoschedulingArgs(), handle)
    for listener in handle.informers.listeners(TOPOLOGIES):
        listener(WatchEvent(EventType.REPLACED, objects=[TOPOLOGY]))
    return plugin, Snapshot(cache)


def test_nodes_of_the_domain_holding_the_selectors_pods_come_first() -> None:
    """b2 holds a pod of the selector: its nodes first, the node holding it first of all; then b1's
    nodes, by name (equal domains)."""
    plugin, snapshot = plugin_over([selected("there", "job-1", node="n5")])
    got = scores(plugin, PodInfo.of(selected("new", "job-1")), snapshot)
    assert got == {"n5": 100, "n4": 75, "n1": 50, "n2": 25, "n3": 0}


def test_without_pods_of_the_selector_the_smaller_domain_comes_first() -> None:
    plugin, snapshot = plugin_over([selected("other", "job-2", node="n1")])
    got = scores(plugin, PodInfo.of(selected("new", "job-1")), snapshot)
    assert max(got, key=lambda n: got[n]) == "n4"
    assert got["n4"] > got["n5"] > got["n1"] > got["n2"] > got["n3"]


def test_a_pod_without_a_selector_is_not_scored() -> None:
    plugin, snapshot = plugin_over([])
    pod = PodInfo.of(make_pod("plain").req(cpu="1").obj())
    status = plugin.pre_score(CycleState(), pod, snapshot, snapshot.candidate_rows())
    assert status.code == Code.SKIP


def test_the_normalization_is_koordinators_reversed_default() -> None:
    assert normalize_reversed(np.array([0, 1, 2, 4])).tolist() == [100, 75, 50, 0]
    assert normalize_reversed(np.array([0, 0])).tolist() == [100, 100]
