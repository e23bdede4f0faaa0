"""ClusterColocationProfile pod mutation: matching, order, probability, every field, the resource
conversion and the extended-resource-spec annotation (algorithms.md 10.6, with the 10.8 fixes)."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from apis.config.clustercolocationprofile import ClusterColocationProfile
from apis.core import PriorityClass
from operators.logic import colocation_profile as ccp
from operators.logic.strategic_merge import PatchError

BATCH_CPU, BATCH_MEMORY = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
MID_CPU, MID_MEMORY = "kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"
SPEC_KEY = "node.koordinator.sh/extended-resource-spec"
CLASSES = {
    "koord-batch": PriorityClass.model_validate(
        {"metadata": {"name": "koord-batch"}, "value": 5000, "preemptionPolicy": "PreemptLowerPriority"}
    ),
    "koord-mid": PriorityClass.model_validate({"metadata": {"name": "koord-mid"}, "value": 7000}),
    "koord-prod": PriorityClass.model_validate(
        {"metadata": {"name": "koord-prod"}, "value": 9000, "preemptionPolicy": "Never"}
    ),
}


def profile(name: str, **spec: Any) -> ClusterColocationProfile:
    return ClusterColocationProfile.model_validate({"metadata": {"name": name}, "spec": spec})


def pod(
    labels: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = dict(requests)
    if limits is not None:
        resources["limits"] = dict(limits)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": dict(labels or {}), "uid": "u1"},
        "spec": {"containers": [{"name": "worker", "image": "busybox", "resources": resources}], **spec},
        "status": {"phase": "Pending"},
    }


def run(
    the_pod: dict[str, Any],
    profiles: list[ClusterColocationProfile],
    namespace_labels: dict[str, str] | None = None,
    dice: ccp.Dice = lambda: 0,
) -> dict[str, Any]:
    """The webhook's pipeline: match, roll, mutate."""
    matched = ccp.matching(profiles, the_pod["metadata"].get("labels") or {}, namespace_labels or {})
    return ccp.mutate(the_pod, ccp.rolled(matched, dice), CLASSES)


# ---- matching ------------------------------------------------------------------------------------

