"""Pods for scenario tests, applied and read back in process (tests poll).

``apply`` sends what ``kubectl apply --server-side`` would, over the in-process client: a kubectl
process per batch cost a Go start, discovery and a GET and a PATCH per object, and the scenarios
applied hundreds of batches. The tests that are about what a user types still run kubectl.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from apis.extension.device import transform_deprecated_device_resources
from apis.quantity import Quantity
from e2e.cluster.controlplane import ControlPlane
from e2e.cluster.rest import ApiError

__all__ = [
    "ApplyError",
    "apply",
    "bound",
    "get_object",
    "list_items",
    "make_pod",
    "node_overcommit",
    "pods",
    "present",
    "wait_for",
]

T = TypeVar("T")


def make_pod(
    name: str,
    namespace: str,
    *,
    cpu: str = "500m",
    memory: str = "512Mi",
    extra: Mapping[str, str] | None = None,
    scheduler: str = "koord-scheduler",
    node_selector: Mapping[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory, **(extra or {})}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": requests}}
        ],
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = tolerations
    if priority_class:
        spec["priorityClassName"] = priority_class
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


class ApplyError(RuntimeError):
    """Some objects were not applied (the others were, as with kubectl); one line each."""


def apply(cp: ControlPlane, objects: Iterable[Mapping[str, Any]]) -> None:
    """Server-side apply each object; every failure is reported together at the end."""
    failed: list[str] = []
    for obj in objects:
        try:
            cp.rest.apply(dict(obj))
        except (ApiError, OSError) as exc:
            failed.append(f"{obj['kind']} {obj['metadata']['name']}: {exc}")
    if failed:
        raise ApplyError("\n".join(failed))


def pods(cp: ControlPlane, namespace: str | None = None, selector: str = "") -> list[dict[str, Any]]:
    """The pods of ``namespace`` (every namespace if None) matching the label ``selector``, read in
    process: tests poll this."""
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    if selector:
        path += f"?labelSelector={selector}"
    items: list[dict[str, Any]] = cp.get_json(path)["items"]
    return items


def bound(cp: ControlPlane, namespace: str, *, include_deleting: bool = True) -> dict[str, str]:
    """Pod name -> node of the bound pods of ``namespace`` (without those being deleted when
    ``include_deleting`` is False: a preempted victim keeps its node until it is gone)."""
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in pods(cp, namespace)
        if p["spec"].get("nodeName") and (include_deleting or not p["metadata"].get("deletionTimestamp"))
    }


def present(cp: ControlPlane, namespace: str) -> set[str]:
    """The names of the pods of ``namespace`` that are not being deleted."""
    return {p["metadata"]["name"] for p in pods(cp, namespace) if not p["metadata"].get("deletionTimestamp")}


def get_object(
    cp: ControlPlane, resource: str, name: str = "", *, namespace: str | None = "default"
) -> dict[str, Any]:
    """What ``kubectl get RESOURCE [NAME] [-n NAMESPACE] -o json`` prints, read in process
    (``ControlPlane.read``): the object, or the list without a name (``namespace=None``: every
    namespace, as ``-A``); a missing object raises, as kubectl fails."""
    found = cp.read(resource, name, namespace=namespace)
    if found is None:
        raise LookupError(f'{resource} "{name}" not found')
    return found


def list_items(
    cp: ControlPlane,
    resource: str,
    *,
    namespace: str | None = "default",
    selector: str = "",
    field_selector: str = "",
) -> list[dict[str, Any]]:
    """The items of ``kubectl get RESOURCE [-n NAMESPACE] [-l SELECTOR] [--field-selector
    FIELD_SELECTOR] -o json``, read in process (``namespace=None``: every namespace, as ``-A``)."""
    listed = cp.read(resource, namespace=namespace, selector=selector, field_selector=field_selector)
    assert listed is not None  # only a read by name is None
    items: list[dict[str, Any]] = listed["items"]
    return items


def wait_for(check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.5) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def node_overcommit(cp: ControlPlane) -> list[str]:
    """Nodes whose bound, non-terminal pods request more than the node's allocatable."""
    nodes = cp.get_json("/api/v1/nodes")["items"]
    used: dict[str, dict[str, Quantity]] = {}
    for pod in pods(cp):
        node = pod["spec"].get("nodeName")
        if not node or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        total = used.setdefault(node, {"pods": Quantity.parse(0)})
        total["pods"] = total["pods"] + Quantity.parse(1)
        for container in pod["spec"]["containers"]:
            requests = container.get("resources", {}).get("requests") or {}
            # The deprecated kubernetes.io/ device names count as the koordinator.sh/ ones that
            # node allocatable carries, as koord-scheduler reads them.
            for resource, amount in transform_deprecated_device_resources(requests).items():
                total[resource] = total.get(resource, Quantity.parse(0)) + Quantity.parse(amount)
    problems = []
    for node in nodes:
        name = node["metadata"]["name"]
        allocatable = {k: Quantity.parse(v) for k, v in (node["status"].get("allocatable") or {}).items()}
        for resource, amount in used.get(name, {}).items():
            if amount > allocatable.get(resource, Quantity.parse(0)):
                problems.append(f"{name}: {resource} {amount} > {allocatable.get(resource)}")
    return problems


def failed_scheduling(cp: ControlPlane, namespace: str, *names: str) -> list[str]:
    """The messages of the FailedScheduling events of the pods ``names``, oldest first (one list
    of the namespace's events)."""
    events = cp.get_json(f"/api/v1/namespaces/{namespace}/events")["items"]
    return [
        str(e.get("message") or e.get("note") or "")
        for e in events
        if e.get("reason") == "FailedScheduling" and e["involvedObject"]["name"] in names
    ]
