"""The ``noderesource_pods`` index as Kopf keeps it, over a list of pods a test can change."""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import kopf

from apis.core import Pod
from operators.handlers.noderesource import pods_by_node
from operators.logic.noderesource.inputs import PodEntry

LOG: Any = logging.getLogger("test")


class PodIndex(Mapping[str, Collection[PodEntry]]):
    """Node name -> the entries ``pods_by_node`` indexes for ``pods``; ``reads`` counts lookups."""

    def __init__(self, pods: list[Pod]) -> None:
        self.pods = pods
        self.reads = 0

    def _index(self) -> dict[str, list[PodEntry]]:
        index: dict[str, list[PodEntry]] = {}
        for pod in self.pods:
            raw: Any = pod.to_wire()
            for node, entry in pods_by_node(kopf.Body(raw), LOG).items():
                index.setdefault(node, []).append(entry)
        return index

    def __getitem__(self, node: str) -> Collection[PodEntry]:
        self.reads += 1
        return self._index()[node]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())
