"""What the ElasticQuota figures writer patches: Koordinator's ``updateElasticQuotaStatusIfChanged``
compares each list with its zero entries removed and writes only the lists that differ."""

from __future__ import annotations

from collections.abc import Mapping

from apis.extension import quota as quota_ext
from scheduler.plugins.elastic_quota.writer import USED_KEY, FiguresWriter, Payload, payload_of
from scheduler.quota.tree import Figures, Resources

RUNTIME = quota_ext.ANNOTATION_RUNTIME
REQUEST = quota_ext.ANNOTATION_REQUEST


def figures(*, used: Resources | None = None, runtime: Resources | None = None) -> Figures:
    zero: Resources = {"cpu": 0, "memory": 0}
    request = used or zero
    return Figures(
        name="team-a",
        parent="koordinator-root-quota",
        min={"cpu": 4000},
        max={"cpu": 8000},
        auto_scale_min={"cpu": 4000},
        shared_weight={"cpu": 8000},
        child_request=request,
        request=request,
        used=used or zero,
        non_preemptible_request=zero,
        non_preemptible_used=zero,
        runtime=runtime or zero,
    )


class Recorder:
    def __init__(self) -> None:
        self.patches: list[dict[str, object]] = []
        self.observed: dict[str, str] = {}
        self.current = figures()

    async def patch(self, payload: Payload) -> None:
        self.patches.append(payload.patch())
        # The API server now carries it, as the watch reports it back.
        self.observed.update(payload.values)

    def payloads(self) -> list[tuple[Payload, Mapping[str, str]]]:
        return [(payload_of(self.current, "team-a"), dict(self.observed))]


async def test_a_quota_whose_figures_are_all_zero_gets_nothing_written() -> None:
    recorder = Recorder()
    writer = FiguresWriter(recorder.patch, recorder.payloads)
    assert await writer.flush() == 0
    assert recorder.patches == []


async def test_only_the_lists_that_changed_are_written_and_zeros_once_they_were_not() -> None:
    recorder = Recorder()
    writer = FiguresWriter(recorder.patch, recorder.payloads)
    recorder.current = figures(used={"cpu": 2000, "memory": 0}, runtime={"cpu": 2000, "memory": 0})
    assert await writer.flush() == 1
    first = recorder.patches[-1]
    assert first["status"] == {"used": {"cpu": "2", "memory": "0"}}
    annotations = first["metadata"]["annotations"]  # type: ignore[index]
    assert annotations == {
        RUNTIME: '{"cpu":"2","memory":"0"}',
        REQUEST: '{"cpu":"2","memory":"0"}',
        quota_ext.ANNOTATION_CHILD_REQUEST: '{"cpu":"2","memory":"0"}',
    }

    # Nothing changed: nothing is written.
    assert await writer.flush() == 0

    # The pods went: every list that was non-zero is written back to zero; the ones that were
    # always zero are still not written.
    recorder.current = figures()
    assert await writer.flush() == 1
    last = recorder.patches[-1]
    assert last["status"] == {"used": {"cpu": "0", "memory": "0"}}
    assert set(last["metadata"]["annotations"]) == {  # type: ignore[index]
        RUNTIME,
        REQUEST,
        quota_ext.ANNOTATION_CHILD_REQUEST,
    }


async def test_a_list_equal_but_for_zero_entries_or_spelling_is_not_rewritten() -> None:
    recorder = Recorder()
    recorder.observed = {
        RUNTIME: '{"cpu":"2000m"}',
        REQUEST: '{"cpu":"2"}',
        quota_ext.ANNOTATION_CHILD_REQUEST: '{"cpu":"2"}',
    }
    recorder.observed[USED_KEY] = '{"cpu":"2"}'
    recorder.current = figures(used={"cpu": 2000, "memory": 0}, runtime={"cpu": 2000, "memory": 0})
    writer = FiguresWriter(recorder.patch, recorder.payloads)
    assert await writer.flush() == 0


async def test_a_hand_edited_list_that_is_no_resource_list_is_written_over() -> None:
    recorder = Recorder()
    recorder.observed = {RUNTIME: "not json"}
    writer = FiguresWriter(recorder.patch, recorder.payloads)
    assert await writer.flush() == 1
    assert recorder.patches[-1] == {"metadata": {"annotations": {RUNTIME: '{"cpu":"0","memory":"0"}'}}}
