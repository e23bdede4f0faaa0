"""``e2e.bench.startup_cpu`` decodes the backlog as listed and the app handles all of it."""

from __future__ import annotations

import json

from e2e.bench.startup_cpu import PAGE_SIZE, backlog, measure


def test_the_backlog_is_listed_in_pages_with_continue_tokens_and_server_fields() -> None:
    _, node_pages, pod_pages = backlog(nodes=3, pending=PAGE_SIZE, bound=2)
    assert len(node_pages) == 1
    first, last = (json.loads(page) for page in pod_pages)
    assert "continue" in first["metadata"]
    assert "continue" not in last["metadata"]
    assert len(first["items"]) + len(last["items"]) == PAGE_SIZE + 2
    pod = first["items"][0]
    assert "kind" not in pod
    assert pod["metadata"]["uid"]
    assert pod["spec"]["nodeName"] in {n["metadata"]["name"] for n in json.loads(node_pages[0])["items"]}
    uids = [p["metadata"]["uid"] for page in (first, last) for p in page["items"]]
    assert len(set(uids)) == len(uids)


def test_the_pods_carry_what_the_api_server_and_kwok_add() -> None:
    """The parts of a listed pod that decoding pays for though the scheduler ignores some of them."""
    _, _, pod_pages = backlog(nodes=2, pending=1, bound=1)
    on_node, pending = json.loads(pod_pages[0])["items"]
    for pod in (on_node, pending):
        (volume,) = pod["spec"]["volumes"]
        assert volume["name"].startswith("kube-api-access-")
        assert pod["spec"]["containers"][0]["volumeMounts"][0]["name"] == volume["name"]
    assert [m["manager"] for m in on_node["metadata"]["managedFields"]] == [
        "koordinator-py-bench",
        "kwok-controller",
    ]
    assert on_node["status"]["phase"] == "Running"
    assert on_node["status"]["containerStatuses"][0]["ready"] is True
    assert pending["status"] == {"phase": "Pending", "qosClass": "Burstable"}
    assert len(pending["metadata"]["managedFields"]) == 1


async def test_every_step_is_timed_and_every_object_handled() -> None:
    seconds = await measure(nodes=4, pending=12, bound=8)
    steps = {"decode nodes", "decode pods", "handle the node list", "handle the pod pages as they come"}
    assert steps | {"handle the pod list after its last page"} <= set(seconds)
    assert any("elastic_quota" in name for name in seconds)
    assert all(value >= 0 for value in seconds.values())
