"""The RDMA allocator against a brute-force checker on small nodes, the SamePCIe rule, and a
property: no NIC is overcommitted and no VF is held by two pods across adding GPU + RDMA pods,
removing them and restarting (rebuilding from their annotations)."""

from __future__ import annotations

import itertools
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.extension.device import DeviceHint, parse_device_allocations
from apis.meta import LabelSelector
from scheduler.plugins.device_share.allocator import GPU, ScoringType, allocate
from scheduler.plugins.device_share.joint import ERR_JOINT_ALLOCATE, allocate_rdma_jointly
from scheduler.plugins.device_share.plugin import allocated_annotation
from scheduler.plugins.device_share.rdma import (
    ERR_INSUFFICIENT_VF,
    RDMA,
    VF,
    RDMAAllocation,
    RDMAUsage,
    Refusal,
    VFGroup,
    allocate_rdma,
    rdma_allocations_of,
)
from scheduler.plugins.device_share.request import GPURequest
from scheduler.plugins.device_share.store import DeviceStore, allocations_of
from tests.examples import examples

GIB = 2**30
SELECTORS = {"none": None, "any": LabelSelector(), "a": LabelSelector(match_labels={"type": "a"})}


@st.composite
def small_nodes(draw: st.DrawFn) -> tuple[list[RDMA], RDMAUsage]:
    nics: list[RDMA] = []
    usage = RDMAUsage()
    for minor in range(draw(st.integers(1, 4))):
        groups = []
        for g in range(draw(st.integers(0, 2))):
            vfs = tuple(VF(k, f"0000:{minor:02x}:{g:02x}.{k}") for k in range(draw(st.integers(0, 3))))
            groups.append(VFGroup({"type": draw(st.sampled_from("ab"))}, vfs))
        nic = RDMA(minor, pcie=f"p{minor // 2}", vf_groups=tuple(groups))
        nics.append(nic)
        used = draw(st.sampled_from([0, 0, 1, 30, 99, 100]))
        taken = [vf for group in groups for vf in group.vfs if draw(st.booleans())]
        usage.add([RDMAAllocation(minor, used)] + [RDMAAllocation(minor, 0, vf) for vf in taken])
    return nics, usage


def usable(nic: RDMA, usage: RDMAUsage, amount: int, selector: LabelSelector | None) -> bool:
    free = usage.free(nic)
    if free <= 0 or amount > free:
        return False
    if selector is None:
        return True
    return any(
        not usage.vf_taken(nic.minor, vf.bus_id)
        for group in nic.vf_groups
        if selector.matches(group.labels)
        for vf in group.vfs
    )


@settings(max_examples=examples(300), deadline=None)
@given(
    small_nodes(),
    st.sampled_from([1, 30, 50, 100]),
    st.integers(1, 3),
    st.sampled_from(sorted(SELECTORS)),
    st.sampled_from(["MostAllocated", "LeastAllocated"]),
)
def test_rdma_allocator_agrees_with_brute_force(
    node: tuple[list[RDMA], RDMAUsage], amount: int, count: int, vf: str, strategy: ScoringType
) -> None:
    nics, usage = node
    selector = SELECTORS[vf]
    hint = DeviceHint(vfSelector=selector) if selector is not None else None
    feasible = [
        combo
        for combo in itertools.combinations(nics, count)
        if all(usable(n, usage, amount, selector) for n in combo)
    ]
    got = allocate_rdma(nics, usage, amount, count, hint, strategy)
    assert isinstance(got, Refusal) == (not feasible)
    if isinstance(got, Refusal):
        no_vfs = selector is not None and not any(n.vf_groups for n in nics)
        assert (got.reason == ERR_INSUFFICIENT_VF) == no_vfs
        return
    by_minor = {n.minor: n for n in nics}
    assert tuple(sorted((by_minor[a.minor] for a in got), key=lambda n: n.minor)) in feasible
    for a in got:
        assert a.amount == amount
        if selector is None:
            assert a.vf is None
        else:
            assert a.vf is not None
            assert not usage.vf_taken(a.minor, a.vf.bus_id)
            nic = by_minor[a.minor]
            free_vfs = [
                v.bus_id
                for grp in nic.vf_groups
                if selector.matches(grp.labels)
                for v in grp.vfs
                if not usage.vf_taken(nic.minor, v.bus_id)
            ]
            assert a.vf.bus_id == min(free_vfs)  # the lowest free bus id


