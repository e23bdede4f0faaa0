"""A pod's resource requests as Kubernetes sums them (``resourcehelper.PodRequests``), exactly.

koord-scheduler keeps its own integer-unit copy of the same rule in ``scheduler.cache.pod_info``
(range-checked, for its arrays); this one keeps the quantities exact, for what koord-manager
writes back into objects (a Reservation's ``status.allocated``) and judges at admission.
"""

from __future__ import annotations

from collections.abc import Iterable

from apis.core import Container, PodSpec
from apis.resources import ResourceList, add, max_of

__all__ = ["container_requests", "pod_requests"]


def container_requests(container: Container) -> ResourceList:
    if container.resources is None:
        return {}
    return dict(container.resources.requests or {})


def _sum(containers: Iterable[Container]) -> ResourceList:
    total: ResourceList = {}
    for container in containers:
        total = add(total, container_requests(container))
    return total


def pod_requests(spec: PodSpec) -> ResourceList:
    """What the pod occupies on a node:

    1. the regular containers plus every sidecar (an init container with ``restartPolicy: Always``);
    2. raised, per resource, to what each regular init container needs while it runs (itself plus
       the sidecars started before it);
    3. plus the pod overhead.

    Only the names some container (or the overhead) mentions appear; limits are not requests.
    """
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for init in spec.init_containers or ():
        requests = container_requests(init)
        if init.restart_policy == "Always":
            sidecars = add(sidecars, requests)
            running = sidecars
        else:
            running = add(sidecars, requests)
        init_peak = max_of(init_peak, running)
    total = max_of(add(_sum(spec.containers), sidecars), init_peak)
    return add(total, dict(spec.overhead or {}))
