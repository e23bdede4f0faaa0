"""LowNodeLoad: move pods off nodes whose measured load is over the high thresholds onto nodes
under the low ones, without making a target hot (a BalancePlugin of
``operators.descheduler.framework``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from apis.client.rbac import PolicyRule
from apis.core import Node, Pod
from operators.descheduler.framework import DeschedulerHandle, EvictOptions
from operators.descheduler.lownodeload.anomaly import AnomalyDetectors
from operators.descheduler.lownodeload.args import LowNodeLoadArgs, NodePool
from operators.descheduler.lownodeload.balance import (
    Move,
    PoolNode,
    node_budget,
    prod_budget,
    run_pass,
)
from operators.descheduler.lownodeload.classify import classify, is_over
from operators.descheduler.lownodeload.nodefit import requested_on
from operators.descheduler.lownodeload.thresholds import node_thresholds
from operators.descheduler.lownodeload.usage import NodeUsage, node_usage

__all__ = ["DRY_RUN_EVENT_REASON", "NAME", "RBAC", "LowNodeLoad", "new"]

NAME = "LowNodeLoad"
DRY_RUN_EVENT_REASON = "LowNodeLoadDryRun"
RBAC: tuple[PolicyRule, ...] = (
    PolicyRule(
        ("slo.koordinator.sh",),
        ("nodemetrics",),
        ("get", "list", "watch"),
        why="LowNodeLoad reads node and pod usage from NodeMetric (through the handle's informer).",
    ),
    PolicyRule(
        ("", "events.k8s.io"),
        ("events",),
        ("create", "patch"),
        why="A LowNodeLoad dry run reports what it would move as an event on the node.",
    ),
)
"""Beyond what the descheduler's core needs (nodes and pods); moves go through the MigrationController."""

log = logging.getLogger(__name__)


