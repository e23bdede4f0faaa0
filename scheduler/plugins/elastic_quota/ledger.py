"""Which pod charges which quota, and the per-quota sums the quota trees start from.

Every pod the scheduler should count is a ``Charge``: pods assigned to a node (by anyone) count in
request and used; pending pods of this scheduler count in request only (what the quota asks for);
finished pods count nowhere. Reserve marks a pod assigned before the API server knows it
(``reserved``), Unreserve takes that back. Non-preemptible pods (label
``quota.scheduling.koordinator.sh/preemptible: "false"``) also count in the non-preemptible sums.

The sums are kept incrementally, so a pod event costs O(resources of the pod).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from apis.extension import gang as gang_ext
from apis.extension import quota as quota_ext
from apis.extension.colocation import transform_deprecated_batch_resources
from apis.extension.device import transform_deprecated_device_resources
from apis.resources import to_int_units
from scheduler.cache.pod_info import PodInfo
from scheduler.quota import Usage

__all__ = ["Charge", "Ledger", "RequestsOf", "gang_key", "pod_requests", "requests_without_overhead"]


def gang_key(pod: PodInfo) -> str | None:
    """``namespace/name`` of the pod's gang, from the same labels and annotation Coscheduling reads
    (PodGroup label, lightweight label, gang annotation); None for a plain pod."""
    name = (
        pod.labels.get(gang_ext.LABEL_POD_GROUP)
        or pod.labels.get(gang_ext.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_NAME)
        or pod.annotations.get(gang_ext.ANNOTATION_GANG_NAME)
    )
    return gang_ext.gang_id(pod.namespace, name) if name else None


@dataclass(slots=True)
class Charge:
    pod: PodInfo
    quota: str
    assigned: bool
    """On a node (bound, or reserved by this scheduler)."""
    reserved: bool = False
    """Assigned by our Reserve, not yet seen bound."""
    non_preemptible: bool = field(init=False)
    gang: str | None = field(init=False)
    """Both read from the pod's labels once: a pod is booked and unbooked several times per cycle."""

    def __post_init__(self) -> None:
        self.non_preemptible = not quota_ext.is_preemptible(self.pod.labels)
        self.gang = gang_key(self.pod)


@dataclass
class _Sums:
    request: dict[str, int] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    np_request: dict[str, int] = field(default_factory=dict)
    np_used: dict[str, int] = field(default_factory=dict)


def _add(into: dict[str, int], amounts: Mapping[str, int], sign: int) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, 0) + sign * amount


RequestsOf = Callable[[PodInfo], Mapping[str, int]]
"""What a pod charges its quota (its requests; without its overhead under
``ElasticQuotaIgnorePodOverhead``)."""


def pod_requests(pod: PodInfo) -> Mapping[str, int]:
    return pod.requests


def requests_without_overhead(pod: PodInfo) -> Mapping[str, int]:
    """Koordinator's ``PodRequests`` with ``ExcludeOverhead`` (``ElasticQuotaIgnorePodOverhead``)."""
    overhead = pod.pod.spec.overhead
    if not overhead:
        return pod.requests
    out = dict(pod.requests)
    renamed = transform_deprecated_batch_resources(transform_deprecated_device_resources(overhead))
    for name, quantity in renamed.items():
        if name in out:
            out[name] = max(out[name] - to_int_units(name, quantity), 0)
    return {name: amount for name, amount in out.items() if amount}


def _apply(sums: _Sums, charge: Charge, sign: int, requests_of: RequestsOf) -> None:
    requests = requests_of(charge.pod)
    _add(sums.request, requests, sign)
    if charge.assigned:
        _add(sums.used, requests, sign)
    if charge.non_preemptible:
        _add(sums.np_request, requests, sign)
        if charge.assigned:
            _add(sums.np_used, requests, sign)


