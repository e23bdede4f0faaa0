"""Pods of one template share their row-local Filter and Score work (``scheduler.framework.equivalence``)
and are placed exactly as pod-by-pod cycles place them: a differential property over random
clusters and workloads (replicas of a few templates, with spread, anti-affinity, host ports, node
affinity and taints, nodes relabelled and pods deleted between them), the same cycles driven in
order on two schedulers, one with the classes and one without."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_core import to_json

from apis.client.backend import PODS
from apis.core import Node, Pod
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.pod_info import PodInfo
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.framework.equivalence import class_key
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.node_resources_fit import NodeResourcesFit
from tests.scheduler.builders import NodeBuilder, PodBuilder, expr

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
ZONES = ("a", "b", "c")


@dataclass(frozen=True)
class Template:
    cpu: int
    """milli-cpu"""
    app: str
    host_port: bool
    zone: str | None
    """Required node affinity to this zone."""
    preferred_zone: str | None
    tolerates: bool
    anti_affinity: bool
    """Required anti-affinity to its own app, per node."""
    spread: str | None
    """A zone spread constraint over its own app: DoNotSchedule or ScheduleAnyway."""
    image: str
    volume: str | None = None
    """None; "scratch": an emptyDir (the volume plugins' SKIP is then not the class's); "claim": a
    claim that does not exist (PreFilter rejects the pod)."""


@dataclass(frozen=True)
class Place:
    template: int


@dataclass(frozen=True)
class Delete:
    index: int
    """Of the pods placed so far (modulo their count)."""


@dataclass(frozen=True)
class Relabel:
    node: int
    zone: str


@dataclass(frozen=True)
class Pull:
    """The node reports an image now: ImageLocality's score of every node with it changes."""

    node: int


Step = Place | Delete | Relabel | Pull


def node(i: int, cpu: int, zone: str, tainted: bool, image: bool) -> Node:
    builder = NodeBuilder(f"n{i}").alloc(cpu=str(cpu), memory="64Gi", pods=110)
    builder.label(ZONE, zone).label(HOSTNAME, f"n{i}")
    if tainted:
        builder.taint("dedicated", "x", effect="PreferNoSchedule" if i % 2 else "NoSchedule")
    if image:
        builder.images((["img-1:latest"], 500 * 1024 * 1024))
    return builder.obj()


def pod(name: str, t: Template) -> Pod:
    builder = PodBuilder(name).label("app", t.app).req(cpu=f"{t.cpu}m", memory="1Gi")
    if t.host_port:
        builder.host_port(8080)
    if t.zone is not None:
        builder.required_term(expr(ZONE, "In", t.zone))
    if t.preferred_zone is not None:
        builder.preferred_term(10, expr(ZONE, "In", t.preferred_zone))
    if t.tolerates:
        builder.toleration("dedicated", operator="Exists")
    if t.anti_affinity:
        own = {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": t.app}}}
        builder.pod_affinity(own, anti=True)
    if t.volume == "scratch":
        builder.volume("scratch", emptyDir={})
    elif t.volume == "claim":
        builder.claim("missing")
    body: dict[str, Any] = builder.obj().model_dump(by_alias=True, exclude_none=True)
    body["spec"]["schedulerName"] = "koord-scheduler"
    body["spec"]["containers"][0]["image"] = t.image
    if t.spread is not None:
        body["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": t.spread,
                "labelSelector": {"matchLabels": {"app": t.app}},
            }
        ]
    return Pod.model_validate(body)


templates = st.builds(
    Template,
    cpu=st.sampled_from([250, 500, 1000, 2000, 3000]),
    app=st.sampled_from(["web", "db"]),
    host_port=st.sampled_from([False, False, False, True]),
    zone=st.none() | st.sampled_from(ZONES),
    preferred_zone=st.none() | st.sampled_from(ZONES),
    tolerates=st.booleans(),
    anti_affinity=st.sampled_from([False, False, True]),
    spread=st.none() | st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
    image=st.sampled_from(["img-1", "img-2"]),
    volume=st.sampled_from([None, None, None, "scratch", "claim"]),
)
nodes = st.lists(
    st.tuples(st.sampled_from([4, 8, 16]), st.sampled_from(ZONES), st.booleans(), st.booleans()),
    min_size=2,
    max_size=8,
)


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[Node], list[Template], list[Step], int | None]:
    shapes = draw(nodes)
    # Sometimes past 100 nodes, where each pod scores a rotating sample of the feasible ones.
    copies = draw(st.sampled_from([1, 1, 1, 16]))
    cluster = [node(i, *shapes[i % len(shapes)]) for i in range(len(shapes) * copies)]
    kinds = draw(st.lists(templates, min_size=1, max_size=3))
    place = st.builds(Place, st.integers(0, len(kinds) - 1))
    other = st.one_of(
        st.builds(Delete, st.integers(0, 1000)),
        st.builds(Relabel, st.integers(0, len(cluster) - 1), st.sampled_from(ZONES)),
        st.builds(Pull, st.integers(0, len(cluster) - 1)),
    )
    steps = draw(st.lists(st.one_of(place, place, place, place, place, other), min_size=10, max_size=60))
    percentage = draw(st.none() | st.sampled_from([5, 30]))
    return cluster, kinds, steps, percentage


