"""How many pods of one GPU shape a node's cards can still hold: what gangs and preemption plan by.

The node table only counts GPUs; a gang whose members each need 8 cards in one PCIe switch fits a
node by count that has them split over switches. The room is found the way Reserve will take the
cards, one member after the other with the same allocator, so a plan made by it is one that Reserve
then fulfils (as long as nothing else takes the cards meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from apis.extension.device import DeviceHint, GPUPartitionSpec
from scheduler.plugins.device_share.allocator import Allocation, GPUUsage
from scheduler.plugins.device_share.request import GPURequest

__all__ = ["Allocate", "describe_shape", "room"]

Allocate = Callable[[Mapping[int, GPUUsage]], list[Allocation] | None]
"""The cards one pod gets on a node given its usage (None: none fit), as Reserve picks them."""


def room(allocate: Allocate, usage: Mapping[int, GPUUsage], limit: int) -> int:
    """Pods that fit one after the other, each holding the cards it was given (at most ``limit``)."""
    held = dict(usage)
    count = 0
    while count < limit:
        cards = allocate(held)
        if cards is None:
            break
        for card in cards:
            held[card.minor] = held.get(card.minor, GPUUsage()) + card.usage
        count += 1
    return count


def describe_shape(request: GPURequest, hint: DeviceHint | None, partition: GPUPartitionSpec | None) -> str:
    """The shape in words (also the key pods share room under): ``sets of 8 whole GPUs in one PCIe``."""
    if request.whole:
        what = f"{request.count} whole GPU{'s' if request.count > 1 else ''}"
    else:
        memory = f"ratio {request.ratio}" if request.ratio is not None else f"{request.memory} bytes"
        plural = "s" if request.count > 1 else ""
        what = f"{request.count} GPU share{plural} (core {request.core}, memory {memory})"
    scope = hint.required_topology_scope if hint is not None else None
    text = f"sets of {what}" + (f" in one {scope}" if scope not in (None, "Node", "Device") else "")
    if hint is not None and hint.selector is not None:
        text += f" matching {hint.selector.model_dump_json(by_alias=True, exclude_none=True)}"
    if partition is not None:
        text += f" in a {partition.allocate_policy} partition"
    return text