def gpus_on(switches: int) -> list[GPU]:
    return [GPU(minor=m, memory=16 * GIB, numa=0, pcie=f"p{m // 2}") for m in range(2 * switches)]


@settings(max_examples=examples(200), deadline=None)
@given(small_nodes(), st.integers(1, 4), st.booleans())
def test_same_pcie_nics_sit_exactly_on_the_gpus_switches(
    node: tuple[list[RDMA], RDMAUsage], gpu_count: int, same_pcie: bool
) -> None:
    nics, usage = node
    gpus = gpus_on(2)
    chosen = allocate(gpus, {}, GPURequest(gpu_count, 100, 100, None))
    assert chosen is not None
    got = allocate_rdma_jointly(gpus, chosen, nics, usage, 1, None, ("gpu", "rdma"), same_pcie)
    gpu_switches = {gpus[a.minor].pcie for a in chosen}
    if isinstance(got, Refusal):
        return
    nic_switches = {nics[a.minor].pcie for a in got}
    if same_pcie:
        assert nic_switches == gpu_switches
    # at most one NIC per GPU switch beyond the one asked for
    assert len(got) <= max(1, len(gpu_switches))


def test_same_pcie_violation_is_refused() -> None:
    gpus = gpus_on(1)
    nics = [RDMA(0, pcie="elsewhere")]
    chosen = allocate(gpus, {}, GPURequest(1, 100, 100, None))
    assert chosen is not None
    got = allocate_rdma_jointly(gpus, chosen, nics, RDMAUsage(), 1, None, ("gpu", "rdma"), True)
    assert got == Refusal(ERR_JOINT_ALLOCATE)


NICS = [
    RDMA(m, pcie=f"p{m}", vf_groups=(VFGroup({}, tuple(VF(k, f"0000:{m:02x}:00.{k}") for k in range(3))),))
    for m in range(2)
]
GPUS = gpus_on(2)
VF_HINT = DeviceHint(vfSelector=LabelSelector())

pods = st.tuples(st.integers(0, 2), st.sampled_from([1, 50, 100]), st.booleans(), st.booleans())
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), pods),
        st.tuples(st.just("remove"), st.integers(0, 30)),
        st.tuples(st.just("restart"), st.none()),
    ),
    max_size=30,
)


def assert_consistent(store: DeviceStore, annotations: dict[str, str]) -> None:
    usage = store.rdma_usage("n")
    for nic in NICS:
        assert 0 <= usage.amounts.get(nic.minor, 0) <= nic.total
    held = Counter(
        (a.minor, a.vf.bus_id)
        for raw in annotations.values()
        for a in rdma_allocations_of(parse_device_allocations(raw))
        if a.vf is not None
    )
    assert all(n == 1 for n in held.values()), held  # no VF given twice
    for g in GPUS:
        used = store.usage("n").get(g.minor)
        assert used is None or used.core <= 100


@settings(max_examples=examples(200), deadline=None)
@given(ops)
def test_no_nic_overcommitted_and_no_vf_given_twice(sequence: list[tuple[str, object]]) -> None:
    store = DeviceStore()
    annotations: dict[str, str] = {}
    for i, (op, arg) in enumerate(sequence):
        if op == "add":
            assert isinstance(arg, tuple)
            gpu_count, amount, with_vf, same_pcie = arg
            gpus = (
                allocate(GPUS, store.usage("n"), GPURequest(gpu_count, 100, 100, None)) if gpu_count else []
            )
            if gpus is None:
                continue
            nics = allocate_rdma_jointly(
                GPUS,
                gpus,
                NICS,
                store.rdma_usage("n"),
                amount,
                VF_HINT if with_vf else None,
                ("gpu", "rdma") if gpus else (),
                same_pcie,
            )
            if isinstance(nics, Refusal):
                continue
            store.hold(f"p{i}", "n", gpus, assumed=True, rdma=nics)
            annotations[f"p{i}"] = allocated_annotation(gpus, nics)
        elif op == "remove" and annotations:
            uid = sorted(annotations)[int(str(arg)) % len(annotations)]
            store.release(uid)
            del annotations[uid]
        elif op == "restart":
            before = store.rdma_usage("n").copy()
            store = DeviceStore()
            for uid, raw in annotations.items():
                allocated = parse_device_allocations(raw)
                store.hold(
                    uid, "n", allocations_of(allocated), assumed=False, rdma=rdma_allocations_of(allocated)
                )
            assert store.rdma_usage("n") == before
        assert_consistent(store, annotations)