class LowNodeLoad:
    """One instance per profile; its anomaly detectors live across rounds."""

    name = NAME

    def __init__(
        self,
        args: LowNodeLoadArgs,
        handle: DeschedulerHandle,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.args = args
        self.handle = handle
        self._clock = clock
        self._monotonic = monotonic
        self._pools = args.pools()
        self._node_detectors = AnomalyDetectors(args.detector_cache_timeout_seconds)
        self._prod_detectors = AnomalyDetectors(args.detector_cache_timeout_seconds)
        self.last_moves: list[Move] = []
        """The moves of the last round (asked of the evictor, or reported in a dry run)."""

    def removable(self, pod: Pod) -> bool:
        """The framework filter, ``podSelectors`` (ORed; none: every pod) and ``evictableNamespaces``."""
        if not self.handle.evictor.filter(pod):
            return False
        labels = pod.metadata.labels or {}
        selectors = [s.selector for s in self.args.pod_selectors if s.selector is not None]
        if selectors and not any(s.matches(labels) for s in selectors):
            return False
        namespaces = self.args.evictable_namespaces
        return namespaces is None or namespaces.allows(pod.metadata.namespace or "")

    async def balance(self, nodes: Sequence[Node]) -> None:
        self.last_moves = []
        if self.args.paused:
            log.info("LowNodeLoad is paused and does nothing")
            return
        processed: set[str] = set()
        for pool in self._pools:
            members = [
                n
                for n in nodes
                if (n.metadata.name or "") not in processed
                and (pool.node_selector is None or pool.node_selector.matches(n.metadata.labels or {}))
            ]
            processed |= await self._balance_pool(pool, members)

    async def _balance_pool(self, pool: NodePool, nodes: Sequence[Node]) -> set[str]:
        """Balance one pool; the names of its hot nodes (later pools leave them alone)."""
        now, mono = self._clock(), self._monotonic()
        names = pool.resource_names()
        usages = [
            u
            for n in sorted(nodes, key=lambda n: n.metadata.name or "")
            if (
                u := node_usage(
                    n,
                    self.handle.pods_on_node(n.metadata.name or ""),
                    self.handle.node_metric(n.metadata.name or ""),
                    names,
                    now,
                    self.args.node_metric_expiration_seconds,
                )
            )
            is not None
        ]
        thresholds = node_thresholds(pool, usages)
        classes = classify(usages, thresholds)
        node_hot = {u.name for u in classes.sources}
        prod_hot = {u.name for u in classes.prod_high}
        hot = node_hot | prod_hot
        # A round in which a node is not hot breaks its run of hot rounds.
        self._node_detectors.reset(u.name for u in usages if u.name not in node_hot)
        self._prod_detectors.reset(u.name for u in usages if u.name not in prod_hot)
        if not classes.sources and not classes.prod_high:
            return hot
        condition = pool.anomaly_condition
        abnormal = self._node_detectors.abnormal([u.name for u in classes.sources], condition, mono)
        prod_abnormal = self._prod_detectors.abnormal([u.name for u in classes.prod_high], condition, mono)
        if not abnormal and not prod_abnormal:
            log.info("pool %s: hot nodes %s are not yet abnormal", pool.name, sorted(hot))
            return hot
        if classes.targets == 0 or classes.targets <= self.args.number_of_nodes:
            log.info("pool %s: %d target nodes, nothing to do", pool.name, classes.targets)
            return hot

        def pool_node(u: NodeUsage) -> PoolNode:
            return PoolNode(u, thresholds[u.name], requested_on(u.pods))

        low = [pool_node(u) for u in classes.low]
        both_low = [pool_node(u) for u in classes.both_low]
        prod_low = [pool_node(u) for u in classes.prod_low]
        weights = pool.resource_weights
        node_targets = sorted([*low, *both_low], key=lambda p: p.name)
        budget = node_budget(node_targets)
        if node_targets and abnormal:
            sources = [pool_node(u) for u in classes.sources if u.name in abnormal]
            self.last_moves += await run_pass(
                "node",
                sources,
                node_targets,
                budget,
                weights,
                self.removable,
                self._evict,
                self.args.node_fit,
                lambda s: self._node_detectors.reset([s.name]),
            )
            self._node_detectors.mark_normal(
                (s.name for s in sources if is_over(s.usage.usage, s.thresholds.high)), mono
            )
        prod_targets = sorted([*prod_low, *both_low], key=lambda p: p.name)
        if prod_targets and prod_abnormal:
            sources = [pool_node(u) for u in classes.prod_high if u.name in prod_abnormal]
            self.last_moves += await run_pass(
                "prod",
                sources,
                prod_targets,
                prod_budget(prod_low, both_low, budget),
                weights,
                self.removable,
                self._evict,
                self.args.node_fit,
                lambda s: self._prod_detectors.reset([s.name]),
            )
            self._prod_detectors.mark_normal(
                (s.name for s in sources if is_over(s.usage.prod_usage, s.thresholds.prod_high)), mono
            )
        return hot

    async def _evict(self, pod: Pod, source: PoolNode, reason: str) -> bool:
        evictor = self.handle.evictor
        if not self.removable(pod) or not evictor.pre_eviction_filter(pod):
            return False
        ref = f"{pod.metadata.namespace}/{pod.metadata.name}"
        if self.args.dry_run:
            message = f"dry run: would move pod {ref} off node {source.name}: {reason}"
            log.info("%s", message)
            await self.handle.record_event(source.usage.node, DRY_RUN_EVENT_REASON, message)
            return True
        moved = await evictor.evict(pod, EvictOptions(plugin_name=NAME, reason=reason))
        log.info("LowNodeLoad asked to move pod %s off node %s (%s): %s", ref, source.name, reason, moved)
        return moved


def new(args: LowNodeLoadArgs, handle: DeschedulerHandle) -> LowNodeLoad:
    """The factory the descheduler's registry calls."""
    return LowNodeLoad(args, handle)
