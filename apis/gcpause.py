"""The cyclic garbage collector paused over one bulk of allocations.

A list of 50,000 pods allocates a few million objects that all stay alive (the models, the
PodInfos, the cache's and plugins' entries) and form no garbage cycles. While they are made, the
collector runs thousands of times and its full collections walk every object made so far: in
koord-scheduler's start-up that was half of the CPU (issue 32). Pausing it over each page's
decoding and over each list's handling leaves one young collection per bulk instead; reference
counting frees everything acyclic meanwhile, and a cycle made inside a bulk is collected after it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


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