class Ledger:
    def __init__(self, scheduler_name: str, requests_of: RequestsOf = pod_requests) -> None:
        self.scheduler_name = scheduler_name
        self.requests_of = requests_of
        self._charges: dict[str, Charge] = {}
        self._by_quota: dict[str, dict[str, Charge]] = {}
        self._by_gang: dict[tuple[str, str], dict[str, Charge]] = {}
        self._sums: dict[str, _Sums] = {}
        self._changed: set[str] = set()
        self.version = 0

    # ---- bookkeeping -------------------------------------------------------------------------

    def _book(self, charge: Charge, sign: int) -> None:
        sums = self._sums.get(charge.quota)
        if sums is None:  # not setdefault: a _Sums is four dicts, made for nothing once the quota has one
            sums = self._sums[charge.quota] = _Sums()
        _apply(sums, charge, sign, self.requests_of)
        self._changed.add(charge.quota)
        self.version += 1

    def drain_changed(self) -> set[str]:
        """The quotas whose sums changed since the last call."""
        changed, self._changed = self._changed, set()
        return changed

    def _put(self, charge: Charge) -> None:
        old = self._charges.get(charge.pod.uid)
        if old is not None and self._same_sums(old, charge):
            self._swap(old, charge)
            return
        self.remove(charge.pod.uid)
        self._charges[charge.pod.uid] = charge
        self._by_quota.setdefault(charge.quota, {})[charge.pod.uid] = charge
        gang = charge.gang
        if gang is not None:
            self._by_gang.setdefault((charge.quota, gang), {})[charge.pod.uid] = charge
        self._book(charge, +1)

    def _same_sums(self, old: Charge, new: Charge) -> bool:
        """Whether ``new`` counts in the same sums as ``old`` but perhaps ``used``: the same
        quota, gang, preemptibility and requests (a pod reserved, bound, or seen again)."""
        return (
            old.quota == new.quota
            and old.gang == new.gang
            and old.non_preemptible == new.non_preemptible
            and self.requests_of(old.pod) == self.requests_of(new.pod)
        )

    def _swap(self, old: Charge, new: Charge) -> None:
        """``remove(old)`` then ``_put(new)`` for charges of ``_same_sums``: only ``used`` (and
        the non-preemptible used) moves, when the pod went on or off a node."""
        uid = new.pod.uid
        self._charges[uid] = new
        self._by_quota[new.quota][uid] = new
        if new.gang is not None:
            self._by_gang[(new.quota, new.gang)][uid] = new
        if old.assigned != new.assigned:
            sums = self._sums[new.quota]
            requests = self.requests_of(new.pod)
            sign = 1 if new.assigned else -1
            _add(sums.used, requests, sign)
            if new.non_preemptible:
                _add(sums.np_used, requests, sign)
        self._changed.add(new.quota)
        self.version += 1

    def remove(self, uid: str) -> Charge | None:
        charge = self._charges.pop(uid, None)
        if charge is not None:
            self._by_quota[charge.quota].pop(uid, None)
            gang = charge.gang
            if gang is not None:
                members = self._by_gang.get((charge.quota, gang), {})
                members.pop(uid, None)
                if not members:
                    self._by_gang.pop((charge.quota, gang), None)
            self._book(charge, -1)
        return charge

    # ---- informer side -----------------------------------------------------------------------

    def on_pod(self, pod: PodInfo, quota: str) -> None:
        """A pod was added or changed (or listed); ``quota`` "" (no quota, ``DisableDefaultQuota``)
        charges nothing."""
        if pod.is_terminal() or not quota:
            self.remove(pod.uid)
            return
        old = self._charges.get(pod.uid)
        reserved = old is not None and old.reserved and not pod.node_name
        if not pod.node_name and not reserved and pod.scheduler_name != self.scheduler_name:
            self.remove(pod.uid)  # pending for another scheduler: not ours to count
            return
        self._put(Charge(pod, quota, assigned=bool(pod.node_name) or reserved, reserved=reserved))

    def remap(self, quota_of: Callable[[PodInfo], str]) -> None:
        """The quotas changed: charge every pod to the quota it maps to now."""
        for charge in list(self._charges.values()):
            quota = quota_of(charge.pod)
            if not quota:
                self.remove(charge.pod.uid)
            elif quota != charge.quota:
                self._put(Charge(charge.pod, quota, charge.assigned, charge.reserved))

    def replace_requests(self, uid: str, requests: Mapping[str, int]) -> PodInfo | None:
        """Charge ``uid`` for ``requests`` from now on (a reservation an owner took room from);
        the pod as it was charged before, None when ``uid`` is not charged."""
        charge = self._charges.get(uid)
        if charge is None:
            return None
        self._put(
            Charge(
                dataclasses.replace(charge.pod, requests=dict(requests)),
                charge.quota,
                charge.assigned,
                charge.reserved,
            )
        )
        return charge.pod

    def restore(self, pod: PodInfo) -> None:
        """Charge ``pod`` (a version ``replace_requests`` returned) again, if still charged."""
        charge = self._charges.get(pod.uid)
        if charge is not None:
            self._put(Charge(pod, charge.quota, charge.assigned, charge.reserved))

    # ---- scheduler side ----------------------------------------------------------------------

    def reserve(self, pod: PodInfo, quota: str) -> None:
        self._put(Charge(pod, quota, assigned=True, reserved=True))

    def unreserve(self, pod: PodInfo, quota: str) -> None:
        old = self._charges.get(pod.uid)
        if old is None or not old.reserved:
            return  # deleted, or seen bound meanwhile: nothing of ours to undo
        self._put(Charge(pod, quota, assigned=False))

    # ---- queries -----------------------------------------------------------------------------

    def charge(self, uid: str) -> Charge | None:
        return self._charges.get(uid)

    def charges_of(self, quota: str) -> Iterator[Charge]:
        return iter(self._by_quota.get(quota, {}).values())

    def uids(self) -> list[str]:
        return list(self._charges)

    def pending_gang_members(self, quota: str, gang: str) -> list[PodInfo]:
        """The members of ``gang`` charged to ``quota`` that are not on a node yet."""
        members = self._by_gang.get((quota, gang), {}).values()
        return sorted((c.pod for c in members if not c.assigned), key=lambda p: p.key)

    def usage_without(
        self, victims: Iterable[str], extra: Iterable[tuple[PodInfo, str]] = ()
    ) -> dict[str, Usage]:
        """``usage()`` as if the ``victims`` (uids) were gone and the ``extra`` (pod, quota) pending."""
        sums = {
            q: _Sums(dict(s.request), dict(s.used), dict(s.np_request), dict(s.np_used))
            for q, s in self._sums.items()
        }
        for uid in set(victims):
            charge = self._charges.get(uid)
            if charge is not None:
                _apply(sums.setdefault(charge.quota, _Sums()), charge, -1, self.requests_of)
        for pod, quota in extra:
            if pod.uid not in self._charges:
                _apply(
                    sums.setdefault(quota, _Sums()), Charge(pod, quota, assigned=False), +1, self.requests_of
                )
        return {q: Usage(s.request, s.used, s.np_request, s.np_used) for q, s in sums.items()}

    def usage_of(self, quota: str) -> Usage:
        """One quota's sums (live views: read, do not keep)."""
        sums = self._sums.get(quota)
        if sums is None:
            return Usage()
        return Usage(sums.request, sums.used, sums.np_request, sums.np_used)

    def usage(self) -> dict[str, Usage]:
        return {
            quota: Usage(dict(s.request), dict(s.used), dict(s.np_request), dict(s.np_used))
            for quota, s in self._sums.items()
        }
