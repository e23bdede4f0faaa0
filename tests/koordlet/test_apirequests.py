"""koordlet_kube_api_requests_total's labels: the Kubernetes verb and resource of each request."""

from __future__ import annotations

import pytest

from koordlet.apirequests import request_labels
from koordlet.metrics import KoordletMetrics


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/pods", [("fieldSelector", "spec.nodeName=n1")], ("list", "pods")),
        ("GET", "/api/v1/pods", [("watch", "true")], ("watch", "pods")),
        ("GET", "/api/v1/nodes/n1", [], ("get", "nodes")),
        ("GET", "/apis/slo.koordinator.sh/v1alpha1/nodeslos", [("watch", True)], ("watch", "nodeslos")),
        (
            "PUT",
            "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/n1/status",
            [],
            ("update", "nodemetrics/status"),
        ),
        ("POST", "/api/v1/namespaces/default/pods/p/eviction", [], ("create", "pods/eviction")),
        ("POST", "/api/v1/namespaces/default/events", [], ("create", "events")),
        ("GET", "/api/v1/namespaces/default/pods/p", None, ("get", "pods")),
        ("GET", "/api/v1/namespaces", None, ("list", "namespaces")),
        (
            "PATCH",
            "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies/n1",
            [],
            ("patch", "noderesourcetopologies"),
        ),
        ("DELETE", "/api/v1/namespaces/default/pods/p", [], ("delete", "pods")),
    ],
)
def test_request_labels(
    method: str, path: str, query: list[tuple[str, object]] | None, expected: tuple[str, str]
) -> None:
    assert request_labels(method, path, query) == expected


def test_the_counter_is_exposed_under_koordinators_name() -> None:
    metrics = KoordletMetrics()
    metrics.api_request("watch", "pods")
    metrics.api_request("watch", "pods")
    exposition = metrics.exposition().decode()
    assert 'koordlet_kube_api_requests_total{resource="pods",verb="watch"} 2.0' in exposition
