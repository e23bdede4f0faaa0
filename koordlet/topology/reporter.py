"""Write the node's NodeResourceTopology: created when missing, updated when koordlet's part changed.

:class:`HostTopologyReporter` reports this host when its Node or pods change (koordlet's watched
states) and at least every ``interval`` (Koordinator's ``NodeTopologySyncInterval``, 3 s, for what
only the host's files say), then applies the cpusets the object it wrote implies, so a pod's new
resource-status or a changed pool reaches the cgroups at once. A read that fails
(sysfs, the kubelet's files, a malformed node annotation) is logged once, until it reads again, and
that part or round is skipped; the loop never stops for it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

import aiohttp
from kubernetes_asyncio import client

from apis.core import Node, Pod
from apis.errors import InvalidAnnotation, summary
from apis.extension.numa import KUBELET_CPU_MANAGER_POLICY_STATIC, KubeletCPUManagerPolicy
from apis.topology import NodeResourceTopology
from koordlet.fs import HostFS
from koordlet.qos.host_apps import host_apps_of
from koordlet.states.resources import Kind
from koordlet.states.store import States
from koordlet.topology.cpuset_apply import CPUSetApplier
from koordlet.topology.cpuset_rule import CPUSetRule
from koordlet.topology.host import HostTopology, read_host_topology
from koordlet.topology.kubelet import (
    CPU_MANAGER_STATE,
    KubeletConfig,
    load_kubelet_config,
    parse_cpu_manager_state,
)
from koordlet.topology.nrt import TopologyStatus, desired_topology, merge_topology, new_topology

__all__ = [
    "DEFAULT_INTERVAL_SECONDS",
    "Complaints",
    "HostTopologyReporter",
    "OnceLog",
    "TopologyAPI",
    "report_node",
    "write_topology",
]

log = logging.getLogger("koordlet.topology")

DEFAULT_INTERVAL_SECONDS = 3.0
RETRYABLE = (TimeoutError, client.ApiException, aiohttp.ClientError, OSError)


async def report_on_changes(
    report_once: Callable[[TopologyAPI, States], Awaitable[object]],
    api: TopologyAPI,
    states: States,
    interval_seconds: float,
    what: str,
) -> None:
    """Once the watched states have listed, report on every node or pod change and at least every
    ``interval_seconds``; a failed report is logged and retried on the next round."""
    changes = states.subscribe(Kind.NODE, Kind.POD)
    await states.wait_synced(Kind.NODE, Kind.POD, Kind.TOPOLOGY)
    while True:
        try:
            await report_once(api, states)
        except RETRYABLE as exc:
            log.warning("%s report failed, retrying next round: %s", what, exc)
        await changes.wait(interval_seconds)


class TopologyAPI(Protocol):
    """The writes topology reporting makes (:class:`koordlet.client.KoordletClient` has them); it
    reads the Node, the pods and the NRT from koordlet's watched states."""

    async def create_topology(self, topology: NodeResourceTopology) -> None: ...
    async def update_topology(self, topology: NodeResourceTopology) -> None: ...
    async def record_event(
        self, *, kind: str, name: str, namespace: str | None, uid: str | None, reason: str, message: str
    ) -> None: ...


class Complaints:
    """Malformed input on a pod or node: logged and posted as a Warning event on the object, once
    per object and problem. A pod's complaints are forgotten when it is gone, so memory stays bounded."""

    def __init__(self) -> None:
        self._pods: set[tuple[str, str]] = set()
        self._nodes: set[tuple[str, str]] = set()

    async def _post(self, api: TopologyAPI, kind: str, obj: Pod | Node, reason: str, problem: str) -> None:
        meta = obj.metadata
        where = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
        log.warning("%s %s: %s", kind.lower(), where, problem)
        try:
            await api.record_event(
                kind=kind,
                name=meta.name or "",
                namespace=meta.namespace,
                uid=meta.uid,
                reason=reason,
                message=problem,
            )
        except RETRYABLE as exc:
            log.warning("event on %s %s not posted: %s", kind.lower(), where, exc)

    async def pods(self, api: TopologyAPI, bad: list[tuple[Pod, str]], current: list[Pod]) -> None:
        """Complain about the pods in ``bad``; ``current`` are the node's pods now."""
        live = {pod.metadata.uid or "" for pod in current}
        self._pods = {key for key in self._pods if key[0] in live}
        for pod, problem in bad:
            key = (pod.metadata.uid or "", problem)
            if key not in self._pods:
                self._pods.add(key)
                await self._post(api, "Pod", pod, "InvalidResourceStatus", problem)

    async def node(self, api: TopologyAPI, node: Node, problem: str) -> None:
        key = (node.metadata.name or "", problem)
        if key not in self._nodes:
            self._nodes.add(key)
            await self._post(api, "Node", node, "InvalidAnnotation", problem)


class OnceLog:
    """Logs a problem when it first appears or changes, and once more when it is gone."""

    def __init__(self) -> None:
        self._active: dict[str, str] = {}

    def problem(self, what: str, message: str) -> None:
        if self._active.get(what) != message:
            self._active[what] = message
            log.warning("%s: %s", what, message)

    def ok(self, what: str) -> None:
        if self._active.pop(what, None) is not None:
            log.info("%s: read again", what)


