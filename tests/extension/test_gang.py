from __future__ import annotations

from datetime import timedelta

import pytest

from apis.errors import InvalidAnnotation
from apis.extension import gang


def test_keys() -> None:
    assert gang.LABEL_POD_GROUP == "pod-group.scheduling.sigs.k8s.io"
    assert gang.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_NAME == "pod-group.scheduling.sigs.k8s.io/name"
    assert gang.ANNOTATION_GANG_MIN_NUM == "gang.scheduling.koordinator.sh/min-available"
    assert gang.ANNOTATION_GANG_TOTAL_NUM == "gang.scheduling.koordinator.sh/total-number"
    assert gang.ANNOTATION_GANG_WAIT_TIME == "gang.scheduling.koordinator.sh/waiting-time"
    assert gang.ANNOTATION_GANG_MODE == "gang.scheduling.koordinator.sh/mode"
    assert gang.ANNOTATION_GANG_MATCH_POLICY == "gang.scheduling.koordinator.sh/match-policy"
    assert gang.ANNOTATION_ALIAS_GANG_MATCH_POLICY == "pod-group.scheduling.sigs.k8s.io/match-policy"
    assert gang.ANNOTATION_GANG_GROUPS == "gang.scheduling.koordinator.sh/groups"
    assert gang.ANNOTATION_GANG_TIMEOUT == "gang.scheduling.koordinator.sh/timeout"
    assert (
        gang.ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC == "gang.scheduling.koordinator.sh/network-topology-spec"
    )
    assert (
        gang.ANNOTATION_GANG_NETWORK_TOPOLOGY_INDEX == "gang.scheduling.koordinator.sh/network-topology-index"
    )
    assert gang.ANNOTATION_BIND_GANG_GROUP_ID == "internal.scheduling.koordinator.sh/bind-gang-group-id"
    assert (
        gang.DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT
        == "scheduling.koordinator.sh/bind-gang-member-count"
    )


@pytest.mark.parametrize(
    ("raw", "expected", "warns"),
    [
        pytest.param(None, "Strict", False, id="absent"),
        pytest.param("", "Strict", False, id="empty"),
        pytest.param("Strict", "Strict", False, id="strict"),
        pytest.param("NonStrict", "NonStrict", False, id="non-strict"),
        pytest.param("nonstrict", "Strict", True, id="wrong-case-falls-back"),
        pytest.param("Lenient", "Strict", True, id="unknown-falls-back"),
    ],
)
def test_resolve_gang_mode(raw: str | None, expected: str, warns: bool) -> None:
    resolved = gang.resolve_gang_mode(raw)
    assert resolved.value == expected
    assert (resolved.warning is not None) is warns
    if warns:
        assert gang.ANNOTATION_GANG_MODE in (resolved.warning or "")
        assert repr(raw) in (resolved.warning or "")


@pytest.mark.parametrize(
    ("raw", "default", "expected", "warns"),
    [
        pytest.param(None, "once-satisfied", "once-satisfied", False, id="absent"),
        pytest.param("only-waiting", "once-satisfied", "only-waiting", False, id="only-waiting"),
        pytest.param("waiting-and-running", "once-satisfied", "waiting-and-running", False, id="w-and-r"),
        pytest.param("once-satisfied", "only-waiting", "once-satisfied", False, id="once-satisfied"),
        pytest.param("OnceSatisfied", "once-satisfied", "once-satisfied", True, id="pascal-case-falls-back"),
        pytest.param("bogus", "only-waiting", "only-waiting", True, id="falls-back-to-configured-default"),
    ],
)
def test_resolve_gang_match_policy(
    raw: str | None, default: gang.GangMatchPolicy, expected: str, warns: bool
) -> None:
    resolved = gang.resolve_gang_match_policy(raw, default)
    assert resolved.value == expected
    assert (resolved.warning is not None) is warns


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({}, None, id="none"),
        pytest.param({gang.ANNOTATION_GANG_MATCH_POLICY: "only-waiting"}, "only-waiting", id="primary"),
        pytest.param({gang.ANNOTATION_ALIAS_GANG_MATCH_POLICY: "only-waiting"}, "only-waiting", id="alias"),
        pytest.param(
            {
                gang.ANNOTATION_GANG_MATCH_POLICY: "once-satisfied",
                gang.ANNOTATION_ALIAS_GANG_MATCH_POLICY: "x",
            },
            "once-satisfied",
            id="primary-wins",
        ),
        pytest.param(
            {gang.ANNOTATION_GANG_MATCH_POLICY: "", gang.ANNOTATION_ALIAS_GANG_MATCH_POLICY: "only-waiting"},
            "only-waiting",
            id="empty-primary-reads-alias",
        ),
    ],
)
def test_get_gang_match_policy(annotations: dict[str, str], expected: str | None) -> None:
    assert gang.get_gang_match_policy(annotations) == expected


@pytest.mark.parametrize(("raw", "expected"), [("5", 5), ("1", 1), ("0", 0), ("+3", 3)])
def test_parse_gang_min_available(raw: str, expected: int) -> None:
    assert gang.parse_gang_min_available(raw) == expected


