"""A pod with DRA resource claims is refused clearly, never placed as if it had none.

kube-scheduler v1.35 allocates ``spec.resourceClaims`` (DynamicResources); koord-scheduler does not
yet, so the pod stays Pending with a FailedScheduling event and ``PodScheduled=False`` that say
so, while an ordinary pod created beside it binds.
"""

from __future__ import annotations

from e2e.cluster.controlplane import ControlPlane
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, failed_scheduling, get_object, make_pod, pods, wait_for

NAMESPACE = "dra"


def test_a_pod_with_resource_claims_is_refused_with_the_reason_and_others_still_bind(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    claimed = make_pod("gpu-claim", NAMESPACE, cpu="100m", memory="64Mi")
    claimed["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "single-gpu"}]
    claimed["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    apply(cp, [claimed, make_pod("plain", NAMESPACE, cpu="100m", memory="64Mi")])

    def node_of(name: str) -> str | None:
        found = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods(cp, NAMESPACE)}
        return found.get(name)

    wait_for(lambda: node_of("plain"), timeout=60, what="the ordinary pod bound")
    messages = wait_for(
        lambda: [m for m in failed_scheduling(cp, NAMESPACE, "gpu-claim") if "spec.resourceClaims: gpu" in m],
        timeout=60,
        what="a FailedScheduling event naming the resource claims",
    )
    assert "koord-scheduler cannot allocate yet" in messages[0]
    assert node_of("gpu-claim") is None
    status = get_object(cp, "pod", "gpu-claim", namespace=NAMESPACE)["status"]
    scheduled = [c for c in status.get("conditions", []) if c["type"] == "PodScheduled"]
    assert scheduled
    assert scheduled[0]["status"] == "False"
    assert "resourceClaims" in scheduled[0].get("message", "")