Outcome = tuple[
    list[tuple[str, str | None, str | None]],
    list[tuple[list[int], list[int]]],
    list[tuple[str, str, list[str] | None, list[str]]],
]


async def drive(
    cluster: list[Node], kinds: list[Template], steps: list[Step], percentage: int | None, *, classes: bool
) -> tuple[Outcome, int]:
    """Each step in order on a fresh scheduler: per pod, where it went or why not, every Score
    total of its cycle on the rows scored, and what its PreFilter returned and skipped; and how
    many cycles an equivalence class served."""
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    backend = MemoryBackend()
    app = SchedulerApp(
        AppSettings(profiles=tuple(config.profiles), percentage_of_nodes_to_score=percentage),
        backend,
        DEFAULT_REGISTRY,
        SchedulerMetrics(),
    )
    if not classes:
        app.loop.classes = None
    scored: list[tuple[list[int], list[int]]] = []
    fwk = app.frameworks["koord-scheduler"]
    run_score = fwk.run_score

    def recorded(*args: Any, **kwargs: Any) -> Any:
        total, per_plugin, status = run_score(*args, **kwargs)
        scored.append((args[3].tolist(), total.tolist()))
        return total, per_plugin, status

    fwk.run_score = recorded  # type: ignore[method-assign]
    run_pre_filter = fwk.run_pre_filter
    pre_filtered: list[tuple[str, str, list[str] | None, list[str]]] = []

    def pre_filter(state: Any, pod: PodInfo, *args: Any, **kwargs: Any) -> Any:
        status, allowed = run_pre_filter(state, pod, *args, **kwargs)
        names = sorted(allowed) if allowed is not None else None
        pre_filtered.append((status.code.name, status.message(), names, sorted(state.skip_filter)))
        return status, allowed

    fwk.run_pre_filter = pre_filter  # type: ignore[method-assign]
    run_post_filter = fwk.run_post_filter
    diagnosed: dict[str, tuple[Any, ...]] = {}

    async def diagnosing(state: Any, pod: PodInfo, snapshot: Any, diagnosis: Diagnosis) -> Any:
        # What PostFilter is given: the nodes' statuses as the Filter pass counted them.
        diagnosed[pod.name] = (
            diagnosis.node_count,
            sorted(diagnosis.reason_counts.items()),
            sorted(diagnosis.unresolvable_rows),
            sorted(diagnosis.rejecting_plugins),
        )
        return await run_post_filter(state, pod, snapshot, diagnosis)

    fwk.run_post_filter = diagnosing  # type: ignore[method-assign]
    for n in cluster:
        app.cache.upsert_node(n)
    outcomes: list[tuple[str, str | None, str | None]] = []
    placed: list[str] = []
    pulled = node(0, 8, "a", False, True)
    for i, step in enumerate(steps):
        if isinstance(step, Place):
            obj = backend.apply(PODS, pod(f"p{i}", kinds[step.template]))
            app.queue.add(PodInfo.of(obj))
            await app.loop.schedule_one(await app.queue.pop())
            where = app.cache.node_of(f"p{i}")
            explained = app.explanations.get("default", f"p{i}")
            why = None
            if where is None and explained is not None:
                why = f"{explained.message} {explained.reasons} {diagnosed.get(f'p{i}')}"
            outcomes.append((f"p{i}", where, why))
            if where is not None:
                placed.append(f"p{i}")
        elif isinstance(step, Delete) and placed:
            app.cache.remove_pod(placed.pop(step.index % len(placed)))
        elif isinstance(step, Relabel):
            old = cluster[step.node]
            labels = {**(old.metadata.labels or {}), ZONE: step.zone}
            metadata = old.metadata.model_copy(update={"labels": labels})
            app.cache.upsert_node(old.model_copy(update={"metadata": metadata}))
        elif isinstance(step, Pull):
            old = cluster[step.node]
            status = old.status.model_copy(update={"images": pulled.status.images})
            app.cache.upsert_node(old.model_copy(update={"status": status}))
    await app.binder.drain(grace_seconds=5.0)
    return (outcomes, scored, pre_filtered), app.loop.classes.hits if app.loop.classes is not None else 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_classes_place_every_pod_where_pod_by_pod_cycles_do(
    workload: tuple[list[Node], list[Template], list[Step], int | None],
) -> None:
    alone, _ = asyncio.run(drive(*workload, classes=False))
    shared, _ = asyncio.run(drive(*workload, classes=True))
    assert shared == alone


