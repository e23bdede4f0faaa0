"""ImageLocality: favour nodes that already have the pod's container images (kube-scheduler's
``pkg/scheduler/framework/plugins/imagelocality``).

For every container and init container, the image name is normalized (a name without a tag gets
``:latest``; nothing else: ``nginx`` and ``docker.io/library/nginx`` stay different names, as
upstream leaves them) and looked up in the nodes' ``status.images``. An image a node has adds its
size scaled by the share of all nodes that have it, ``int(size * (nodesWithImage / nodes))``, so that
an image present everywhere does not pull every pod to one node. The sum is clamped into
``[23Mi, 1000Mi * containers]`` and mapped linearly onto 0..100.

The cache indexes image names to rows, so a score is one addition per image the pod uses over the
rows that have it.
"""

from __future__ import annotations

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import RowInputs
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import MAX_NODE_SCORE, ScorePlugin
from scheduler.framework.registry import PluginSpec

__all__ = [
    "MAX_CONTAINER_THRESHOLD",
    "MIN_THRESHOLD",
    "NAME",
    "PLUGIN",
    "ImageLocality",
    "new",
    "normalized_image_name",
]

NAME = "ImageLocality"

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
"""Below this (scaled) size the images on a node do not count."""
MAX_CONTAINER_THRESHOLD = 1000 * MB
"""Per container: a sum above ``MAX_CONTAINER_THRESHOLD * containers`` scores 100."""


def normalized_image_name(name: str) -> str:
    """upstream's ``normalizedImageName``: ``:latest`` when the last ``:`` is not after the last ``/``."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


class ImageLocality(ScorePlugin):
    @property
    def name(self) -> str:
        return NAME

    def row_inputs(self, pod: PodInfo) -> RowInputs:
        """``RowLocal``: it reads the pod and its node's images and the count of nodes."""
        return RowInputs.NODE

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        spec = pod.pod.spec
        containers = [*(spec.init_containers or ()), *spec.containers]
        total_nodes = snapshot.node_count()
        present: list[tuple[IntArray, int]] = []
        for container in containers:
            image = normalized_image_name(container.image or "")
            holders = snapshot.image_rows(image)
            if holders.size and total_nodes > 0:
                spread = float(holders.size) / float(total_nodes)
                present.append((holders, int(float(snapshot.image_size(image)) * spread)))
        # sizeBytes is any int64: add exactly when the sum could leave int64 (never for real images).
        exact = sum(abs(scaled) for _, scaled in present) >= 2**62
        sums = np.zeros(snapshot.table.row_count, dtype=object if exact else np.int64)
        for holders, scaled in present:
            sums[holders] += scaled
        max_threshold = MAX_CONTAINER_THRESHOLD * len(containers)
        if max_threshold <= MIN_THRESHOLD:
            return np.zeros(rows.size, dtype=np.int64)
        clamped = np.clip(sums[rows], MIN_THRESHOLD, max_threshold).astype(np.int64)
        result: IntArray = MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)
        return result


def new(args: None, handle: Handle) -> ImageLocality:
    return ImageLocality()


PLUGIN = PluginSpec(NAME, new)
