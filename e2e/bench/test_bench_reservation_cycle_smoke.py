"""``reservation_cycle`` at a tiny size: the cycles it times are the ones it says (the owner pod
and the reservation-ignored pod have reserved room restored, the plain pod not). Figures are
never checked."""

from __future__ import annotations

import asyncio

from e2e.bench.reservation_cycle import bench_pods, measure
from e2e.bench.throughput_model import Options


def test_the_owner_and_the_ignored_pod_have_room_restored_and_the_plain_pod_not() -> None:
    timings = asyncio.run(measure(Options(nodes=12, reservations=6), bench_pods(6), repeat=2))

    assert {kind: t.restored for kind, t in timings.items()} == {
        "plain pod": False,
        "owner pod": True,
        "ignored pod": True,
    }
    assert all(t.profile_ms > 0 and t.plugin_ms > 0 for t in timings.values())


def test_without_reservations_no_pod_has_room_restored() -> None:
    timings = asyncio.run(measure(Options(nodes=12, reservations=0), bench_pods(6), repeat=2))

    assert not any(t.restored for t in timings.values())