@pytest.mark.parametrize("raw", ["", "five", "5.0", "0x5", "2147483648"])
def test_parse_gang_min_available_rejects(raw: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        gang.parse_gang_min_available(raw)
    assert caught.value.key == gang.ANNOTATION_GANG_MIN_NUM


def test_parse_gang_min_available_names_the_deprecated_label() -> None:
    key = gang.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_MIN_AVAILABLE
    with pytest.raises(InvalidAnnotation) as caught:
        gang.parse_gang_min_available("x", key)
    assert caught.value.key == key


@pytest.mark.parametrize(
    ("raw", "minimum", "expected", "warns"),
    [
        pytest.param(None, 5, 5, False, id="missing"),
        pytest.param("", 5, 5, False, id="empty"),
        pytest.param("8", 5, 8, False, id="valid"),
        pytest.param("5", 5, 5, False, id="equal"),
        pytest.param("3", 5, 5, True, id="below-min"),
        pytest.param("eight", 5, 5, True, id="invalid"),
    ],
)
def test_resolve_gang_total_number(raw: str | None, minimum: int, expected: int, warns: bool) -> None:
    resolved = gang.resolve_gang_total_number(raw, minimum)
    assert resolved.value == expected
    assert (resolved.warning is not None) is warns


@pytest.mark.parametrize(
    ("raw", "expected", "warns"),
    [
        pytest.param(None, None, False, id="missing"),
        pytest.param("", None, False, id="empty"),
        pytest.param("300s", timedelta(seconds=300), False, id="seconds"),
        pytest.param("1h30m", timedelta(minutes=90), False, id="compound"),
        pytest.param("0", None, False, id="zero"),
        pytest.param("0s", None, False, id="zero-seconds"),
        pytest.param("-5s", None, True, id="negative"),
        pytest.param("300", None, True, id="no-unit"),
        pytest.param("1d", None, True, id="day-unit"),
    ],
)
def test_resolve_gang_waiting_time(raw: str | None, expected: timedelta | None, warns: bool) -> None:
    resolved = gang.resolve_gang_waiting_time(raw)
    assert resolved.value == expected
    assert (resolved.warning is not None) is warns


def test_parse_gang_waiting_time_rejects() -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        gang.parse_gang_waiting_time("10 minutes")
    assert caught.value.key == gang.ANNOTATION_GANG_WAIT_TIME


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            '["namespaceA/podGroupA", "namespaceB/podGroupB"]',
            ["namespaceA/podGroupA", "namespaceB/podGroupB"],
            id="v0.7-notes",
        ),
        pytest.param(
            '["default/llm-master", "default/llm-worker"]',
            ["default/llm-master", "default/llm-worker"],
            id="two",
        ),
        pytest.param("[]", [], id="empty-list"),
    ],
)
def test_parse_gang_groups(raw: str, expected: list[str]) -> None:
    assert gang.parse_gang_groups(raw) == expected


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param(
            '["a/b", "c"]', "[1]: a gang group member must be written as namespace/name", id="no-slash"
        ),
        pytest.param('["a/b/c"]', "namespace/name (got 'a/b/c')", id="two-slashes"),
        pytest.param('["/b"]', "namespace/name", id="empty-namespace"),
        pytest.param('["a/"]', "namespace/name", id="empty-name"),
        pytest.param('"a/b"', "valid array", id="not-a-list"),
        pytest.param("[1]", "[0]: Input should be a valid string", id="not-strings"),
        pytest.param("namespaceA/podGroupA", "malformed JSON", id="bare-string"),
    ],
)
def test_parse_gang_groups_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        gang.parse_gang_groups(raw)
    assert caught.value.key == gang.ANNOTATION_GANG_GROUPS
    assert fragment in caught.value.problem


def test_get_gang_groups() -> None:
    assert gang.get_gang_groups(None) is None
    assert gang.get_gang_groups({gang.ANNOTATION_GANG_GROUPS: ""}) is None
    assert gang.get_gang_groups({gang.ANNOTATION_GANG_GROUPS: '["a/b"]'}) == ["a/b"]


def test_gang_ids() -> None:
    assert gang.gang_id("default", "job") == "default/job"
    assert gang.gang_group_id(["ns/b", "ns/a"]) == "ns/a,ns/b"


@pytest.mark.parametrize(("raw", "expected"), [("0", 0), ("7", 7), ("-1", -1)])
def test_parse_network_topology_index(raw: str, expected: int) -> None:
    assert gang.parse_network_topology_index(raw) == expected
    assert gang.get_network_topology_index({gang.ANNOTATION_GANG_NETWORK_TOPOLOGY_INDEX: raw}) == expected


@pytest.mark.parametrize("raw", ["", "rank-1", "1.0"])
def test_parse_network_topology_index_rejects(raw: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        gang.parse_network_topology_index(raw)
    assert caught.value.key == gang.ANNOTATION_GANG_NETWORK_TOPOLOGY_INDEX


def test_get_network_topology_index_absent() -> None:
    assert gang.get_network_topology_index({}) is None
