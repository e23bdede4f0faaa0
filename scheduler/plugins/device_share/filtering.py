"""PreFilter's and Filter's answers per node: why a node's cards (or NICs) cannot hold the pod,
kept per request shape across cycles (``node_memo``), and the nodes that refuse shared cards."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from apis.extension.device import LABEL_GPU_ISOLATION_PROVIDER, LABEL_GPU_MODEL, LABEL_GPU_VENDOR
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.plugins.device_share.args import DeviceShareArgs
from scheduler.plugins.device_share.cycle import Cycle, memoizable
from scheduler.plugins.device_share.cycle_allocator import ERR_INSUFFICIENT_GPU, CycleAllocator
from scheduler.plugins.device_share.node_memo import NodeAnswers, ShapeCache
from scheduler.plugins.device_share.rdma import Refusal
from scheduler.plugins.device_share.row_answers import fitting_cards

__all__ = ["ERR_ISOLATION_PROVIDER", "NodeRefusals", "RefusalTable"]

ERR_ISOLATION_PROVIDER = "GPUIsolationProviderHAMICore not found on the node"

_INSUFFICIENT = Refusal(ERR_INSUFFICIENT_GPU)
"""A node whose cards cannot hold the request: one value shared by every such answer."""


@dataclass(slots=True)
class RefusalTable(NodeAnswers[Refusal]):
    """``NodeAnswers`` of PreFilter's refusals, with the refused nodes as a mask over the store's
    card rows (``card_table``) as of ``layout``."""

    refused: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    layout: int = -1
    _frozen: tuple[frozenset[str], Mapping[str, Refusal], frozenset[str]] | None = None
    """``frozen``'s answer and the Device names it was for; None once an answer changed."""

    def frozen(self, with_device: frozenset[str]) -> tuple[Mapping[str, Refusal], frozenset[str]]:
        """A copy of ``by_node`` and the nodes of ``with_device`` outside it (those that hold the
        shape), kept while no node's answer changes: most nodes a placement changes answer as
        before (a refused node stays refused), so the copies are made far less often than asked."""
        if self._frozen is None or self._frozen[0] is not with_device:
            refusals = dict(self.by_node)
            self._frozen = (with_device, refusals, with_device - refusals.keys())
        return self._frozen[1], self._frozen[2]


class NodeRefusals:
    def __init__(self, allocator: CycleAllocator, args: DeviceShareArgs) -> None:
        self.allocator = allocator
        self.store = allocator.store
        self.args = args
        self._fits: ShapeCache[RefusalTable] = ShapeCache(RefusalTable)
        """PreFilter's refusals per request shape (``node_memo``)."""

    def of_cycle(self, cycle: Cycle) -> dict[str, Refusal]:
        """Why each node with a Device cannot hold the cycle's pod (absent: it can)."""
        if memoizable(cycle):
            return dict(self.table(cycle).by_node)
        refusals: dict[str, Refusal] = {}
        for node in self.store.has_device:
            refusal = self.refusal(node, cycle)
            if refusal is not None:
                refusals[node] = refusal
        return refusals

    def table(self, cycle: Cycle) -> RefusalTable:
        """The refusals of every node with a Device for the cycle's request shape, asking again
        only the nodes changed since the shape was last asked (``node_memo``)."""
        table = self._fits.of((cycle.request, cycle.honor_partitions, cycle.no_template))
        cards = self.store.cards()
        if table.layout != cards.layout:
            table.refused = np.zeros(cards.count.shape, dtype=np.bool_)
            table.layout, table.synced = cards.layout, -1
        changed = self.store.changed_since(table.synced) if table.synced >= 0 else None
        if changed is None:
            table.by_node.clear()
            table.refused[:] = False
            table._frozen = None
            changed = set(self.store.has_device)
        for node, refusal in self._refusals(changed, cycle).items():
            table.refused[cards.row[node]] = refusal is not None
            if table.by_node.get(node) != refusal:
                table._frozen = None
            if refusal is None:
                table.by_node.pop(node, None)
            else:
                table.by_node[node] = refusal
        table.synced = self.store.changes
        return table

    def _refusals(self, nodes: set[str], cycle: Cycle) -> dict[str, Refusal | None]:
        """``refusal`` of each of ``nodes`` (None without a Device), those whose cards the
        table's arrays hold as the allocator sees them asked together (``row_answers``)."""
        store, cards, request = self.store, self.store.cards(), cycle.request
        answers: dict[str, Refusal | None] = {}
        together: list[str] = []
        rows: list[int] = []
        # The arrays answer for a memoizable cycle without NPU amounts on a node with a template
        # for it, no NPU amounts and no partition a whole-card request may take; the cycle's part
        # of that is asked once, not per node.
        by_rows = request is not None and memoizable(cycle) and not any(request.npu)
        whole = request is not None and request.whole
        has_device, no_template, row_of = store.has_device, cycle.no_template, cards.row
        npu, partitions = cards.npu, cards.partitions
        for node in nodes:
            if node not in has_device:
                answers[node] = None
                continue
            row = row_of[node]
            if by_rows and node not in no_template and not npu[row] and not (whole and partitions[row]):
                together.append(node)
                rows.append(row)
            else:
                answers[node] = self.refusal(node, cycle)
        if together:
            assert request is not None
            held = fitting_cards(cards, np.asarray(rows, dtype=np.int64), request) >= request.count
            for node, holds in zip(together, held.tolist(), strict=True):
                answers[node] = None if holds else _INSUFFICIENT
        return answers

    def refusal(self, node: str, cycle: Cycle) -> Refusal | None:
        if memoizable(cycle):
            # No NICs asked: the cards alone answer, and only whether they fit matters here.
            return None if self.allocator.holds(node, cycle) else Refusal(ERR_INSUFFICIENT_GPU)
        got = self.allocator.allocate_all(node, cycle)
        return got if isinstance(got, Refusal) else None

    def fitting(self, cycle: Cycle, snapshot: Snapshot) -> frozenset[str]:
        """The nodes whose cards hold the request, counting pods a preemption is weighing as gone."""
        allocator = self.allocator
        victims = allocator.withdrawn(snapshot)
        if not victims:
            return cycle.fitting
        freed = {
            node
            for node, uids in victims.items()
            if node in cycle.with_device
            and not isinstance(
                allocator.allocate_all(
                    node,
                    cycle,
                    allocator.gpu_usage(node, cycle, uids),
                    allocator.rdma_usage(node, cycle, uids),
                ),
                Refusal,
            )
        }
        return cycle.fitting | freed

    def of_sharing(self, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> list[tuple[str, BoolArray]]:
        """Nodes that refuse a shared GPU: a model listed in ``gpuShareUnsupportedModels``, or an
        isolation provider other than the one the pod's label asks for."""
        refusals: list[tuple[str, BoolArray]] = []
        for unsupported in self.args.gpu_share_unsupported_models:
            on_model = (
                snapshot.label_mask(LABEL_GPU_VENDOR, frozenset((unsupported.vendor,)))
                & snapshot.label_mask(LABEL_GPU_MODEL, frozenset((unsupported.model,)))
            )[rows]
            reason = (
                f"model {unsupported.model!r} of vendor {unsupported.vendor!r} does not support GPU Share"
            )
            refusals.append((reason, on_model))
        provider = pod.labels.get(LABEL_GPU_ISOLATION_PROVIDER)
        if provider:
            other = ~snapshot.label_mask(LABEL_GPU_ISOLATION_PROVIDER, frozenset((provider,)))[rows]
            refusals.append((ERR_ISOLATION_PROVIDER, other))
        return refusals
