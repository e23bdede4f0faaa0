"""Which PersistentVolume each unbound WaitForFirstConsumer claim would take on each node, and
whether the claims left over can be provisioned there: kube-scheduler's ``FindPodVolumes`` for an
array of node rows at once.

Per claim, the node-independent part of ``FindMatchingVolume`` (claimRef, size, volume mode,
deletion, phase, selector, class, access modes) runs once over the class's volumes; what is left
is each candidate's node-affinity mask. Claims are matched smallest request first, each taking the
smallest candidate (the first listed among equals) that its node allows and that an earlier claim
did not take on that node, exactly as the per-node loop does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from apis.meta import NodeSelectorRequirement, NodeSelectorTerm
from apis.storage import (
    ANN_SELECTED_NODE,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    claim_class,
    volume_class,
)
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.snapshot import Snapshot
from scheduler.plugins.helper.node_selector import NodeSelectorMatcher
from scheduler.plugins.helper.storage import volume_node_mask

__all__ = ["NOT_SUPPORTED_PROVISIONER", "Match", "bound_to", "claim_request", "match_claims"]

NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"


def claim_request(claim: PersistentVolumeClaim) -> Fraction:
    requests = claim.spec.resources.requests if claim.spec.resources else None
    quantity = (requests or {}).get("storage")
    return quantity.as_fraction() if quantity is not None else Fraction(0)


def _capacity(volume: PersistentVolume) -> Fraction:
    quantity = (volume.spec.capacity or {}).get("storage")
    return quantity.as_fraction() if quantity is not None else Fraction(0)


def bound_to(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """``IsVolumeBoundToClaim``: the claimRef names the claim (and its uid, when it has one)."""
    ref = volume.spec.claim_ref
    if ref is None or ref.name != claim.metadata.name or ref.namespace != claim.metadata.namespace:
        return False
    return not ref.uid or ref.uid == claim.metadata.uid


def _candidates(
    claim: PersistentVolumeClaim, volumes: Sequence[PersistentVolume]
) -> tuple[PersistentVolume | None, list[PersistentVolume]]:
    """(the volume pre-bound to the claim, else None; the unbound volumes that fit it, smallest first)."""
    requested = claim_request(claim)
    mode = claim.spec.volume_mode or "Filesystem"
    wanted_class = claim_class(claim)
    modes = set(claim.spec.access_modes or ())
    found: list[PersistentVolume] = []
    for volume in volumes:
        if volume.spec.claim_ref is not None and not bound_to(volume, claim):
            continue
        if _capacity(volume) < requested or (volume.spec.volume_mode or "Filesystem") != mode:
            continue
        if volume.metadata.deletion_timestamp is not None:
            continue
        if bound_to(volume, claim):
            return volume, []
        if volume.status.phase != "Available":
            continue
        if claim.spec.selector is not None and not claim.spec.selector.matches(volume.metadata.labels or {}):
            continue
        if volume_class(volume) != wanted_class or not modes <= set(volume.spec.access_modes or ()):
            continue
        found.append(volume)
    found.sort(key=_capacity)  # stable: the first listed wins among equal sizes
    return None, found


def _topology_mask(storage_class: StorageClass, snapshot: Snapshot, size: int) -> BoolArray:
    """``MatchTopologySelectorTerms``: no terms match every node; else any term, all its labels."""
    terms = storage_class.allowed_topologies or []
    if not terms:
        return np.ones(size, dtype=np.bool_)
    selector_terms = [
        NodeSelectorTerm(
            match_expressions=[
                NodeSelectorRequirement(key=e.key, operator="In", values=list(e.values))
                for e in term.match_label_expressions or ()
            ]
        )
        for term in terms
    ]
    return NodeSelectorMatcher.of(selector_terms).mask(snapshot, size)


@dataclass(slots=True)
class Match:
    """``FindPodVolumes`` for the unbound delayed claims over some rows (arrays aligned with them)."""

    satisfied: BoolArray
    """Every claim has a volume or can be provisioned (else: "didn't find available persistent volumes")."""
    chosen: list[tuple[PersistentVolumeClaim, list[PersistentVolume], IntArray]]
    """Per claim: its candidates and, per row, the index of the one it takes (-1: provision it)."""
    error: str | None = None


def match_claims(
    claims: Sequence[PersistentVolumeClaim],
    volumes_by_class: Mapping[str, Sequence[PersistentVolume]],
    classes: Mapping[str, StorageClass],
    snapshot: Snapshot,
    rows: IntArray,
) -> Match:
    size = snapshot.table.row_count
    n = rows.size
    satisfied = np.ones(n, dtype=np.bool_)
    names = np.asarray([snapshot.table.names[r] for r in rows.tolist()], dtype=object)
    to_match: list[PersistentVolumeClaim] = []
    provision: list[tuple[PersistentVolumeClaim, BoolArray]] = []
    for claim in claims:
        selected = (claim.metadata.annotations or {}).get(ANN_SELECTED_NODE)
        if selected is None:
            to_match.append(claim)
        else:  # being provisioned for one node already
            on_it = names == selected
            satisfied &= on_it
            provision.append((claim, on_it))
    chosen: list[tuple[PersistentVolumeClaim, list[PersistentVolume], IntArray]] = []
    taken: dict[str, BoolArray] = {}
    none = np.zeros(n, dtype=np.bool_)
    for claim in sorted(to_match, key=claim_request):
        prebound, candidates = _candidates(claim, volumes_by_class.get(claim_class(claim), ()))
        if prebound is not None:
            candidates = [prebound]
        pick = np.full(n, -1, dtype=np.int64)
        if candidates:
            allowed = np.stack(
                [
                    volume_node_mask(v, snapshot, size)[rows] & ~taken.get(v.metadata.name or "", none)
                    for v in candidates
                ]
            )
            has = allowed.any(axis=0)
            pick = np.where(has, allowed.argmax(axis=0), -1)
            for i, volume in enumerate(candidates):
                name = volume.metadata.name or ""
                taken[name] = taken.get(name, none) | (pick == i)
        chosen.append((claim, candidates, pick))
        provision.append((claim, pick < 0))
    for claim, needed in provision:
        if not needed.any():
            continue
        class_name = claim_class(claim)
        key = f"{claim.metadata.namespace}/{claim.metadata.name}"
        if not class_name:
            return Match(satisfied, chosen, f'no class for claim "{key}"')
        storage_class = classes.get(class_name)
        if storage_class is None:
            return Match(satisfied, chosen, f'failed to find storage class "{class_name}"')
        if storage_class.provisioner in ("", NOT_SUPPORTED_PROVISIONER):
            satisfied &= ~needed
        else:
            satisfied &= ~needed | _topology_mask(storage_class, snapshot, size)[rows]
    return Match(satisfied, chosen)
