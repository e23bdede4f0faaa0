"""The e2e harness's in-process client (``e2e.cluster.rest``) reads and writes what kubectl would:
the helpers and waits of every other scenario trust it instead of a kubectl process per poll."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from e2e.cluster.controlplane import ControlPlane
from e2e.workloads import ApplyError, apply, make_pod

NAMESPACE = "harness-client"


@pytest.fixture(scope="module")
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    control_plane.create_namespace(NAMESPACE)
    yield NAMESPACE
    control_plane.delete_namespace(NAMESPACE)


@pytest.mark.parametrize(
    "spelling", ["nodes", "node", "no", "Node", "elasticquotas", "eq", "elasticquota.scheduling.sigs.k8s.io"]
)
def test_read_lists_what_kubectl_get_lists_for_every_spelling(
    control_plane: ControlPlane, spelling: str
) -> None:
    cp = control_plane

    def read() -> set[tuple[str, str]]:
        items = (cp.read(spelling, namespace=None) or {})["items"]
        return {(i["metadata"].get("namespace", ""), i["metadata"]["name"]) for i in items}

    def shown() -> set[tuple[str, str]]:
        items = json.loads(cp.kubectl("get", spelling, "-A", "-o", "json"))["items"]
        return {(i["metadata"].get("namespace", ""), i["metadata"]["name"]) for i in items}

    # The set can change between the two reads (koord-manager's quotas of a namespace that an
    # earlier test deleted go a moment later): compared when it held still across both.
    for _ in range(10):
        before, by_kubectl, after = read(), shown(), read()
        if before == after:
            break
        time.sleep(1)
    assert before == after, "the set kept changing"
    assert by_kubectl == before


def test_applied_objects_read_back_and_a_missing_one_is_none(
    control_plane: ControlPlane, namespace: str
) -> None:
    cp = control_plane
    apply(cp, [make_pod("one", namespace, cpu="10m", memory="16Mi", scheduler="nobody")])
    pod = cp.read("po", "one", namespace=namespace)
    assert pod is not None
    assert pod["spec"]["schedulerName"] == "nobody"
    assert (
        json.loads(cp.kubectl("get", "pod", "one", "-n", namespace, "-o", "json"))["metadata"]["uid"]
        == (pod["metadata"]["uid"])
    )
    assert cp.read("pods", "two", namespace=namespace) is None
    listed = cp.read("pods", namespace=namespace, selector="app=nothing")
    assert listed is not None
    assert listed["items"] == []


def test_a_field_selector_reads_what_kubectl_field_selector_lists(
    control_plane: ControlPlane, namespace: str
) -> None:
    cp = control_plane
    apply(
        cp, [make_pod(name, namespace, cpu="10m", memory="16Mi", scheduler="nobody") for name in ("f1", "f2")]
    )
    for selector in ("metadata.name=f1", "metadata.name!=f1", "status.phase=Running"):
        read = cp.read("pods", namespace=namespace, field_selector=selector) or {}
        shown = json.loads(
            cp.kubectl("get", "pods", "-n", namespace, "--field-selector", selector, "-o", "json")
        )
        assert {i["metadata"]["name"] for i in read["items"]} == {
            i["metadata"]["name"] for i in shown["items"]
        }
    named = cp.read("pods", namespace=namespace, field_selector="metadata.name=f1") or {}
    assert [i["metadata"]["name"] for i in named["items"]] == ["f1"]


def test_a_refused_object_is_named_and_the_others_are_applied(
    control_plane: ControlPlane, namespace: str
) -> None:
    cp = control_plane
    bad = make_pod("bad", namespace, scheduler="nobody")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "-1"
    with pytest.raises(ApplyError, match=r"Pod bad: .*HTTP 422"):
        apply(cp, [bad, make_pod("good", namespace, cpu="10m", memory="16Mi", scheduler="nobody")])
    assert cp.read("pod", "good", namespace=namespace) is not None
    assert cp.read("pod", "bad", namespace=namespace) is None
