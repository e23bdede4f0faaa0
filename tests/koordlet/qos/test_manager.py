"""The QoS manager's round on a node: NodeSLO (or none), pods (koordlet's watched states) and the
metric cache in; cgroup writes, evictions and events out."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apis.core import Node, Pod
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLO
from koordlet.collectors import series
from koordlet.fs import HostFS
from koordlet.metric_cache import MetricCache
from koordlet.qos.evictor import Evictor
from koordlet.qos.manager import QoSManager
from koordlet.qos.node_qos import NodeQoS
from koordlet.states.informer import Informer
from koordlet.states.resources import RESOURCES, Kind
from koordlet.states.store import States
from tests.koordlet.qos.cgroupfs import CgroupTree
from tests.koordlet.qos.podfactory import node, pod
from tests.koordlet.states.fake_api import FakeListWatch, event, named

GI = 1 << 30


@dataclass
class FakeAPI:
    slo: NodeSLO | None
    pods: list[Pod]
    node: Node = field(default_factory=lambda: node(memory="100Gi"))
    evicted: list[str] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)

    def states(self) -> States:
        states = States()
        states.replace(Kind.NODE_SLO, [self.slo] if self.slo else [])
        states.replace(Kind.NODE, [self.node])
        states.replace(Kind.POD, self.pods)
        return states

    async def evict(self, namespace: str, name: str) -> None:
        self.evicted.append(name)

    async def pod_event(self, pod: Pod, reason: str, message: str, event_type: str, host: str) -> None:
        self.events.append((pod.metadata.name or "", reason, message))


def _setup(tmp_path: Path, slo: dict[str, Any] | None) -> tuple[CgroupTree, FakeAPI, QoSManager]:
    tree = CgroupTree(tmp_path, 1, anolis=True)
    for qos_dir in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
        tree.add(qos_dir)
    pods = [
        pod("be", qos="BE", kube_qos="BestEffort"),
        pod("ls", qos="LS", annotations={"koordinator.sh/cpuQOS": "not json"}),
    ]
    tree.add("kubepods/besteffort/poduid-be")
    tree.add("kubepods/burstable/poduid-ls")
    cache = MetricCache()
    now = time.time()
    for t in range(-5, 1):
        cache.append((series.NODE_MEMORY,), now + t, 90.0 * GI)
        cache.append((series.POD_MEMORY, "uid-be"), now + t, 20.0 * GI)
    gates = KoordletFeatureGates(be_memory_evict=True)
    api = FakeAPI(
        NodeSLO.model_validate({"metadata": {"name": "node-a"}, "spec": slo}) if slo else None, pods
    )
    manager = QoSManager("node-a", NodeQoS(HostFS(tmp_path), 1, gates), cache, gates)
    return tree, api, manager


def test_without_a_node_slo_nothing_is_enforced(tmp_path: Path) -> None:
    tree, api, manager = _setup(tmp_path, None)
    asyncio.run(manager.round(api.states(), Evictor(api)))
    assert tree.read("kubepods/besteffort/poduid-be", "cpu.bvt_warp_ns") == "0"
    assert api.evicted == []


def test_a_round_writes_cgroups_evicts_and_reports_a_bad_annotation_once(tmp_path: Path) -> None:
    slo = {
        "resourceUsedThresholdWithBE": {"enable": True},
        "resourceQOSStrategy": {
            "beClass": {"cpuQOS": {"enable": True}},
            "lsClass": {"cpuQOS": {"enable": True}},
        },
    }
    tree, api, manager = _setup(tmp_path, slo)
    evictor = Evictor(api)
    states = api.states()
    asyncio.run(manager.round(states, evictor))
    asyncio.run(manager.round(states, evictor))
    assert tree.read("kubepods/besteffort/poduid-be", "cpu.bvt_warp_ns") == "-1"
    assert tree.read("kubepods/burstable/poduid-ls", "cpu.bvt_warp_ns") == "2"
    assert api.evicted == ["be"]
    bad = [e for e in api.events if e[1] == "InvalidQoSAnnotation"]
    assert len(bad) == 1
    assert bad[0][0] == "ls"
    assert "koordinator.sh/cpuQOS" in bad[0][2]
    assert [e[1] for e in api.events if e[0] == "be"] == ["evictPodSuccess"]


def test_a_node_slo_that_does_not_parse_keeps_the_last_good_one(tmp_path: Path, caplog: Any) -> None:
    """The NodeSLO informer keeps the last good NodeSLO when an edit does not validate, so the
    manager goes on enforcing it."""
    slo = {"resourceQOSStrategy": {"beClass": {"cpuQOS": {"enable": True}}}}
    tree, api, manager = _setup(tmp_path, slo)
    states = api.states()
    good = named("node-a", "11", spec=slo)
    bad = named("node-a", "12", spec={"resourceQOSStrategy": {"beClass": "not a dictionary"}})
    server = FakeListWatch([good])
    server.watch_scripts = [[event("MODIFIED", bad)]]
    informer = Informer(server, RESOURCES[Kind.NODE_SLO], states, field_selector="metadata.name=node-a")

    async def scenario() -> None:
        task = asyncio.create_task(informer.run())
        await server.wait_watches(2)  # the bad event applied, the watch resumed
        task.cancel()
        await manager.round(states, Evictor(api))

    asyncio.run(scenario())
    assert tree.read("kubepods/besteffort/poduid-be", "cpu.bvt_warp_ns") == "-1"
    assert (
        "NodeSLO node-a does not validate, keeping the last good one: spec.resourceQOSStrategy" in caplog.text
    )


def test_a_malformed_blkio_annotation_is_one_event_and_the_round_goes_on(tmp_path: Path) -> None:
    tree, api, manager = _setup(tmp_path, {"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": True}}}})
    manager.gates = manager.node_qos.gates = KoordletFeatureGates(blkio_reconcile=True)  # type: ignore[union-attr]
    api.pods[1] = pod("ls", qos="LS", annotations={"koordinator.sh/blkioQOS": '{"blocks": 3}'})
    states = api.states()
    for _ in range(3):
        asyncio.run(manager.round(states, Evictor(api)))
    bad = [e for e in api.events if e[1] == "InvalidQoSAnnotation"]
    assert [(name, "koordinator.sh/blkioQOS" in message) for name, _, message in bad] == [("ls", True)]
    assert tree.read("kubepods/burstable/poduid-ls", "cpu.bvt_warp_ns") == "2"  # the rest still applied


def test_an_unexpected_error_in_a_round_does_not_stop_qos(tmp_path: Path, caplog: Any) -> None:
    _, api, manager = _setup(tmp_path, None)
    manager.interval = 0.0
    rounds: list[int] = []

    async def flaky(states: States, evictor: Evictor) -> None:
        rounds.append(len(rounds))
        if len(rounds) == 1:
            raise KeyError("a bug in one round")
        if len(rounds) == 3:
            raise asyncio.CancelledError

    manager.round = flaky  # type: ignore[method-assign]
    with contextlib.suppress(asyncio.CancelledError):
        asyncio.run(manager.run(api, api.states()))  # type: ignore[arg-type]
    assert rounds == [0, 1, 2]
    assert any("QoS round failed unexpectedly" in r.getMessage() for r in caplog.records)
