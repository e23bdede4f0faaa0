"""The NRT zones' batch resources: merged into koordlet's zones, and damped like the node's."""

from __future__ import annotations

from apis.extension.colocation import BATCH_CPU, BATCH_MEMORY
from apis.quantity import Quantity
from apis.topology import NodeResourceTopology, Zone
from operators.logic.noderesource.zone_sync import merged_zones, zones_need_sync
from tests.operators.logic.noderesource.builders import NOW, topology

ZONES = {"node-0": ("8", "50Gi"), "node-1": ("8", "50Gi")}
HUGE = {"hugepages-2Mi": "1Gi"}


def _values(cpu: str, memory: str) -> dict[str, Quantity]:
    return {BATCH_CPU: Quantity.parse(cpu), BATCH_MEMORY: Quantity.parse(memory)}


def _resources(zones: list[Zone]) -> dict[str, dict[str, tuple[str, str, str]]]:
    return {
        zone.name: {
            r.name: (str(r.capacity), str(r.allocatable), str(r.available)) for r in zone.resources or ()
        }
        for zone in zones
    }


def test_batch_resources_join_koordlets_and_keep_them() -> None:
    nrt = topology(ZONES, extra={"node-0": HUGE, "node-1": HUGE})
    merged = merged_zones(nrt, {"node-0": _values("1000", "23Gi"), "node-1": _values("3000", "29Gi")})
    assert _resources(merged)["node-0"] == {
        "cpu": ("8", "8", "8"),
        "hugepages-2Mi": ("1Gi", "1Gi", "1Gi"),
        "kubernetes.io/batch-cpu": ("1k", "1k", "1k"),
        "kubernetes.io/batch-memory": ("23Gi", "23Gi", "23Gi"),
        "memory": ("50Gi", "50Gi", "50Gi"),
    }
    assert [r.name for r in merged[0].resources or ()] == sorted(_resources(merged)["node-0"])
    assert _resources(merged)["node-1"]["kubernetes.io/batch-cpu"] == ("3k", "3k", "3k")


def test_a_reset_removes_only_the_batch_resources() -> None:
    nrt = topology(ZONES, extra={"node-0": {**HUGE, BATCH_CPU: "1000", BATCH_MEMORY: "23Gi"}})
    merged = merged_zones(nrt, {})
    assert _resources(merged)["node-0"] == {
        "cpu": ("8", "8", "8"),
        "hugepages-2Mi": ("1Gi", "1Gi", "1Gi"),
        "memory": ("50Gi", "50Gi", "50Gi"),
    }
    assert merged[1] == nrt.zones[1]


def _need(
    nrt: NodeResourceTopology, desired: dict[str, dict[str, Quantity]], last_write: float | None
) -> bool:
    return zones_need_sync(
        nrt,
        desired,
        last_write=last_write,
        now=NOW.timestamp(),
        update_time_threshold_seconds=300,
        resource_diff_threshold=0.1,
    )


def test_damping_like_the_nodes_with_its_own_timer() -> None:
    written = topology(ZONES, extra={z: {BATCH_CPU: "1000", BATCH_MEMORY: "20Gi"} for z in ZONES})
    same = {z: _values("1000", "20Gi") for z in ZONES}
    small = {**same, "node-1": _values("1050", "20Gi")}
    large = {**same, "node-1": _values("1200", "20Gi")}
    recently, long_ago = NOW.timestamp() - 10, NOW.timestamp() - 301
    assert not _need(written, same, None)  # nothing to change: never written
    assert _need(written, small, None)  # a restarted koord-manager writes once
    assert not _need(written, small, recently)  # 5 % waits for the timer
    assert _need(written, small, long_ago)
    assert _need(written, large, recently)  # 20 % > 10 %
    assert _need(written, {"node-0": same["node-0"]}, recently)  # one zone's resources disappear
    assert _need(topology(ZONES), same, recently)  # they appear
