from __future__ import annotations

import pytest

from apis.errors import InvalidAnnotation
from apis.extension import scheduler as s


def test_keys() -> None:
    assert s.KOORD_SCHEDULER_NAME == "koord-scheduler"
    assert s.LABEL_SCHEDULER_NAME == "scheduling.koordinator.sh/scheduler-name"
    assert (
        s.ANNOTATION_ORIGINAL_SCHEDULER_NAME == "internal.scheduling.koordinator.sh/original-scheduler-name"
    )
    assert s.ANNOTATION_SCHEDULING_HINT == "internal.scheduling.koordinator.sh/scheduling-hint"
    assert s.DEPRECATED_ANNOTATION_SCHEDULING_HINT == "scheduling.koordinator.sh/scheduling-hint"


@pytest.mark.parametrize(
    ("labels", "spec_name", "expected"),
    [
        ({}, "koord-scheduler", "koord-scheduler"),
        ({s.LABEL_SCHEDULER_NAME: "koord-scheduler-b"}, "koord-scheduler", "koord-scheduler-b"),
        ({}, None, "default-scheduler"),
        ({}, "", "default-scheduler"),
    ],
)
def test_scheduler_name_of(labels: dict[str, str], spec_name: str | None, expected: str) -> None:
    assert s.scheduler_name_of(labels, spec_name) == expected


HINT = '{"nodeNames": ["n1"], "preferredNodeNames": ["n2", "n3"], "extensions": {"plugin": {"k": 1}}}'


@pytest.mark.parametrize(
    ("annotations", "nodes"),
    [
        pytest.param({s.ANNOTATION_SCHEDULING_HINT: HINT}, ["n1"], id="internal"),
        pytest.param({s.DEPRECATED_ANNOTATION_SCHEDULING_HINT: HINT}, ["n1"], id="deprecated-fallback"),
        pytest.param(
            {
                s.ANNOTATION_SCHEDULING_HINT: '{"nodeNames": ["new"]}',
                s.DEPRECATED_ANNOTATION_SCHEDULING_HINT: HINT,
            },
            ["new"],
            id="internal-wins",
        ),
        pytest.param(
            {s.ANNOTATION_SCHEDULING_HINT: "", s.DEPRECATED_ANNOTATION_SCHEDULING_HINT: HINT},
            ["n1"],
            id="empty-internal-ignored",
        ),
    ],
)
def test_get_scheduling_hint(annotations: dict[str, str], nodes: list[str]) -> None:
    hint = s.get_scheduling_hint(annotations)
    assert hint is not None
    assert hint.node_names == nodes


def test_scheduling_hint_fields() -> None:
    hint = s.parse_scheduling_hint(HINT)
    assert hint.preferred_node_names == ["n2", "n3"]
    assert hint.extensions == {"plugin": {"k": 1}}
    assert s.get_scheduling_hint({}) is None


def test_scheduling_hint_rejects_and_names_the_key_read() -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        s.get_scheduling_hint({s.DEPRECATED_ANNOTATION_SCHEDULING_HINT: '{"nodeNames": "n1"}'})
    assert caught.value.key == s.DEPRECATED_ANNOTATION_SCHEDULING_HINT
    assert "nodeNames: Input should be a valid array" in caught.value.problem
