"""The cost of PodTopologySpread in one scheduling cycle, in process: the default profile's
PreFilter, Filter, PreScore and Score for a pod with a zone DoNotSchedule and a hostname
ScheduleAnyway constraint, against the same pod without constraints (the baseline, same run).

    .venv/bin/python -m e2e.bench.pod_topology_spread --nodes 5000 --pods 50000
"""

from __future__ import annotations

import argparse
import statistics
import time

from apis.core import TopologySpreadConstraint
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.profile import ResolvedProfile
from scheduler.framework.runtime import Framework
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from tests.scheduler.builders import make_node, make_pod

HOSTNAME, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"


def build(nodes: int, pods: int, zones: int, apps: int) -> Cache:
    cache = Cache()
    for i in range(nodes):
        name = f"n{i}"
        node = (
            make_node(name).alloc(cpu="64", memory="256Gi").label(ZONE, f"z{i % zones}").label(HOSTNAME, name)
        )
        cache.upsert_node(node.obj())
    for j in range(pods):
        pod = make_pod(f"p{j}").label("app", f"app{j % apps}").req(cpu="100m").on(f"n{(j * 7919) % nodes}")
        cache.upsert_pod(PodInfo.of(pod.obj()))
    return cache


def spread_pod(name: str, app: str = "app0") -> PodInfo:
    pod = make_pod(name).label("app", app).req(cpu="100m").obj()
    selector = {"matchLabels": {"app": app}}
    pod.spec.topology_spread_constraints = [
        TopologySpreadConstraint.model_validate(
            {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": selector}
        )
        for key, when in ((ZONE, "DoNotSchedule"), (HOSTNAME, "ScheduleAnyway"))
    ]
    return PodInfo.of(pod)


def cycle(fw: Framework, pod: PodInfo, snapshot: Snapshot) -> None:
    state = CycleState()
    status, _ = fw.run_pre_filter(state, pod, snapshot)
    assert status.ok, status
    rows, status = fw.run_filter(state, pod, snapshot, snapshot.candidate_rows(), Diagnosis())
    assert status.ok, status
    assert rows.size
    assert fw.run_pre_score(state, pod, snapshot, rows).ok
    fw.run_score(state, pod, snapshot, rows)


def timed(fw: Framework, pod: PodInfo, snapshot: Snapshot, repeat: int) -> float:
    cycle(fw, pod, snapshot)  # warm: selector counts built once, then kept by the cache
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        cycle(fw, pod, snapshot)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--zones", type=int, default=3)
    parser.add_argument("--apps", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    cache = build(args.nodes, args.pods, args.zones, args.apps)
    snapshot = Snapshot(cache)
    handle = Handle(backend=MemoryBackend(), snapshot=lambda: snapshot)
    fw = Framework(
        ResolvedProfile(scheduler_name="koord-scheduler", plugins=DEFAULT_PLUGINS), DEFAULT_REGISTRY, handle
    )
    plain = PodInfo.of(make_pod("plain").label("app", "app0").req(cpu="100m").obj())
    baseline = timed(fw, plain, snapshot, args.repeat)
    spread = timed(fw, spread_pod("spread"), snapshot, args.repeat)
    started = time.perf_counter()
    cycle(
        fw, spread_pod("cold", "app1"), snapshot
    )  # a selector not counted yet: built from the pods with its label
    cold = (time.perf_counter() - started) * 1000
    print(f"{args.nodes} nodes, {args.pods} pods, {args.zones} zones, median of {args.repeat} cycles")
    print(f"  default profile, no constraints:           {baseline:7.2f} ms/cycle")
    print(f"  zone DoNotSchedule + hostname ScheduleAnyway: {spread:7.2f} ms/cycle")
    print(f"  PodTopologySpread's share:                  {spread - baseline:7.2f} ms/cycle")
    print(f"  first cycle of a new selector (counts built): {cold:7.2f} ms")


if __name__ == "__main__":
    main()
