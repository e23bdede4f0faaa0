"""koordctl simulate: the real scheduler on the in-memory backend, through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apis.core import Pod
from scheduler import koordctl
from scheduler.simulator.description import ClusterDescription
from scheduler.simulator.run import SimulationResult, load_workload, simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "simulate"


def test_example_workload_is_placed_as_its_constraints_say(capsys: pytest.CaptureFixture[str]) -> None:
    code = koordctl.main(
        [
            "simulate",
            "--cluster",
            str(EXAMPLES / "cluster.yaml"),
            "--workload",
            str(EXAMPLES / "workload.yaml"),
            "-o",
            "json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["scheduled"], report["pending"]) == (15, 0)
    nodes = {p["name"]: p["node"] for p in report["placements"]}
    assert all(nodes[f"train-{i}"].startswith("gpu-") for i in range(3))
    assert all(nodes[f"web-{i}"].startswith("cpu-") for i in range(12))
    assert report["utilisation"]["nvidia.com/gpu"]["requested"] == "12"


async def test_pods_that_do_not_fit_are_reported_with_the_reason(tmp_path: Path) -> None:
    cluster = ClusterDescription.model_validate(
        {"nodePools": [{"name": "n", "count": 2, "cpu": "4", "memory": "8Gi"}]}
    )
    workload = tmp_path / "pods.yaml"
    workload.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: big}\nspec:\n  replicas: 5\n  template:\n"
        "    spec:\n      containers: [{name: c, image: x, resources: {requests: {cpu: '3'}}}]\n"
    )
    result = await simulate(cluster, load_workload(workload))
    assert len(result.scheduled) == 2
    assert len(result.pending) == 3
    assert result.pending[0].reason == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )  # kube-scheduler's words, DefaultPreemption's included


def test_unknown_kind_is_a_clear_error(tmp_path: Path) -> None:
    workload = tmp_path / "pods.yaml"
    workload.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    with pytest.raises(ValueError, match="unsupported kind 'ConfigMap'"):
        load_workload(workload)


async def _simulate_the_gang_example(**options: float) -> SimulationResult:
    """docs/examples/simulate's 16-member topology gang on its 8-node blocks."""
    from scheduler.simulator.description import load as load_cluster
    from scheduler.simulator.run import load_custom_resources

    workload = EXAMPLES / "gang-workload.yaml"
    return await simulate(
        load_cluster(EXAMPLES / "gang-cluster.yaml"),
        load_workload(workload),
        config_text=(EXAMPLES / "topology-config.yaml").read_text(),
        custom_resources=load_custom_resources(workload),
        **options,
    )


async def test_a_topology_gang_is_simulated_in_one_block() -> None:
    result = await _simulate_the_gang_example()
    assert (len(result.scheduled), len(result.pending)) == (16, 0)
    # 16 members x 4 GPUs fill exactly the 8 nodes of one block (gpu-0 ... gpu-7 are block b0).
    assert {p.node for p in result.scheduled} == {f"gpu-{i}" for i in range(8)}


async def test_the_run_waits_for_a_gang_placement_solved_longer_than_a_settle_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gang's placement is solved off the cycle while its members wait, unschedulable, for the
    plan: a solve longer than ``settle_seconds`` (a big gang, a loaded machine) is work in flight,
    not a settled cluster, and its members are placed before the run ends."""
    import time

    from scheduler.plugins.coscheduling import group_placement

    solve = group_placement._solve

    def slow_solve(problem: group_placement.PlacementProblem) -> group_placement._Solved:
        time.sleep(0.5)  # in the solver's thread, as a slow CP-SAT run
        return solve(problem)

    monkeypatch.setattr(group_placement, "_solve", slow_solve)
    result = await _simulate_the_gang_example(settle_seconds=0.05)
    assert (len(result.scheduled), len(result.pending)) == (16, 0)


VOLUME_WORKLOAD = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: zoned}
provisioner: csi.example.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions: [{key: kubernetes.io/hostname, values: [n-1]}]
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-n2}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {path: /mnt/disk}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n-2]}]
status: {phase: Available}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: static, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: local, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: dynamic, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: zoned, resources: {requests: {storage: 5Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: nothing, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: local, resources: {requests: {storage: 9Gi}}}
""" + "".join(
    f"""---
apiVersion: v1
kind: Pod
metadata: {{name: uses-{claim}, namespace: default}}
spec:
  containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]
  volumes: [{{name: data, persistentVolumeClaim: {{claimName: {claim}}}}}]
"""
    for claim in ("static", "dynamic", "nothing")
)