SELECTOR_CASES = [
    pytest.param(None, {}, True, id="absent-matches-all"),
    pytest.param({}, {}, True, id="empty-matches-all"),
    pytest.param({"matchLabels": {"app-type": "batch"}}, {"app-type": "batch"}, True, id="match-labels"),
    pytest.param(
        {"matchLabels": {"app-type": "batch"}}, {"app-type": "web"}, False, id="match-labels-differ"
    ),
    pytest.param(
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
        {"tier": "b"},
        True,
        id="in",
    ),
    pytest.param(
        {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]},
        {},
        True,
        id="not-in-absent",
    ),
    pytest.param(
        {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True, id="exists"
    ),
    pytest.param(
        {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
        {"tier": "x"},
        False,
        id="does-not-exist",
    ),
    # Selectors that cannot be evaluated match nothing (Koordinator: everything).
    pytest.param(
        {"matchExpressions": [{"key": "tier", "operator": "Near", "values": ["a"]}]},
        {"tier": "a"},
        False,
        id="unknown-operator",
    ),
    pytest.param(
        {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": []}]},
        {},
        False,
        id="not-in-without-values",
    ),
    pytest.param(
        {"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["a"]}]},
        {"tier": "a"},
        False,
        id="exists-with-values",
    ),
    pytest.param({"matchLabels": {"bad key!": "x"}}, {"bad key!": "x"}, False, id="invalid-key"),
]


@pytest.mark.parametrize(("selector", "labels", "expected"), SELECTOR_CASES)
def test_the_pod_selector(selector: dict[str, Any] | None, labels: dict[str, str], expected: bool) -> None:
    assert bool(ccp.matching([profile("a", selector=selector)], labels, {})) is expected


@pytest.mark.parametrize(("selector", "labels", "expected"), SELECTOR_CASES)
def test_the_namespace_selector(
    selector: dict[str, Any] | None, labels: dict[str, str], expected: bool
) -> None:
    assert bool(ccp.matching([profile("a", namespaceSelector=selector)], {}, labels)) is expected


def test_a_namespace_whose_labels_could_not_be_read_matches_only_profiles_without_namespace_selector() -> (
    None
):
    profiles = [
        profile("any-namespace"),
        profile("labelled", namespaceSelector={"matchLabels": {"koordinator.sh/enable-colocation": "true"}}),
    ]
    assert [p.metadata.name for p in ccp.matching(profiles, {}, None)] == ["any-namespace"]


def test_matched_profiles_come_sorted_by_name_and_a_profile_without_spec_matches_nothing() -> None:
    profiles = [
        profile("b"),
        profile("c"),
        profile("a"),
        ClusterColocationProfile.model_validate({"metadata": {"name": "0"}}),
    ]
    assert [p.metadata.name for p in ccp.matching(profiles, {}, {})] == ["a", "b", "c"]


def test_both_selectors_must_match() -> None:
    both = profile(
        "p",
        namespaceSelector={"matchLabels": {"colo": "true"}},
        selector={"matchLabels": {"app-type": "batch"}},
    )
    assert ccp.matching([both], {"app-type": "batch"}, {"colo": "true"})
    assert not ccp.matching([both], {"app-type": "batch"}, {"colo": "false"})
    assert not ccp.matching([both], {"app-type": "web"}, {"colo": "true"})


# ---- probability ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, 100), (0, 0), (37, 37), ("37%", 37), (100, 100), ("150%", 150)],
    ids=["unset", "0", "int", "percent", "100", "over-100"],
)
def test_probability_parses_as_a_percentage(value: int | str | None, expected: int) -> None:
    assert ccp.parse_probability(value) == expected


@pytest.mark.parametrize("value", ["37", "x%", "-5%", -1, "1.5%", "٣%"], ids=str)
def test_a_probability_that_is_no_percentage_is_an_error_naming_the_field(value: int | str) -> None:
    with pytest.raises(ValueError, match=r"spec\.probability"):
        ccp.parse_probability(value)


@pytest.mark.parametrize("chance", [0, 1, 37, 50, 99, 100])
def test_n_percent_applies_for_exactly_n_of_the_hundred_rolls(chance: int) -> None:
    """The off-by-one fixed: Koordinator skips only when rand.Intn(100) > N, i.e. N+1 in 100."""
    p = profile("p", probability=f"{chance}%")
    applied = sum(bool(ccp.rolled([p], lambda r=roll: r)) for roll in range(100))  # type: ignore[misc]
    assert applied == chance


def test_probability_with_a_seeded_generator() -> None:
    always, never, third = profile("a"), profile("b", probability=0), profile("c", probability="30%")

    def applied(seed: int) -> list[list[ClusterColocationProfile]]:
        rng = random.Random(seed)
        return [ccp.rolled([always, never, third], lambda: rng.randrange(100)) for _ in range(2000)]

    rolls = applied(20261125)
    assert all(always in r and never not in r for r in rolls)
    thirds = sum(third in r for r in rolls)
    assert 540 < thirds < 660, thirds  # 600 expected; the seed makes the count the same every run
    assert rolls == applied(20261125)


def test_profiles_of_probability_100_or_unset_roll_no_dice() -> None:
    def dice() -> int:
        raise AssertionError("no roll needed")

    assert (
        len(ccp.rolled([profile("a"), profile("b", probability=100), profile("c", probability="200%")], dice))
        == 3
    )


def test_a_profile_that_loses_its_roll_changes_nothing_not_even_the_resources() -> None:
    """Koordinator converts the resources once a profile matched, dice or not (10.8)."""
    the_pod = pod({"app-type": "batch"}, requests={"cpu": "1", "memory": "1Gi"}, priority=5000)
    p = profile("p", probability="10%", labels={"x": "y"})
    assert run(the_pod, [p], dice=lambda: 10) == the_pod
    assert run(the_pod, [p], dice=lambda: 9)["metadata"]["labels"]["x"] == "y"


# ---- fields --------------------------------------------------------------------------------------


def test_the_quick_start_profile() -> None:
    """The v1.7 Batch Colocation quick start's profile on its Job's pod."""
    quick_start = profile(
        "batch-workload-profile",
        namespaceSelector={"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        selector={"matchLabels": {"app-type": "batch"}},
        qosClass="BE",
        priorityClassName="koord-batch",
        schedulerName="koord-scheduler",
        labels={"koordinator.sh/mutated": "true"},
    )
    the_pod = pod(
        {"app-type": "batch"},
        requests={"cpu": "2", "memory": "4Gi"},
        limits={"cpu": "2", "memory": "4Gi"},
        schedulerName="default-scheduler",
        priority=0,
    )
    out = run(the_pod, [quick_start], {"koordinator.sh/enable-colocation": "true"})
    assert out["metadata"]["labels"] == {
        "app-type": "batch",
        "koordinator.sh/mutated": "true",
        "koordinator.sh/qosClass": "BE",
    }
    assert out["spec"]["schedulerName"] == "koord-scheduler"
    assert (out["spec"]["priorityClassName"], out["spec"]["priority"]) == ("koord-batch", 5000)
    assert out["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    batch = {BATCH_CPU: "2000", BATCH_MEMORY: "4Gi"}
    assert out["spec"]["containers"][0]["resources"] == {"requests": batch, "limits": batch}
    assert json.loads(out["metadata"]["annotations"][SPEC_KEY]) == {
        "containers": {"worker": {"requests": batch, "limits": batch}}
    }
    # Everything else is the pod as it came.
    assert out["status"] == the_pod["status"]
    assert out["metadata"]["uid"] == "u1"
    assert out["spec"]["containers"][0]["image"] == "busybox"
    assert the_pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2", "memory": "4Gi"}


def test_labels_and_annotations_are_set_over_the_pods_own() -> None:
    the_pod = pod({"a": "pod", "keep": "1"})
    the_pod["metadata"]["annotations"] = {"n": "pod"}
    out = run(the_pod, [profile("p", labels={"a": "profile"}, annotations={"n": "profile", "m": "2"})])
    assert out["metadata"]["labels"] == {"a": "profile", "keep": "1"}
    assert out["metadata"]["annotations"] == {"n": "profile", "m": "2"}


def test_key_mappings_copy_values_and_an_absent_key_gives_an_empty_value() -> None:
    the_pod = pod({"team": "search", "b": "old-b"})
    the_pod["metadata"]["annotations"] = {"owner": "alice"}
    out = run(
        the_pod,
        [
            profile(
                "p",
                labelKeysMapping={"team": "koordinator.sh/team", "missing": "copied", "b": "c", "a": "b"},
                annotationKeysMapping={"owner": "koordinator.sh/owner"},
            )
        ],
    )
    labels = out["metadata"]["labels"]
    assert labels["koordinator.sh/team"] == "search"
    assert labels["copied"] == ""
    # Read from the labels before the step: c gets b's old value, b gets a's (absent).
    assert (labels["c"], labels["b"]) == ("old-b", "")
    assert out["metadata"]["annotations"]["koordinator.sh/owner"] == "alice"


def test_label_suffixes_extend_existing_labels_only() -> None:
    out = run(pod({"app": "web"}), [profile("p", labelSuffixes={"app": "-colocated", "absent": "-x"})])
    assert out["metadata"]["labels"] == {"app": "web-colocated"}


def test_koordinator_priority_and_qos_class_become_labels() -> None:
    out = run(pod(), [profile("p", qosClass="LS", koordinatorPriority=1111)])
    assert out["metadata"]["labels"] == {"koordinator.sh/qosClass": "LS", "koordinator.sh/priority": "1111"}


def test_the_priority_class_brings_its_value_and_preemption_policy() -> None:
    out = run(
        pod(priorityClassName="x", priority=1, preemptionPolicy="PreemptLowerPriority"),
        [profile("p", priorityClassName="koord-prod")],
    )
    assert (out["spec"]["priorityClassName"], out["spec"]["priority"], out["spec"]["preemptionPolicy"]) == (
        "koord-prod",
        9000,
        "Never",
    )


def test_a_missing_priority_class_refuses_the_pod_naming_profile_and_class() -> None:
    with pytest.raises(
        ccp.MissingPriorityClass, match=r"'p' sets priorityClassName 'koord-gone'.*no PriorityClass"
    ):
        run(pod(), [profile("p", priorityClassName="koord-gone")])


def test_later_profiles_overwrite_earlier_ones_in_name_order() -> None:
    profiles = [
        profile("b-second", schedulerName="second", labels={"x": "b"}, qosClass="BE"),
        profile("a-first", schedulerName="first", labels={"x": "a", "only-a": "1"}, qosClass="LS"),
    ]
    out = run(pod(), profiles)
    assert out["spec"]["schedulerName"] == "second"
    assert out["metadata"]["labels"] == {"x": "b", "only-a": "1", "koordinator.sh/qosClass": "BE"}


def test_the_patch_comes_last_as_a_strategic_merge_patch() -> None:
    the_pod = pod({"a": "1"}, requests={"cpu": "1"}, tolerations=[{"key": "old"}])
    the_pod["spec"]["containers"].append({"name": "sidecar", "image": "envoy"})
    patch = {
        "metadata": {"labels": {"a": None, "patched": "yes"}},
        "spec": {
            "schedulerName": "from-patch",
            "tolerations": [{"key": "batch", "operator": "Exists"}],
            "containers": [{"name": "worker", "env": [{"name": "MODE", "value": "batch"}]}],
        },
    }
    out = run(the_pod, [profile("p", schedulerName="from-field", labels={"patched": "no"}, patch=patch)])
    assert out["metadata"]["labels"] == {"patched": "yes"}
    assert out["spec"]["schedulerName"] == "from-patch"
    assert out["spec"]["tolerations"] == [{"key": "batch", "operator": "Exists"}]  # lists replace
    worker, sidecar = out["spec"]["containers"]
    assert worker["env"] == [{"name": "MODE", "value": "batch"}]
    assert worker["image"] == "busybox"
    assert sidecar == {"name": "sidecar", "image": "envoy"}


def test_a_patch_that_does_not_fit_the_pod_refuses_it_naming_the_profile() -> None:
    with pytest.raises(PatchError, match=r"'p': spec\.patch: spec\.containers: the patch has an object"):
        run(pod(), [profile("p", patch={"spec": {"containers": {"name": "x"}}})])


# ---- resources -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requests", "limits", "want_requests", "want_limits"),
    [
        pytest.param({"cpu": "500m"}, None, {BATCH_CPU: "500"}, None, id="500m-is-500"),
        pytest.param(
            {"cpu": "1.5"}, {"cpu": "2"}, {BATCH_CPU: "1500"}, {BATCH_CPU: "2000"}, id="1.5-is-1500"
        ),
        pytest.param({"cpu": "0.0001"}, None, {BATCH_CPU: "1"}, None, id="a-fraction-of-a-milli-rounds-up"),
        pytest.param(
            {"memory": "1536Mi", "ephemeral-storage": "1Gi"},
            None,
            {BATCH_MEMORY: "1536Mi", "ephemeral-storage": "1Gi"},
            None,
            id="memory-same-quantity-others-stay",
        ),
        pytest.param(
            None,
            {"cpu": "3", "memory": "2Gi"},
            {BATCH_CPU: "3000", BATCH_MEMORY: "2Gi"},
            {BATCH_CPU: "3000", BATCH_MEMORY: "2Gi"},
            id="only-limits-request-equals-limit",
        ),
        pytest.param(
            {"cpu": "1"},
            {"cpu": "2", "memory": "1Gi"},
            {BATCH_CPU: "1000", BATCH_MEMORY: "1Gi"},
            {BATCH_CPU: "2000", BATCH_MEMORY: "1Gi"},
            id="limit-above-request-kept",
        ),
    ],
)
def test_batch_conversion_is_exact(
    requests: dict[str, str] | None,
    limits: dict[str, str] | None,
    want_requests: dict[str, str] | None,
    want_limits: dict[str, str] | None,
) -> None:
    out = run(pod(requests=requests, limits=limits), [profile("p", priorityClassName="koord-batch")])
    resources = out["spec"]["containers"][0]["resources"]
    assert resources.get("requests") == want_requests
    assert resources.get("limits") == want_limits


def test_init_containers_and_overhead_are_converted_but_only_regular_containers_are_in_the_annotation() -> (
    None
):
    the_pod = pod(requests={"cpu": "250m"}, overhead={"cpu": "100m", "memory": "64Mi"})
    the_pod["spec"]["initContainers"] = [
        {"name": "init", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
    ]
    out = run(the_pod, [profile("p", priorityClassName="koord-batch")])
    assert out["spec"]["initContainers"][0]["resources"] == {
        "limits": {BATCH_CPU: "1000", BATCH_MEMORY: "1Gi"},
        "requests": {BATCH_CPU: "1000", BATCH_MEMORY: "1Gi"},
    }
    assert out["spec"]["overhead"] == {BATCH_CPU: "100", BATCH_MEMORY: "64Mi"}
    assert json.loads(out["metadata"]["annotations"][SPEC_KEY]) == {
        "containers": {"worker": {"requests": {BATCH_CPU: "250"}}}
    }


def test_mid_pods_get_mid_resources_and_no_extended_resource_spec() -> None:
    out = run(pod(requests={"cpu": "2", "memory": "1Gi"}), [profile("p", priorityClassName="koord-mid")])
    assert out["spec"]["containers"][0]["resources"]["requests"] == {MID_CPU: "2000", MID_MEMORY: "1Gi"}
    assert SPEC_KEY not in (out["metadata"].get("annotations") or {})


@pytest.mark.parametrize(
    ("profile_spec", "pod_spec"),
    [
        pytest.param({"priorityClassName": "koord-prod"}, {}, id="prod"),
        pytest.param({"qosClass": "BE"}, {}, id="qos-BE-without-a-batch-priority"),
        pytest.param({"labels": {"x": "y"}}, {"priority": 3500}, id="koord-free"),
    ],
)
def test_other_classes_keep_cpu_and_memory(profile_spec: dict[str, Any], pod_spec: dict[str, Any]) -> None:
    out = run(pod(requests={"cpu": "1", "memory": "1Gi"}, **pod_spec), [profile("p", **profile_spec)])
    assert out["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert SPEC_KEY not in (out["metadata"].get("annotations") or {})


def test_the_priority_class_label_decides_too() -> None:
    out = run(
        pod(requests={"cpu": "1"}), [profile("p", labels={"koordinator.sh/priority-class": "koord-batch"})]
    )
    assert out["spec"]["containers"][0]["resources"]["requests"] == {BATCH_CPU: "1000"}


@pytest.mark.parametrize("where", ["annotations", "labels"])
def test_skip_update_resources_keeps_cpu_and_memory(where: str) -> None:
    skip = {"config.koordinator.sh/skip-update-resources": "true"}
    p = ClusterColocationProfile.model_validate(
        {"metadata": {"name": "p", where: skip}, "spec": {"priorityClassName": "koord-batch"}}
    )
    out = run(pod(requests={"cpu": "1"}), [p])
    assert out["spec"]["priority"] == 5000
    assert out["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert SPEC_KEY not in (out["metadata"].get("annotations") or {})


def test_a_pod_matching_no_profile_is_returned_unchanged() -> None:
    the_pod = pod({"app-type": "web"}, requests={"cpu": "1"}, priority=5000)
    before = copy.deepcopy(the_pod)
    profiles = [
        profile("p", selector={"matchLabels": {"app-type": "batch"}}, priorityClassName="koord-batch")
    ]
    assert ccp.matching(profiles, the_pod["metadata"]["labels"], {}) == []
    assert run(the_pod, profiles) == before


def test_an_unchanged_extended_resource_spec_is_left_as_the_pod_wrote_it() -> None:
    the_pod = pod(requests={BATCH_CPU: "1000"}, priority=5000)
    the_pod["metadata"]["annotations"] = {
        SPEC_KEY: '{"containers": {"worker": {"requests": {"kubernetes.io/batch-cpu": "1000"}}}}'
    }
    out = run(the_pod, [profile("p", labels={"x": "y"})])
    assert out["metadata"]["annotations"][SPEC_KEY] == the_pod["metadata"]["annotations"][SPEC_KEY]


# ---- admission -----------------------------------------------------------------------------------


def test_validate_names_every_unusable_field() -> None:
    bad = profile(
        "bad",
        namespaceSelector={"matchExpressions": [{"key": "a", "operator": "In"}]},
        selector={"matchExpressions": [{"key": "b", "operator": "Sometimes", "values": ["x"]}]},
        probability="half",
        patch={"spec": {"$retainKeys": ["containers"]}},
    )
    assert ccp.validate(bad) == [
        "spec.namespaceSelector.matchExpressions[0].values: must be non-empty for operator In",
        "spec.selector.matchExpressions[0].operator: 'Sometimes' is not In, NotIn, Exists or DoesNotExist",
        "spec.probability: 'half' is neither an integer nor a percentage like '50%'",
        "spec.patch.spec.$retainKeys: the $retainKeys directive is not supported",
    ]
    assert ccp.validate(profile("ok", probability="50%", selector={"matchLabels": {"a": "b"}})) == []