def test_replicas_are_served_by_their_class_after_the_first() -> None:
    web = Template(500, "web", False, None, None, False, False, None, "img-1")
    cluster = [node(i, 8, ZONES[i % 3], False, i % 2 == 0) for i in range(120)]
    steps: list[Step] = [Place(0)] * 30
    alone, none = asyncio.run(drive(cluster, [web], steps, None, classes=False))
    shared, hits = asyncio.run(drive(cluster, [web], steps, None, classes=True))
    assert shared == alone
    assert all(where is not None for _, where, _ in shared[0])
    assert (none, hits) == (0, 29)  # every replica but the first


def test_a_class_is_the_template_not_the_pod() -> None:
    web = Template(500, "web", True, "a", None, False, True, None, "img-1")
    first, second = PodInfo.of(pod("web-1", web)), PodInfo.of(pod("web-2", web))
    other = PodInfo.of(pod("web-3", Template(500, "web", True, "b", None, False, True, None, "img-1")))
    assert class_key(first)[0] == class_key(second)[0]
    assert class_key(first)[0] != class_key(other)[0]


def serialized(pod: PodInfo) -> bytes:
    """The whole key serialized: what ``class_key`` shortcuts by the shared parts' identity."""
    head = to_json((pod.namespace, pod.labels, pod.annotations))
    return head + pod.pod.spec.model_dump_json(exclude={"volumes"}).encode()


@settings(max_examples=200, deadline=None)
@given(templates, templates, st.booleans(), st.lists(st.none() | st.integers(0, 1), min_size=2, max_size=2))
def test_a_class_key_is_equal_where_the_serialized_pods_are(
    a: Template, b: Template, empty: bool, priorities: list[int | None]
) -> None:
    first, second = pod("x-1", a), pod("x-2", b)
    first.spec.priority, second.spec.priority = priorities
    if empty:  # empty parts are never shared: an empty list is keyed as one, not by its id
        for one in (first, second):
            one.spec.tolerations, one.spec.node_selector = [], {}
    one, two = PodInfo.of(first), PodInfo.of(second)
    assert (class_key(one)[0] == class_key(two)[0]) == (serialized(one) == serialized(two))


def test_an_image_pulled_on_one_node_rescores_every_node_that_has_it() -> None:
    # ImageLocality scales an image's score by the share of nodes that have it: n1 pulling img-1
    # changes n0's and n2's scores too, though nothing on their rows changed.
    web = Template(500, "web", False, None, None, False, False, None, "img-1")
    cluster = [node(i, 8, "a", False, i in (0, 2)) for i in range(4)]
    steps: list[Step] = [Place(0), Place(0), Pull(1), Place(0), Place(0), Place(0)]
    alone, _ = asyncio.run(drive(cluster, [web], steps, None, classes=False))
    shared, hits = asyncio.run(drive(cluster, [web], steps, None, classes=True))
    assert shared == alone
    assert hits == 4


def test_a_failed_replica_is_diagnosed_from_its_class_without_filtering_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each untainted node takes one replica; past them the replicas fail on cpu and taints, and the
    # failure's message and the statuses PostFilter is given are the pod-by-pod cycle's.
    big = Template(3000, "web", False, None, None, False, False, None, "img-1")
    cluster = [node(i, 4, ZONES[i % 3], i % 3 == 0, False) for i in range(6)]
    steps: list[Step] = [Place(0)] * 10
    asked: dict[str, int] = {}
    fit = NodeResourcesFit.filter

    def counted(self: NodeResourcesFit, state: Any, pod: PodInfo, snapshot: Any, rows: Any) -> Any:
        asked[pod.name] = asked.get(pod.name, 0) + rows.size
        return fit(self, state, pod, snapshot, rows)

    monkeypatch.setattr(NodeResourcesFit, "filter", counted)
    alone, _ = asyncio.run(drive(cluster, [big], steps, None, classes=False))
    by_pod = dict(asked)
    asked.clear()
    shared, hits = asyncio.run(drive(cluster, [big], steps, None, classes=True))
    assert shared == alone
    failed = [name for name, where, _ in shared[0] if where is None]
    assert failed == ["p5", "p6", "p7", "p8", "p9"]  # n0 is tainted NoSchedule
    whys = [why or "" for _, where, why in shared[0] if where is None]
    assert all("Insufficient cpu" in why and "untolerated taint" in why for why in whys)
    assert hits == 9
    # Pod by pod, every failure asks the plugin again; the class asks only about the row the
    # last replica took, and nothing once no replica is placed.
    assert all(by_pod[name] > 0 for name in failed)
    assert [asked.get(name, 0) for name in failed] == [1, 0, 0, 0, 0]


