"""DefaultBinder: bind the pod through the backend (the pods/binding subresource).

A failed bind is a fault, not a rejection: the status is an Error naming the pod, the node and what
went wrong, so that the binder forgets the assumed pod and the pod goes to backoff.
"""

from __future__ import annotations

from apis.client.backend import PODS, BackendError, Conflict, NotFound
from apis.client.rbac import PolicyRule
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import BIND_ANNOTATIONS
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import BindPlugin, ClusterEvent
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status

__all__ = ["NAME", "PLUGIN", "RBAC", "DefaultBinder", "new"]

NAME = "DefaultBinder"
RBAC = (PolicyRule.on(PODS, "create", subresource="binding", why="Binding: the pods/binding subresource."),)


class DefaultBinder(BindPlugin):
    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent(0)  # binding never rejects a pod

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        annotations = state.get(BIND_ANNOTATIONS)
        try:
            if annotations:
                await self._handle.backend.bind(pod.pod, node, annotations=annotations)
            else:
                await self._handle.backend.bind(pod.pod, node)
        except Conflict as exc:
            return Status.error(f"binding pod {pod.key} to node {node}: conflict (already bound?): {exc}")
        except NotFound as exc:
            return Status.error(f"binding pod {pod.key} to node {node}: not found: {exc}")
        except BackendError as exc:
            status = f" (HTTP {exc.status})" if exc.status is not None else ""
            return Status.error(f"binding pod {pod.key} to node {node} failed{status}: {exc}")
        return Status.success()


def new(args: None, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle)


PLUGIN = PluginSpec(NAME, new, rbac=RBAC)
