"""DynamicResources: kube-scheduler's plugin for dynamic resource allocation (DRA), not built yet.

kube-scheduler v1.35 enables DynamicResources by default: a pod with ``spec.resourceClaims`` is
placed only where its ResourceClaims can be allocated (ResourceSlices, DeviceClasses), and the
allocation is written to the claims at PreBind. koord-scheduler does not allocate claims yet, so
placing such a pod anywhere would be a silent wrong placement: PreFilter refuses it instead, as
unresolvable, with a message that says so (a FailedScheduling event, ``PodScheduled=False`` and a
``koordctl explain`` answer). Claims are immutable in a pod's spec, so no event makes the pod
schedulable here; run it with kube-scheduler.
"""

from __future__ import annotations

from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import SkipReads
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import PreFilterPlugin, PreFilterResult
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status

__all__ = ["NAME", "NOT_SUPPORTED", "PLUGIN", "DynamicResources", "new"]

NAME = "DynamicResources"

NOT_SUPPORTED = (
    "pod uses dynamic resource claims (spec.resourceClaims: {claims}), "
    "which koord-scheduler cannot allocate yet; schedule it with kube-scheduler"
)


class DynamicResources(PreFilterPlugin):
    @property
    def name(self) -> str:
        return NAME

    pre_filter_skip_reads = SkipReads.SPEC
    """``SkipByClass``: PreFilter's SKIP reads only the pod's spec (its resource claims)."""

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        claims = pod.pod.spec.resource_claims
        if not claims:
            return PreFilterResult(Status.skip())
        names = ", ".join(claim.name for claim in claims)
        return PreFilterResult(Status.unresolvable(NOT_SUPPORTED.format(claims=names)))


def new(args: None, handle: Handle) -> DynamicResources:
    return DynamicResources()


PLUGIN = PluginSpec(NAME, new)
