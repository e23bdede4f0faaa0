"""InterPodAffinity's cost per scheduling cycle on a big cluster, in process (no API server).

5,000 nodes (hostname, 50 zones) hold 50,000 pods of 500 Deployments of 100 replicas; half of
the Deployments spread by required hostname anti-affinity, a quarter prefer their zone (preferred
affinity), the rest have no affinity. One cycle of the plugin (PreFilter, Filter, PreScore, Score,
NormalizeScore over every node) is timed for an incoming replica of each kind, and the whole
default profile's cycle beside it, so the plugin's share is visible; then the first cycle of a
Deployment whose selector nobody asked for yet (its counts are built from the pods carrying its
anchor label, not from every pod).

    .venv/bin/python -m e2e.bench.inter_pod_affinity [--nodes 5000] [--pods 50000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from apis.core import Node, Pod
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
from scheduler.plugins.inter_pod_affinity import InterPodAffinity, InterPodAffinityArgs

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REPLICAS = 100


def node(i: int) -> Node:
    return Node.model_validate(
        {
            "metadata": {"name": f"n{i}", "labels": {HOSTNAME: f"n{i}", ZONE: f"z{i % 50}"}},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
        }
    )


def replica(deployment: int, index: int, node_name: str | None) -> Pod:
    app = f"app-{deployment}"
    selector = {"matchLabels": {"app": app}}
    affinity: dict[str, Any] | None = None
    if deployment % 4 in (0, 1):
        required = [{"topologyKey": HOSTNAME, "labelSelector": selector}]
        affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    elif deployment % 4 == 2:
        term = {"topologyKey": ZONE, "labelSelector": selector}
        preferred = [{"weight": 50, "podAffinityTerm": term}]
        affinity = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    return Pod.model_validate(
        {
            "metadata": {
                "name": f"{app}-{index}",
                "namespace": "default",
                "uid": f"{app}-{index}",
                "labels": {"app": app},
            },
            "spec": {
                "nodeName": node_name,
                "affinity": affinity,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            },
        }
    )


def timed(run: Any, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    started = time.perf_counter()
    cache = Cache()
    for i in range(args.nodes):
        cache.upsert_node(node(i))
    deployments = max(1, args.pods // REPLICAS)
    for d in range(deployments):
        for r in range(REPLICAS):
            cache.upsert_pod(PodInfo.of(replica(d, r, f"n{(d * 7919 + r * 53) % args.nodes}")))
    snapshot = Snapshot(cache)
    handle = Handle(backend=MemoryBackend(), snapshot=lambda: snapshot)
    plugin = InterPodAffinity(InterPodAffinityArgs(), handle)
    fw = Framework(ResolvedProfile(scheduler_name="bench", plugins=DEFAULT_PLUGINS), DEFAULT_REGISTRY, handle)
    InterPodAffinity.existing_terms(snapshot)  # the index is built once, on the first cycle
    built = time.perf_counter() - started
    print(f"cluster: {args.nodes} nodes, {deployments * REPLICAS} pods, built in {built:.1f} s")

    rows = snapshot.candidate_rows()

    def plugin_cycle(pod: PodInfo) -> None:
        state = CycleState()
        plugin.pre_filter(state, pod, snapshot)
        result = plugin.filter(state, pod, snapshot, rows)
        feasible = rows[result.feasible]
        if plugin.pre_score(state, pod, snapshot, feasible).ok:
            plugin.normalize_scores(state, pod, plugin.score(state, pod, snapshot, feasible))

    def profile_cycle(pod: PodInfo) -> None:
        state = CycleState()
        fw.run_pre_filter(state, pod, snapshot)
        feasible, _ = fw.run_filter(state, pod, snapshot, rows, Diagnosis())
        if fw.run_pre_score(state, pod, snapshot, feasible).ok:
            fw.run_score(state, pod, snapshot, feasible)

    print(f"{'incoming pod':<44} {'InterPodAffinity':>18} {'default profile':>16}")
    for label, d in (
        ("required hostname anti-affinity", 0),
        ("preferred zone affinity", 2),
        ("no affinity (symmetry only)", 3),
    ):
        pod = PodInfo.of(replica(d, REPLICAS, None))
        plugin_cycle(pod)  # warm the per-selector counts, as the cycles of a Deployment do
        ms_plugin = timed(lambda pod=pod: plugin_cycle(pod), args.repeat)
        ms_profile = timed(lambda pod=pod: profile_cycle(pod), args.repeat)
        print(f"{label:<44} {ms_plugin:>15.2f} ms {ms_profile:>13.2f} ms")
    fresh = PodInfo.of(replica(deployments, 0, None))  # a new Deployment: its selector is counted once
    cold = timed(lambda: plugin_cycle(fresh), 1)
    print(
        f"{'first cycle of a new anti-affine Deployment':<44} {cold:>15.2f} ms (counted from its label index)"
    )
    index = InterPodAffinity.existing_terms(snapshot)
    print(f"distinct terms of placed pods: {len(index)} (one per-row array of {args.nodes} each)")


if __name__ == "__main__":
    main()
