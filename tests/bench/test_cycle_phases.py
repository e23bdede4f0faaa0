"""``e2e.bench.cycle_phases`` times the phases and plugin calls of a real simulate run, and leaves
the scheduler's classes as they were."""

from __future__ import annotations

from e2e.bench.cycle_phases import measure
from scheduler.events import EventHandlers
from scheduler.framework.runtime import Framework


async def test_each_phase_and_plugin_call_gets_a_line_and_the_classes_are_restored() -> None:
    run_filter, init = Framework.run_filter, Framework.__init__
    lines = await measure(nodes=4, pods=12)
    assert lines[0].startswith("12/12 mixed pods bound on 4 nodes")
    labels = [line.split()[0] for line in lines[2:]]
    assert "framework.run_filter" in labels
    assert "NodeResourcesFit.filter" in labels
    assert any("handle_pod_event" in label for label in labels)
    assert Framework.run_filter is run_filter
    assert Framework.__init__ is init
    assert not hasattr(EventHandlers.handle_pod_event, "__wrapped__")


async def test_the_identical_workload_is_timed_too() -> None:
    lines = await measure(nodes=4, pods=12, kind="identical")
    assert lines[0].startswith("12/12 identical pods bound on 4 nodes")
