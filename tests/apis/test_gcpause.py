"""apis.gcpause: the collector paused over a bulk, a list's bulk frozen only while a process
freezes its lists, and the survivors of full collections frozen until the next thaw."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from apis.gcpause import SurvivorFreezer, freezing_lists, gc_paused, list_paused


class _Node:
    def __init__(self) -> None:
        self.peer: _Node | None = None


def _frozen(obj: object) -> bool:
    """In none of the generations the collector walks (``gc.freeze`` moved it out)."""
    assert gc.is_tracked(obj)
    return not any(o is obj for generation in range(3) for o in gc.get_objects(generation))


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_the_collector_is_off_within_and_back_after_the_outermost_block() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with list_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_list_bulk_is_frozen_only_within_freezing_lists() -> None:
    with list_paused():
        before = _Node()
    with freezing_lists():
        with gc_paused():  # another kind of bulk (a what-if, a preemption): never frozen
            other = _Node()
        assert not _frozen(other)
        with list_paused():
            listed = _Node()
            with list_paused():  # nested: only the outermost freezes
                inner = _Node()
            assert not _frozen(inner)
        assert _frozen(listed)
        assert _frozen(inner)
        assert _frozen(before)  # everything alive then
    with list_paused():
        after = _Node()
    assert not _frozen(after)


def test_overlapping_freezers_keep_freezing_until_the_last_ends() -> None:
    first, second = freezing_lists(), freezing_lists()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    with list_paused():
        during = _Node()
    assert _frozen(during)
    second.__exit__(None, None, None)
    with list_paused():
        after = _Node()
    assert not _frozen(after)


def test_a_frozen_garbage_cycle_is_collected_once_unfrozen() -> None:
    with freezing_lists(), list_paused():
        a, b = _Node(), _Node()
        a.peer, b.peer = b, a
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is not None
    gc.unfreeze()
    gc.collect()
    assert gone() is None


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


@pytest.fixture
def freezer(clock: _Clock) -> Iterator[SurvivorFreezer]:
    freezer = SurvivorFreezer(60.0, clock)
    freezer.install()
    yield freezer
    freezer.uninstall()


def test_what_survives_a_full_collection_is_frozen_and_a_young_one_freezes_nothing(
    freezer: SurvivorFreezer,
) -> None:
    kept = _Node()
    gc.collect(0)
    assert not _frozen(kept)
    gc.collect()
    assert _frozen(kept)
    later = _Node()
    assert not _frozen(later)


def test_a_cycle_among_frozen_objects_is_freed_after_the_thaw(
    freezer: SurvivorFreezer, clock: _Clock
) -> None:
    node = _Node()
    node.peer = node
    gone = weakref.ref(node)
    gc.collect()
    del node
    gc.collect()
    assert gone() is not None  # frozen: no collection looks at it
    clock.now = 61.0
    gc.collect()  # its end thaws everything
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None
    kept = _Node()
    gc.collect()
    assert _frozen(kept)  # frozen again until the next thaw


def test_uninstalled_it_freezes_nothing(clock: _Clock) -> None:
    freezer = SurvivorFreezer(60.0, clock)
    freezer.install()
    freezer.install()
    freezer.uninstall()
    kept = _Node()
    gc.collect()
    assert not _frozen(kept)
    assert gc.get_freeze_count() == 0
