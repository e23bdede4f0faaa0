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
from scheduler.plugins.device_share.card_table import CardTable
from scheduler.plugins.device_share.cycle import Cycle, memoizable
from scheduler.plugins.device_share.cycle_allocator import ERR_INSUFFICIENT_GPU, CycleAllocator
from scheduler.plugins.device_share.node_memo import NodeAnswers, ShapeCache
from scheduler.plugins.device_share.rdma import Refusal
from scheduler.plugins.device_share.row_answers import fitting_cards

__all__ = ["ERR_ISOLATION_PROVIDER", "NodeRefusals", "RefusalTable"]

ERR_ISOLATION_PROVIDER = "GPUIsolationProviderHAMICore not found on the node"


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
        for node in nodes:
            if node not in store.has_device:
                answers[node] = None
            elif self._by_rows(node, cycle, cards):
                together.append(node)
            else:
                answers[node] = self.refusal(node, cycle)
        if together:
            assert request is not None
            rows = np.fromiter((cards.row[node] for node in together), np.int64, len(together))
            holds = (fitting_cards(cards, rows, request) >= request.count).tolist()
            for node, held in zip(together, holds, strict=True):
                answers[node] = None if held else Refusal(ERR_INSUFFICIENT_GPU)
        return answers

    @staticmethod
    def _by_rows(node: str, cycle: Cycle, cards: CardTable) -> bool:
        """Whether ``row_answers`` answers for ``node``: a memoizable cycle without NPU amounts, on
        a node with a template for it, no NPU amounts and no partition a whole-card request may take."""
        request = cycle.request
        if request is None or not memoizable(cycle) or any(request.npu) or node in cycle.no_template:
            return False
        row = cards.row[node]
        return not cards.npu[row] and not (request.whole and cards.partitions[row])

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
