"""DeviceShare's PreFilter, Filter and Score over the card table's arrays (``card_table``,
``placements``, ``single_card_memo``, the per-shape score columns and refusal masks) must answer
for every node exactly as walking each node's cards does: the reference below asks each node in
Python with the pure functions (``fragmentation.cards_of``, ``host_share.card_shares``,
``allocator.node_score``, the allocator per node). Random clusters (nodes without a Device, with
none healthy, 1 to 8 cards of mixed memory, NUMA/PCIe topology, HGX partition tables honored or
not), random card usage and free cpu, random candidate rows in a random node-table order (a
``gpu_spec`` node affinity leaves a subset), every request shape (shared by ratio or by bytes,
whole cards one or several, ``gpu.shared``, a hint's selector, no GPU at all), and changes
between the probes (placements, releases, Devices replaced) that the arrays must follow."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.client.backend import EventType, WatchEvent
from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    GPU_PARTITION_POLICY_HONOR,
    LABEL_GPU_MODEL,
    LABEL_GPU_PARTITION_POLICY,
)
from apis.scheduling.device import Device
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.plugins.device_share import DeviceShare, DeviceShareArgs
from scheduler.plugins.device_share.allocator import Allocation, GPUUsage, node_score
from scheduler.plugins.device_share.cycle import CYCLE, Cycle, host_capacity, host_free, host_take
from scheduler.plugins.device_share.fragmentation_strategy import scaled
from scheduler.plugins.device_share.host_share import card_shares, stranded_delta
from scheduler.plugins.device_share.plugin import ERR_INSUFFICIENT_GPU
from scheduler.plugins.device_share.rdma import Refusal
from tests.examples import examples
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.device_share_fixtures import gpu
from tests.scheduler.plugins.test_device_share import plugin, req

STRATEGIES = ("Fragmentation", "MostAllocated", "LeastAllocated")
NODES = tuple(f"n{i}" for i in range(12))
SHAPES: list[dict[str, str | int]] = [
    req(core=25, ratio=25),
    req(core=50, ratio=50),
    req(core=30, memory="10Gi"),
    req(ratio=40),
    req(nvidia=1),
    req(nvidia=2),
    req(nvidia=4),
    req(nvidia=8),
    req(shared=2, core=100, ratio=100),
    {},  # no GPU: cpu and memory only
]


def node_device(rng: random.Random, name: str) -> Device | None:
    kind = rng.choice(("none", "empty", "plain", "topology", "hgx", "hgx-honor"))
    if kind == "none":
        return None
    labels: dict[str, str] = {}
    count = 0 if kind == "empty" else rng.choice((1, 2, 4, 8))
    if kind.startswith("hgx"):
        count = 8
        labels[LABEL_GPU_MODEL] = "H100"
        if kind == "hgx-honor":
            labels[LABEL_GPU_PARTITION_POLICY] = GPU_PARTITION_POLICY_HONOR
    memory = rng.choice((16, 32, 80))
    topology = kind != "plain"
    cards = [
        gpu(
            m,
            memory_gib=memory,
            numa=m // 4 if topology else None,
            pcie=f"pci{m // 2}" if topology else None,
            labels={"slot": str(m % 2)},
        )
        for m in range(count)
    ]
    return Device.model_validate({"metadata": {"name": name, "labels": labels}, "spec": {"devices": cards}})


def gpu_pod(name: str, shape: dict[str, str | int], cpu: int, hint: bool) -> PodInfo:
    builder = make_pod(name).uid(name).req({"cpu": str(cpu), "memory": f"{cpu * 4}Gi", **shape})
    if hint:
        builder._meta["annotations"] = {
            ANNOTATION_DEVICE_ALLOCATE_HINT: '{"gpu": {"selector": {"matchLabels": {"slot": "0"}}}}'
        }
    return builder.info()


def cluster_snapshot(rng: random.Random) -> Snapshot:
    """Some of the nodes, in a random order, with random cpu already requested on them."""
    names = rng.sample(NODES, rng.randint(1, len(NODES)))
    nodes = [make_node(n).alloc(cpu=str(rng.choice((16, 64, 96))), memory="512Gi").obj() for n in names]
    busy = [
        make_pod(f"busy-{n}")
        .req({"cpu": str(rng.randint(0, 15)), "memory": f"{rng.randint(0, 60)}Gi"})
        .on(n)
        .obj()
        for n in names
    ]
    return make_snapshot(nodes, busy)


def fill(p: DeviceShare, rng: random.Random, n: int) -> None:
    """Random usage on random cards, as bound pods' annotations would put it."""
    for i in range(n):
        node = rng.choice(NODES)
        gpus = p.store.gpus(node)
        if not gpus:
            continue
        card = rng.choice(gpus)
        share = rng.choice((10, 25, 50, 100))
        usage = GPUUsage(share, card.memory * share // 100, share)
        p.store.hold(f"held-{rng.random()}-{i}", node, [Allocation(card.minor, usage)], assumed=False)


def reference_scores(
    p: DeviceShare, cycle: Cycle | None, pod: PodInfo, snap: Snapshot, rows: IntArray
) -> IntArray:
    """What walking each node's cards answers (the scorer's own path for cycles it cannot
    memoize), from the pure functions."""
    allocator, store = p.allocator, p.store
    names = [snap.table.names[r] for r in rows.tolist()]
    take = np.asarray(host_take(pod), dtype=np.int64)
    shares = card_shares([(store.gpus(n), store.usage(n)) for n in names])
    capacity, free = host_capacity(snap, rows), host_free(snap, rows)
    fragmentation = allocator.fragmentation
    if cycle is None:
        if not any(host_take(pod)):
            return np.zeros(rows.size, dtype=np.int64)  # nothing asked of the node: no score
        stranded = stranded_delta(shares, capacity, free, take)
        if fragmentation is None:
            flat = stranded.size == 0 or np.ptp(stranded) <= 1e-9
            return np.zeros(rows.size, dtype=np.int64) if flat else scaled(stranded)
        cards = [(store.gpus(n), store.usage(n)) for n in names]
        return fragmentation.host_scores(cards, free, host_take(pod), stranded)
    request = cycle.request
    assert request is not None
    taken = request.count * (1.0 if request.whole else min(request.core, 100) / 100)
    stranded = stranded_delta(shares, capacity, free, take, taken)
    if fragmentation is not None:
        any_card = [allocator.any_card(n, cycle) for n in names]
        return fragmentation.scores(
            request,
            [(allocator.gpus(n, cycle), allocator.gpu_usage(n, cycle)) for n in names],
            [
                None if free_choice else allocator.allocate(n, cycle)
                for n, free_choice in zip(names, any_card, strict=True)
            ],
            any_card,
            free,
            host_take(pod),
            stranded,
        )
    packed = np.array(
        [
            node_score(store.gpus(n), allocator.gpu_usage(n, cycle), request, allocator.card_order, p.weights)
            if store.gpus(n)
            else 0
            for n in names
        ],
        dtype=np.int64,
    )
    if not any(host_take(pod)):
        return packed  # a pod asking for no cpu or memory strands nothing
    return np.maximum(packed - np.rint(stranded * 100).astype(np.int64), 0)


def probe(p: DeviceShare, rng: random.Random, snap: Snapshot, i: int) -> None:
    shape = rng.choice(SHAPES)
    pod = gpu_pod(f"probe-{i}", shape, rng.randint(0, 24), hint=bool(shape) and rng.random() < 0.2)
    state = CycleState()
    result = p.pre_filter(state, pod, snap)
    cycle = state.get(CYCLE)
    assert result.status.ok or result.status.code is Code.SKIP, result.status
    candidates = snap.candidate_rows()
    rows = candidates[np.asarray([rng.random() < 0.8 for _ in range(candidates.size)], dtype=np.bool_)]
    got = p.score(state, pod, snap, rows)
    expected = reference_scores(p, cycle, pod, snap, rows)
    assert got.tolist() == expected.tolist(), (shape, p.args.scoring_strategy.type)
    if cycle is not None and cycle.request is not None:
        # PreFilter's refusals (kept per shape, asked without choosing the cards) and Filter's
        # masks over the card rows against the allocator asked on every node.
        holds = {n for n in p.store.has_device if not isinstance(p.allocator.allocate_all(n, cycle), Refusal)}
        assert cycle.fitting == frozenset(holds), shape
        every = snap.candidate_rows()
        result = p.filter(state, pod, snap, every)
        names = [snap.table.names[r] for r in every.tolist()]
        with_device = [n in p.store.has_device for n in names]
        expected_feasible = [n in holds or not d for n, d in zip(names, with_device, strict=True)]
        assert result.feasible.tolist() == expected_feasible, shape
        refused = [
            (reason, mask.tolist()) for reason, mask in result.rejections if reason == ERR_INSUFFICIENT_GPU
        ]
        someone_refused = any(n not in holds for n in p.store.has_device)
        assert refused == (
            [(ERR_INSUFFICIENT_GPU, [d and n not in holds for n, d in zip(names, with_device, strict=True)])]
            if someone_refused
            else []
        ), shape


@settings(max_examples=examples(20, full=200), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), strategy=st.sampled_from(STRATEGIES))
def test_scores_over_the_arrays_equal_walking_every_node(seed: int, strategy: str) -> None:
    rng = random.Random(seed)
    args = DeviceShareArgs.model_validate({"scoringStrategy": {"type": strategy}})
    p, _ = plugin(*(d for d in (node_device(rng, n) for n in NODES) if d is not None), args=args)
    fill(p, rng, rng.randint(0, 40))
    for i in range(12):
        snap = cluster_snapshot(rng)
        probe(p, rng, snap, i)
        change = rng.choice(("place", "release", "device", "none"))
        if change == "place":
            fill(p, rng, rng.randint(1, 4))
        elif change == "release" and p.store.holders():
            p.store.release(rng.choice(p.store.holders()))
        elif change == "device":
            name = rng.choice(NODES)
            replaced = node_device(rng, name)
            if replaced is None:
                p._on_device(
                    WatchEvent(EventType.DELETED, Device.model_validate({"metadata": {"name": name}}))
                )
            else:
                p._on_device(WatchEvent(EventType.MODIFIED, replaced))
        probe(p, rng, snap, 100 + i)