@pytest.mark.parametrize("volume", [None, "scratch"])
def test_a_class_skips_the_prefilters_whose_skip_is_its_own_without_asking_them(
    monkeypatch: pytest.MonkeyPatch, volume: str | None
) -> None:
    # After the first replica NodePorts, DeviceShare (no GPU asked) and PodTopologySpread (spec
    # only: the default profile's spread defaults are ScheduleAnyway) and VolumeBinding (volumes)
    # are not asked but in the cycles that time each plugin (0, 10, 20); a pod with volumes asks
    # VolumeBinding always.
    from scheduler.plugins.device_share import DeviceShare
    from scheduler.plugins.node_ports import NodePorts
    from scheduler.plugins.pod_topology_spread.plugin import PodTopologySpread
    from scheduler.plugins.volume_binding.plugin import VolumeBinding

    web = Template(500, "web", False, None, None, False, False, None, "img-1", volume)
    cluster = [node(i, 8, ZONES[i % 3], False, False) for i in range(40)]
    steps: list[Step] = [Place(0)] * 30
    asked: dict[str, int] = {}

    def counting(cls: type[Any]) -> None:
        pre_filter = cls.pre_filter

        def counted(self: Any, state: Any, pod: PodInfo, snapshot: Any) -> Any:
            asked[cls.__name__] = asked.get(cls.__name__, 0) + 1
            return pre_filter(self, state, pod, snapshot)

        monkeypatch.setattr(cls, "pre_filter", counted)

    counting(NodePorts)
    counting(VolumeBinding)
    counting(PodTopologySpread)
    counting(DeviceShare)
    alone, _ = asyncio.run(drive(cluster, [web], steps, None, classes=False))
    assert asked == {"NodePorts": 30, "VolumeBinding": 30, "PodTopologySpread": 30, "DeviceShare": 30}
    asked.clear()
    shared, hits = asyncio.run(drive(cluster, [web], steps, None, classes=True))
    assert shared == alone
    assert all({"NodePorts", "VolumeBinding", "DeviceShare"} <= set(skipped) for *_, skipped in shared[2])
    assert asked == {
        "NodePorts": 3,
        "VolumeBinding": 3 if volume is None else 30,
        "PodTopologySpread": 3,
        "DeviceShare": 3,
    }
    assert hits == 29


def test_a_skip_that_reads_the_cluster_is_asked_for_every_pod_of_the_class() -> None:
    # InterPodAffinity skips a plain replica while no placed pod has a term about it; once a
    # replica with anti-affinity to the app is placed, the next plain one must avoid its node.
    plain = Template(500, "web", False, None, None, False, False, None, "img-1")
    anti = Template(500, "web", False, None, None, False, True, None, "img-1")
    cluster = [node(i, 8, ZONES[i % 3], False, False) for i in range(3)]
    steps: list[Step] = [Place(0), Place(1), Place(0), Place(0), Place(0)]
    alone, _ = asyncio.run(drive(cluster, [plain, anti], steps, None, classes=False))
    shared, _ = asyncio.run(drive(cluster, [plain, anti], steps, None, classes=True))
    assert shared == alone


def test_spread_defaults_that_must_hold_keep_its_prefilter_asked_for_every_pod() -> None:
    # A DoNotSchedule default constraint's selector reads the pod's owners (Services, ReplicaSets):
    # PodTopologySpread's SKIP is then not its class's.
    from scheduler.framework.extensions import SkipReads
    from scheduler.plugins.pod_topology_spread.args import PodTopologySpreadArgs
    from scheduler.plugins.pod_topology_spread.plugin import PodTopologySpread

    handle = Handle(backend=MemoryBackend(), snapshot=lambda: None)  # type: ignore[arg-type,return-value]
    system = PodTopologySpread(PodTopologySpreadArgs(), handle)
    hard = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
    listed = PodTopologySpreadArgs.model_validate({"defaultingType": "List", "defaultConstraints": [hard]})
    assert system.pre_filter_skip_reads is SkipReads.SPEC
    assert PodTopologySpread(listed, handle).pre_filter_skip_reads is None