async def test_volumes_are_simulated_with_the_pv_controllers_part(tmp_path: Path) -> None:
    from scheduler.simulator.run import load_custom_resources

    workload = tmp_path / "workload.yaml"
    workload.write_text(VOLUME_WORKLOAD)
    cluster = ClusterDescription.model_validate(
        {"nodePools": [{"name": "n", "count": 4, "cpu": "4", "memory": "8Gi"}]}
    )
    result = await simulate(
        cluster, load_workload(workload), custom_resources=load_custom_resources(workload)
    )
    placed = {p.name: p.node for p in result.placements}
    assert placed == {"uses-static": "n-2", "uses-dynamic": "n-1", "uses-nothing": None}
    reason = next(p.reason for p in result.placements if p.name == "uses-nothing")
    assert "4 node(s) didn't find available persistent volumes to bind" in reason


async def test_the_run_freezes_the_workload_and_unfreezes_only_what_it_froze(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Full collections stop walking the cluster and the workload while the pods are scheduled;
    afterwards the collector is as the caller left it, objects frozen by someone else included."""
    import gc

    from scheduler.simulator import run

    cluster = ClusterDescription.model_validate({"nodePools": [{"name": "n", "count": 2, "cpu": "4"}]})
    pods = [
        Pod.model_validate(
            {
                "metadata": {"name": "p", "namespace": "default"},
                "spec": {
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]
                },
            }
        )
    ]
    frozen_while_settling: list[int] = []
    settle = run._settle

    async def watched(*args: object) -> float:
        frozen_while_settling.append(gc.get_freeze_count())
        return await settle(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(run, "_settle", watched)
    gc.unfreeze()
    try:
        result = await simulate(cluster, pods)
        assert len(result.scheduled) == 1
        assert frozen_while_settling[-1] > 0
        assert gc.get_freeze_count() == 0

        gc.freeze()  # someone else's: the run neither adds to it nor unfreezes it
        before = gc.get_freeze_count()
        result = await simulate(cluster, pods)
        assert len(result.scheduled) == 1
        # (frozen objects that die leave the count)
        assert 0 < frozen_while_settling[-1] <= before
        assert 0 < gc.get_freeze_count() <= before
    finally:
        gc.unfreeze()


async def test_the_submitted_workload_is_frozen_before_the_collector_is_back_on() -> None:
    """The pods are applied with the collector off, so everything made meanwhile is young: were it
    frozen only after the collector came back on, the first young collection would walk all of it
    (0.2 s of CPU for 20,000 pods). Seen as the allocations pending when a collection starts."""
    import gc

    cluster = ClusterDescription.model_validate({"nodePools": [{"name": "n", "count": 10, "cpu": "64"}]})
    pods = [
        Pod.model_validate(
            {
                "metadata": {"name": f"p-{i}", "namespace": "default"},
                "spec": {
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "10m"}}}]
                },
            }
        )
        for i in range(1000)
    ]
    threshold = gc.get_threshold()[0]
    pending_at_start: list[int] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            pending_at_start.append(gc.get_count()[0])

    gc.unfreeze()
    gc.callbacks.append(watch)
    try:
        result = await simulate(cluster, pods)
    finally:
        gc.callbacks.remove(watch)
        gc.unfreeze()
    assert len(result.scheduled) == 1000
    assert pending_at_start  # the collector ran during the run
    assert max(pending_at_start) < 5 * threshold, max(pending_at_start)
