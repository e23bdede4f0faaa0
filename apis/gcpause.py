"""The cyclic garbage collector paused over one bulk of allocations.

A list of 50,000 pods allocates a few million objects that all stay alive (the models, the
PodInfos, the cache's and plugins' entries) and form no garbage cycles. While they are made, the
collector runs thousands of times and its full collections walk every object made so far: in
koord-scheduler's start-up that was half of the CPU (issue 32). Pausing it over each page's
decoding and over each list's handling leaves one young collection per bulk instead; reference
counting frees everything acyclic meanwhile, and a cycle made inside a bulk is collected after it.

That young collection still walks the whole bulk, and the older generations' collections walk
the bulks again as they pile up: about a fifth of decoding 50,000 pods. A process that keeps what
it lists (koord-scheduler, until its caches are synced: ``freezing_lists``) freezes each list
bulk instead (``gc.freeze``), out of every collection's reach, as it freezes its synced caches.

After the sync the objects kept keep piling up (every pod bound, its PodInfo, its cache entries),
and each full collection walked all of them again: about 15% of a scheduling cycle's CPU at
20,000 pods. ``SurvivorFreezer`` freezes what survives each full collection, so the next one walks
only what came since, and hands everything back to the collector every ``thaw_seconds``, so that a
cycle formed among frozen objects is freed within that time.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["SurvivorFreezer", "freezing_lists", "gc_paused", "list_paused"]

_list_freezers = 0
"""How many ``freezing_lists`` blocks are open (apps of one process may overlap)."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Collector off within the block (which must not await: other tasks would run paused too);
    nested blocks leave it to the outermost to turn it back on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def list_paused() -> Iterator[None]:
    """``gc_paused`` over a list's bulk (a page's decoding, a list's handling); within
    ``freezing_lists`` the outermost block ends by freezing everything alive then."""
    outermost = gc.isenabled()
    with gc_paused():
        try:
            yield
        finally:
            if outermost and _list_freezers:
                gc.freeze()


@contextmanager
def freezing_lists() -> Iterator[None]:
    """Within (process-wide): each ``list_paused`` bulk is frozen when it ends. Only for a process
    that unfreezes what it froze when it drops it (``gc.unfreeze``): a frozen object that ends in
    a garbage cycle is freed only then."""
    global _list_freezers
    _list_freezers += 1
    try:
        yield
    finally:
        _list_freezers -= 1


class SurvivorFreezer:
    """While installed (process-wide, ``gc.callbacks``): what survives a full collection is frozen,
    alive and in no garbage cycle as that collection just found. Every ``thaw_seconds`` the next
    full collection's end unfreezes everything instead, and the one after walks it all once, frees
    the cycles formed among frozen objects meanwhile and freezes its survivors again."""

    def __init__(self, thaw_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.thaw_seconds = thaw_seconds
        self._clock = clock
        self._thaw_at = clock() + thaw_seconds

    def install(self) -> None:
        if self._on_collection not in gc.callbacks:
            gc.callbacks.append(self._on_collection)

    def uninstall(self) -> None:
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)

    def _on_collection(self, phase: str, info: dict[str, int]) -> None:
        if phase != "stop" or info.get("generation") != 2:
            return
        now = self._clock()
        if now >= self._thaw_at:
            self._thaw_at = now + self.thaw_seconds
            gc.unfreeze()
        else:
            gc.freeze()
