"""Equal parts of pods shared by one object: the replicas of a Deployment differ in their names,
not in their containers, affinity, tolerations or labels.

The scheduler keeps every assigned pod decoded (50,000 pods at 5,000 nodes), and a decoded pod is
mostly those parts: about 5 KB of models for a plain pod, 7.5 KB with affinity terms. ``share``
replaces each of them with the first equal one seen (compared by their JSON, a few microseconds),
so a Deployment's replicas hold one copy. The scheduler never mutates a pod it decoded; sharing
relies on that. The table is bounded (least recently used parts are forgotten first).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from pydantic_core import to_json

from apis.core import Pod

__all__ = ["SHARED_SPEC_PARTS", "PartSharing", "share"]

SHARED_SPEC_PARTS = (
    "containers",
    "init_containers",
    "affinity",
    "tolerations",
    "topology_spread_constraints",
    "node_selector",
    "overhead",
)
_META_PARTS = ("labels", "owner_references")


class PartSharing:
    def __init__(self, capacity: int = 16384) -> None:
        self._capacity = capacity
        self._parts: OrderedDict[tuple[str, bytes], Any] = OrderedDict()
        self._kept: dict[int, Any] = {}
        """The parts in the table by identity: a pod shared once (as the backend decodes it) is
        shared again by ``PodInfo`` without serializing its parts a second time."""

    def share(self, pod: Pod) -> Pod:
        """``pod`` with its parts replaced by equal ones already seen (in place); returns it."""
        for owner, names in ((pod.spec, SHARED_SPEC_PARTS), (pod.metadata, _META_PARTS)):
            # The fields read and written in the model's __dict__ as pydantic's own __setattr__
            # does without validate_assignment, less its per-call dispatch (a fifth of sharing a
            # pod, which is done for every pod listed).
            fields = owner.__dict__
            for name in names:
                value = fields[name]
                if value:
                    shared = self._one(name, value)
                    if shared is not value:
                        fields[name] = shared
                        owner.__pydantic_fields_set__.add(name)
        return pod

    def _one(self, name: str, value: Any) -> Any:
        if self._kept.get(id(value)) is value:
            return value
        key = (name, to_json(value, fallback=str))
        found = self._parts.get(key)
        if found is not None:
            self._parts.move_to_end(key)
            return found
        self._parts[key] = value
        self._kept[id(value)] = value
        if len(self._parts) > self._capacity:
            _, forgotten = self._parts.popitem(last=False)
            self._kept.pop(id(forgotten), None)
        return value

    def __len__(self) -> int:
        return len(self._parts)


_SHARED = PartSharing()


def share(pod: Pod) -> Pod:
    """The process-wide ``PartSharing.share``."""
    return _SHARED.share(pod)