async def write_topology(
    api: TopologyAPI, node: Node, status: TopologyStatus, existing: NodeResourceTopology | None
) -> tuple[NodeResourceTopology | None, bool]:
    """Create or update the node's NRT (``existing``: the watched one); returns the object as
    koordlet left it (None when a concurrent write won: next round) and whether something was
    written."""
    if existing is None:
        desired = merge_topology(new_topology(node), status) or new_topology(node)
        try:
            await api.create_topology(desired)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            return None, False
        return desired, True
    updated = merge_topology(existing, status)
    if updated is None:
        return existing, False
    try:
        await api.update_topology(updated)
    except client.ApiException as exc:
        if exc.status not in (404, 409):
            raise
        return None, False
    return updated, True


async def report_node(
    api: TopologyAPI,
    node: Node,
    host: HostTopology,
    pods: list[Pod],
    complaints: Complaints,
    *,
    existing: NodeResourceTopology | None,
    cpu_manager: KubeletCPUManagerPolicy | None,
    topology_policy: str,
    kubelet_state: dict[str, frozenset[int]] | None = None,
) -> NodeResourceTopology | None:
    """One node's round: compute koordlet's part, complain (log and event) about the malformed pod
    or node annotations met, write the NRT. Returns the NRT as koordlet left it, None when the node's
    own annotations do not parse or a concurrent write won."""
    bad: list[tuple[Pod, str]] = []
    try:
        status = desired_topology(
            host,
            node,
            pods,
            cpu_manager=cpu_manager,
            topology_policy=topology_policy,
            kubelet_state=kubelet_state,
            bad_pods=bad,
        )
    except (InvalidAnnotation, ValueError) as exc:
        await complaints.node(api, node, str(exc))
        return None
    await complaints.pods(api, bad, pods)
    topology, written = await write_topology(api, node, status, existing)
    if written:
        log.info("NodeResourceTopology %s written", node.metadata.name)
    return topology


class HostTopologyReporter:
    """This host's NRT from sysfs, procfs and the kubelet's files, then its pods' cpusets."""

    def __init__(
        self,
        node_name: str,
        fs: HostFS,
        kubelet_config: Path,
        *,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        applier: CPUSetApplier | None = None,
    ) -> None:
        self.node_name = node_name
        self.fs = fs
        self.kubelet_config = kubelet_config
        self.interval_seconds = interval_seconds
        self.applier = applier
        self.problems = OnceLog()
        self.complaints = Complaints()

    def _kubelet(self) -> KubeletConfig | None:
        what = f"kubelet config {self.fs.path(str(self.kubelet_config))}"
        try:
            config = load_kubelet_config(self.fs.path(str(self.kubelet_config)))
        except (OSError, ValueError) as exc:
            self.problems.problem(what, f"{exc}; the CPU manager policy is reported unknown, topology None")
            return None
        self.problems.ok(what)
        return config

    def _kubelet_state(self) -> dict[str, frozenset[int]]:
        path = self.fs.path(str(self.kubelet_config.parent / CPU_MANAGER_STATE))
        try:
            text = path.read_text()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            self.problems.problem(str(path), str(exc))
            return {}
        try:
            state = parse_cpu_manager_state(text) if text.strip() else {}
        except ValueError as exc:
            self.problems.problem(str(path), str(exc))
            return {}
        self.problems.ok(str(path))
        return state

    async def report_once(self, api: TopologyAPI, states: States) -> NodeResourceTopology | None:
        node = states.node(self.node_name)
        if node is None:
            self.problems.problem(
                f"node {self.node_name}", "not found: its NodeResourceTopology is not written"
            )
            return None
        self.problems.ok(f"node {self.node_name}")
        try:
            host = read_host_topology(self.fs)
        except (OSError, ValueError) as exc:
            self.problems.problem("host topology", str(exc))
            return None
        self.problems.ok("host topology")
        kubelet = self._kubelet()
        cpu_manager: KubeletCPUManagerPolicy | None = None
        state = None
        policy = "None"
        if kubelet is not None:
            cpu_manager = kubelet.cpu_manager(host.cpus)
            policy = kubelet.nrt_topology_policy()
            if kubelet.cpu_manager_policy == KUBELET_CPU_MANAGER_POLICY_STATIC:
                state = self._kubelet_state()
        pods = states.pods(self.node_name)
        topology = await report_node(
            api,
            node,
            host,
            pods,
            self.complaints,
            existing=states.topology(self.node_name),
            cpu_manager=cpu_manager,
            topology_policy=policy,
            kubelet_state=state,
        )
        if topology is not None and self.applier is not None:
            try:
                rule = CPUSetRule.from_annotations(topology.metadata.annotations)
            except (InvalidAnnotation, ValueError) as exc:
                self.problems.problem(f"NodeResourceTopology {self.node_name}", str(exc))
            else:
                self.problems.ok(f"NodeResourceTopology {self.node_name}")
                self.applier.apply(pods, rule)
                slo = states.node_slo(self.node_name)
                apps, problems = host_apps_of(slo.spec if slo else None, self.applier.layout)
                if problems:
                    self.problems.problem("NodeSLO hostApplications", summary(problems))
                else:
                    self.problems.ok("NodeSLO hostApplications")
                self.applier.apply_host_apps(apps, rule)
        return topology

    async def run(self, api: TopologyAPI, states: States) -> None:
        await report_on_changes(self.report_once, api, states, self.interval_seconds, "node topology")
