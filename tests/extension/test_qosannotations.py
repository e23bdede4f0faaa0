from __future__ import annotations

import pytest

from apis.errors import InvalidAnnotation
from apis.extension import qosannotations as q


def test_keys() -> None:
    assert q.ANNOTATION_RESCTRL == "node.koordinator.sh/resctrl"
    assert q.ANNOTATION_POD_CPU_QOS == "koordinator.sh/cpuQOS"
    assert q.ANNOTATION_POD_MEMORY_QOS == "koordinator.sh/memoryQOS"
    assert q.ANNOTATION_OOM_SCORE_ADJ == "koordinator.sh/oom-score-adj"
    assert q.ANNOTATION_OOM_SCORE_ADJ_SPEC == "koordinator.sh/oom-score-adj-spec"
    assert q.LABEL_POD_EVICT_ENABLED == "koordinator.sh/eviction-enabled"
    assert q.ANNOTATION_POD_EVICTION_PRIORITY == "koordinator.sh/eviction-priority"
    assert q.LABEL_CORE_SCHED_GROUP_ID == "koordinator.sh/core-sched-group-id"
    assert (
        q.ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO == "node.koordinator.sh/resource-amplification-ratio"
    )
    assert q.ANNOTATION_NODE_THIRD_PARTY_ALLOCATIONS == "node.koordinator.sh/thirdPartyAllocations"
    assert (q.LABEL_MANAGED_BY, q.MANAGED_BY_KOORDINATOR) == ("app.kubernetes.io/managed-by", "Koordinator")


def test_resctrl_v16_release_notes() -> None:
    config = q.parse_resctrl('{"llc": {"schemata": {"range": [0, 30]}}, "mb": {"schemata": {"percent": 20}}}')
    assert config.llc is not None
    assert config.llc.schemata is not None
    assert config.llc.schemata.range == [0, 30]
    assert config.mb is not None
    assert config.mb.schemata is not None
    assert config.mb.schemata.percent == 20


def test_resctrl_per_cache() -> None:
    config = q.parse_resctrl(
        '{"llc": {"schemataPerCache": [{"cacheID": 0, "range": [0, 50]},'
        ' {"cacheID": 1, "range": [50, 100]}]}}'
    )
    assert config.llc is not None
    assert config.llc.schemata_per_cache is not None
    assert [(c.cache_id, c.range) for c in config.llc.schemata_per_cache] == [(0, [0, 50]), (1, [50, 100])]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param('{"llc": {"schemata": {"range": "0-30"}}}', "llc.schemata.range", id="range-string"),
        pytest.param('{"mb": {"schemata": {"percent": "20%"}}}', "mb.schemata.percent", id="percent-string"),
        pytest.param(
            '{"llc": {"schemataPerCache": [{"cacheID": "a"}]}}', "llc.schemataPerCache[0].cacheID", id="cache"
        ),
        pytest.param('{"llc": [0, 30]}', "llc", id="llc-list"),
    ],
)
def test_resctrl_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        q.parse_resctrl(raw)
    assert caught.value.key == q.ANNOTATION_RESCTRL
    assert fragment in caught.value.problem


@pytest.mark.parametrize(
    ("raw", "group_identity"),
    [
        pytest.param('{"groupIdentity": 1}', 1, id="v1.6-notes"),
        pytest.param('{"groupIdentity": -1}', -1, id="min"),
        pytest.param('{"groupIdentity": 2, "enable": true}', 2, id="max"),
        pytest.param("{}", None, id="empty"),
    ],
)
def test_cpu_qos(raw: str, group_identity: int | None) -> None:
    assert q.parse_cpu_qos(raw).group_identity == group_identity


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param(
            '{"groupIdentity": 3}', "groupIdentity: Input should be less than or equal to 2", id="too-big"
        ),
        pytest.param('{"groupIdentity": -2}', "groupIdentity", id="too-small"),
        pytest.param('{"groupIdentity": "1"}', "groupIdentity", id="string"),
        pytest.param('{"enable": "true"}', "enable", id="enable-string"),
    ],
)
def test_cpu_qos_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        q.parse_cpu_qos(raw)
    assert caught.value.key == q.ANNOTATION_POD_CPU_QOS
    assert fragment in caught.value.problem


@pytest.mark.parametrize(("raw", "expected"), [("-1000", -1000), ("0", 0), ("1000", 1000), ("500", 500)])
def test_oom_score_adj(raw: str, expected: int) -> None:
    assert q.parse_oom_score_adj(raw) == expected
    assert q.get_oom_score_adj({q.ANNOTATION_OOM_SCORE_ADJ: raw}) == expected


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("1001", "within [-1000, 1000]"),
        ("-1001", "within [-1000, 1000]"),
        ("high", "not a valid"),
        ("", "not a valid"),
    ],
)
def test_oom_score_adj_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        q.parse_oom_score_adj(raw)
    assert caught.value.key == q.ANNOTATION_OOM_SCORE_ADJ
    assert fragment in caught.value.problem


def test_oom_score_adj_spec() -> None:
    assert q.parse_oom_score_adj_spec('{"container-a": -500, "container-b": 200}') == {
        "container-a": -500,
        "container-b": 200,
    }
    with pytest.raises(InvalidAnnotation) as caught:
        q.parse_oom_score_adj_spec('{"container-a": 2000}')
    assert "container-a: oom_score_adj must be within" in caught.value.problem
    with pytest.raises(InvalidAnnotation) as caught:
        q.parse_oom_score_adj_spec('{"container-a": "-500"}')
    assert caught.value.problem.startswith("container-a: ")
    assert q.get_oom_score_adj_spec({}) is None


def test_eviction_keys() -> None:
    assert q.pod_evict_enabled({q.LABEL_POD_EVICT_ENABLED: "true"})
    assert not q.pod_evict_enabled({q.LABEL_POD_EVICT_ENABLED: "True"})
    assert q.get_pod_eviction_priority({q.ANNOTATION_POD_EVICTION_PRIORITY: "-5"}) == -5
    assert q.get_pod_eviction_priority({}) == 0
    with pytest.raises(InvalidAnnotation):
        q.parse_pod_eviction_priority("2147483648")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, ""), ("none", "none"), ("exclusive", "exclusive"), ("Exclusive", ""), ("", "")],
)
def test_core_sched_policy(value: str | None, expected: str) -> None:
    labels = {} if value is None else {q.LABEL_CORE_SCHED_POLICY: value}
    assert q.core_sched_policy(labels) == expected


@pytest.mark.parametrize(("raw", "expected"), [("true", True), ("false", False), ("1", True), ("F", False)])
def test_cpu_normalization_enabled(raw: str, expected: bool) -> None:
    assert q.parse_cpu_normalization_enabled(raw) is expected


def test_cpu_normalization_enabled_rejects() -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        q.parse_cpu_normalization_enabled("enabled")
    assert caught.value.key == q.LABEL_CPU_NORMALIZATION_ENABLED


@pytest.mark.parametrize(
    "raw",
    [
        '{"mb": {"schemata": {"percent": 1000}}}',
        '{"mb": {"schemata": {"percent": -50}}}',
        '{"llc": {"schemata": {"range": [0, 200]}}}',
        '{"mb": {"schemataPerCache": [{"cacheID": -1, "percent": 20}]}}',
    ],
)
def test_resctrl_percentages_are_0_to_100_and_cache_ids_not_negative(raw: str) -> None:
    with pytest.raises(InvalidAnnotation):
        q.parse_resctrl(raw)
