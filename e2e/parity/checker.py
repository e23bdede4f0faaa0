"""An independent check of a cluster's placements against the pods' hard scheduling constraints.

Written from the Kubernetes API's documented semantics, not from koord-scheduler's plugins, so
that it judges both schedulers the same way: it must pass on every kube-scheduler placement (the
parity test asserts that) and is then trusted on koord-scheduler's. It reads the final state (the
bound pods and the nodes) and checks what that state must show if every pod was placed by a
scheduler that honoured the constraints when it placed it:

- **node**: ``nodeSelector``, required node affinity (``matchExpressions`` and ``matchFields``),
  untolerated ``NoSchedule``/``NoExecute`` taints, ``spec.unschedulable``;
- **resources**: the requests of the pods on a node (init containers and overhead included) within
  its allocatable, and at most ``pods`` of them;
- **host ports**: no two pods on a node claim the same protocol and port on overlapping host IPs
  (an empty IP or ``0.0.0.0`` overlaps every IP);
- **anti-affinity**: no two pods where one's required anti-affinity term selects the other share
  the term's topology domain (this covers both directions: the incoming pod's terms and the
  existing pods');
- **affinity**: a pod with required affinity shares each term's domain with another pod the term
  selects. The one exception is kube-scheduler's: a pod that matches its own terms may start a
  series when nothing matches them yet; so per term, at most one domain may hold only such pods
  and no pod of an earlier step (``step_of``) may match the pod's terms anywhere;
- **volumes**: a bound pod's PersistentVolumeClaims exist and are bound (kube-scheduler binds a
  WaitForFirstConsumer claim before the pod), to a volume whose ``nodeAffinity`` admits the node;
- **spread (DoNotSchedule)**: for pods sharing a constraint (same namespace, key, selector, skew,
  minDomains, policies and node selection), in each domain holding only such pods, the count is at
  most the minimum over the eligible domains plus ``maxSkew`` (the minimum is 0 while there are
  fewer domains than ``minDomains``), and the pod's node carries the key.

The final state cannot show the order of placements within a step, so the affinity and spread
rules are the invariants that every valid order leaves behind; they miss a violation only when a
later valid placement could have produced the same state. Preferred terms and ScheduleAnyway
spreads are not hard: ``soft_scores`` measures them for the report.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from apis.core import Container, Node, NodeSelector, Pod, PodAffinityTerm, TopologySpreadConstraint
from apis.meta import LabelSelector, NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration
from apis.quantity import Quantity
from e2e.parity.volumes import PersistentVolume, PersistentVolumeClaim

__all__ = ["Violation", "bound_pods", "check", "soft_scores"]

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
WILDCARD_IP = "0.0.0.0"


@dataclass(frozen=True, order=True)
class Violation:
    constraint: str
    pod: str
    """``namespace/name``."""
    node: str
    detail: str

    def __str__(self) -> str:
        return f"{self.constraint}: {self.pod} on {self.node}: {self.detail}"


def key(pod: Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


def bound_pods(pods: Iterable[Pod]) -> list[Pod]:
    """Pods on a node that still hold it: not finished, not being deleted."""
    return [
        p
        for p in pods
        if p.spec.node_name
        and p.metadata.deletion_timestamp is None
        and p.status.phase not in ("Succeeded", "Failed")
    ]


def check(
    pods: Sequence[Pod],
    nodes: Sequence[Node],
    *,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    step_of: Mapping[str, int] | None = None,
    claims: Sequence[PersistentVolumeClaim] = (),
    volumes: Sequence[PersistentVolume] = (),
) -> list[Violation]:
    """Every hard-constraint violation among the bound ``pods`` (sorted).

    ``namespace_labels``: labels of each namespace, for terms with a ``namespaceSelector``.
    ``claims``, ``volumes``: the PersistentVolumeClaims and PersistentVolumes, for pods that use them.
    ``step_of``: ``namespace/name`` -> the step that created the pod; pods of a step were created
    only after every pod of the earlier steps was bound or found unschedulable.
    """
    view = _View(bound_pods(pods), nodes, namespace_labels or {}, step_of or {})
    found: list[Violation] = []
    for pod in view.pods:
        found.extend(_node_violations(pod, view.node_of(pod)))
    found.extend(_resource_violations(view))
    found.extend(_port_violations(view))
    found.extend(_anti_affinity_violations(view))
    found.extend(_affinity_violations(view))
    found.extend(_spread_violations(view))
    found.extend(_volume_violations(view, claims, volumes))
    return sorted(set(found))


def soft_scores(pods: Sequence[Pod], nodes: Sequence[Node]) -> dict[str, float]:
    """How well the soft constraints came out: the share of preferred (anti-)affinity weight
    satisfied (1.0: all), and the largest skew of a ScheduleAnyway spread (count over domains)."""
    view = _View(bound_pods(pods), nodes, {}, {})
    scores: dict[str, float] = {}
    total = satisfied = 0
    for pod in view.pods:
        affinity = pod.spec.affinity
        for terms, anti in (
            (affinity and affinity.pod_affinity, False),
            (affinity and affinity.pod_anti_affinity, True),
        ):
            for weighted in (terms and terms.preferred_during_scheduling_ignored_during_execution) or ():
                total += weighted.weight
                others = view.matches_in_domain(pod, weighted.pod_affinity_term)
                if (not others) if anti else bool(others):
                    satisfied += weighted.weight
    if total:
        scores["preferred weight satisfied"] = round(satisfied / total, 3)
    skews = [
        max(counts.values()) - min(counts.values())
        for pod in view.pods
        for c in pod.spec.topology_spread_constraints or ()
        if c.when_unsatisfiable == "ScheduleAnyway"
        and (counts := {d: len(ps) for d, ps in view.spread_domains(pod, c).items()})
    ]
    if skews:
        scores["ScheduleAnyway max skew"] = float(max(skews))
    return scores


class _View:
    """The bound pods indexed by node, and the questions the rules ask of them."""

    def __init__(
        self,
        pods: list[Pod],
        nodes: Sequence[Node],
        namespace_labels: Mapping[str, Mapping[str, str]],
        step_of: Mapping[str, int],
    ) -> None:
        self.nodes = {n.metadata.name or "": n for n in nodes}
        self.pods = [p for p in pods if p.spec.node_name in self.nodes]
        self.namespace_labels = namespace_labels
        self.step_of = step_of

    def node_of(self, pod: Pod) -> Node:
        return self.nodes[pod.spec.node_name or ""]

    def label(self, pod: Pod, topology_key: str) -> str | None:
        return (self.node_of(pod).metadata.labels or {}).get(topology_key)

    def term_selects(self, owner: Pod, term: PodAffinityTerm, candidate: Pod) -> bool:
        if candidate.metadata.namespace not in self.term_namespaces(owner, term, candidate):
            return False
        labels = candidate.metadata.labels or {}
        if not _selects(term.label_selector, labels):
            return False
        own = owner.metadata.labels or {}
        for k in term.match_label_keys or ():
            if k in own and labels.get(k) != own[k]:
                return False
        return all(not (k in own and labels.get(k) == own[k]) for k in term.mismatch_label_keys or ())

    def term_namespaces(self, owner: Pod, term: PodAffinityTerm, candidate: Pod) -> set[str | None]:
        if not term.namespaces and term.namespace_selector is None:
            return {owner.metadata.namespace}
        chosen: set[str | None] = set(term.namespaces or ())
        ns = candidate.metadata.namespace or ""
        if term.namespace_selector is not None and _selects(
            term.namespace_selector, self.namespace_labels.get(ns, {})
        ):
            chosen.add(ns)
        return chosen

    def matches_in_domain(self, owner: Pod, term: PodAffinityTerm) -> list[Pod]:
        """The other pods ``term`` selects in ``owner``'s domain of the term's key."""
        domain = self.label(owner, term.topology_key)
        if domain is None:
            return []
        return [
            p
            for p in self.pods
            if p is not owner
            and self.label(p, term.topology_key) == domain
            and self.term_selects(owner, term, p)
        ]

    def eligible_nodes(self, pod: Pod, constraint: TopologySpreadConstraint) -> list[Node]:
        """The nodes whose domains a spread constraint of ``pod`` counts (PodTopologySpread's
        nodeAffinityPolicy, nodeTaintsPolicy, and every constraint's key present)."""
        keys = [c.topology_key for c in pod.spec.topology_spread_constraints or ()]
        eligible = []
        for node in self.nodes.values():
            labels = node.metadata.labels or {}
            if not all(k in labels for k in keys):
                continue
            if constraint.node_affinity_policy != "Ignore" and not _node_selection_ok(pod, node):
                continue
            if constraint.node_taints_policy == "Honor" and _untolerated(pod, node):
                continue
            eligible.append(node)
        return eligible

    def spread_domains(self, pod: Pod, constraint: TopologySpreadConstraint) -> dict[str, list[Pod]]:
        """The pods the constraint selects, per domain of its eligible nodes (empty domains too)."""
        eligible = {n.metadata.name: n for n in self.eligible_nodes(pod, constraint)}
        domains: dict[str, list[Pod]] = {
            (n.metadata.labels or {})[constraint.topology_key]: [] for n in eligible.values()
        }
        own = pod.metadata.labels or {}
        for other in self.pods:
            labels = other.metadata.labels or {}
            if other.spec.node_name not in eligible or other.metadata.namespace != pod.metadata.namespace:
                continue
            if not _selects(constraint.label_selector, labels):
                continue
            if any(k in own and labels.get(k) != own[k] for k in constraint.match_label_keys or ()):
                continue
            domains[self.label(other, constraint.topology_key) or ""].append(other)
        return domains


def _selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector: null selects nothing, empty selects everything."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.match_labels or {}).items()):
        return False
    for req in selector.match_expressions or ():
        present, values = req.key in labels, req.values or []
        ok = {
            "In": present and labels.get(req.key) in values,
            "NotIn": not present or labels.get(req.key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(req.operator, False)
        if not ok:
            return False
    return True


def _requirement_holds(req: NodeSelectorRequirement, value: str | None) -> bool:
    values = req.values or []
    if req.operator == "In":
        return value is not None and value in values
    if req.operator == "NotIn":
        return value is None or value not in values
    if req.operator == "Exists":
        return value is not None
    if req.operator == "DoesNotExist":
        return value is None
    if req.operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if req.operator == "Gt" else have < bound
    return False


def _term_holds(term: NodeSelectorTerm, node: Node) -> bool:
    """A node selector term: every requirement holds; a term without requirements selects nothing."""
    if not term.match_expressions and not term.match_fields:
        return False
    labels = node.metadata.labels or {}
    fields = {"metadata.name": node.metadata.name}
    return all(_requirement_holds(r, labels.get(r.key)) for r in term.match_expressions or ()) and all(
        _requirement_holds(r, fields.get(r.key)) for r in term.match_fields or ()
    )


def _node_selection_problem(pod: Pod, node: Node) -> str | None:
    labels = node.metadata.labels or {}
    for k, v in (pod.spec.node_selector or {}).items():
        if labels.get(k) != v:
            return f"nodeSelector {k}={v}, node has {k}={labels.get(k)!r}"
    node_affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
    required = node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    if required is not None and not _selector_holds(required, node):
        return "no term of the required node affinity holds"
    return None


def _selector_holds(selector: NodeSelector, node: Node) -> bool:
    """A node selector: its terms are ORed."""
    return any(_term_holds(t, node) for t in selector.node_selector_terms)


def _node_selection_ok(pod: Pod, node: Node) -> bool:
    return _node_selection_problem(pod, node) is None


def _tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    operator = toleration.operator or "Equal"
    if toleration.key:
        if toleration.key != taint.key:
            return False
    elif operator != "Exists":
        return False
    return operator == "Exists" or (toleration.value or "") == (taint.value or "")


def _untolerated(pod: Pod, node: Node) -> list[Taint]:
    taints = [t for t in node.spec.taints or () if t.effect in ("NoSchedule", "NoExecute")]
    if node.spec.unschedulable:
        taints.append(Taint(key=UNSCHEDULABLE_TAINT, effect="NoSchedule"))
    return [t for t in taints if not any(_tolerates(tol, t) for tol in pod.spec.tolerations or ())]


def _node_violations(pod: Pod, node: Node) -> list[Violation]:
    where = (key(pod), node.metadata.name or "")
    found = []
    problem = _node_selection_problem(pod, node)
    if problem is not None:
        found.append(Violation("node-selection", *where, problem))
    for taint in _untolerated(pod, node):
        found.append(
            Violation("taint", *where, f"untolerated {taint.key}={taint.value or ''}:{taint.effect}")
        )
    return found


def _requests(pod: Pod) -> dict[str, Quantity]:
    """What the pod holds on its node: containers (and sidecars) summed, or the largest init
    container if more, plus the overhead."""

    def add(into: dict[str, Quantity], containers: Iterable[Container]) -> None:
        for c in containers:
            for name, amount in ((c.resources and c.resources.requests) or {}).items():
                into[name] = into.get(name, Quantity.from_int(0)) + amount

    inits = pod.spec.init_containers or []
    total: dict[str, Quantity] = {}
    add(total, [*pod.spec.containers, *(c for c in inits if c.restart_policy == "Always")])
    for init in inits:
        if init.restart_policy == "Always":
            continue
        single: dict[str, Quantity] = {}
        add(single, [init])
        for name, amount in single.items():
            if total.get(name, Quantity.from_int(0)) < amount:
                total[name] = amount
    for name, amount in (pod.spec.overhead or {}).items():
        total[name] = total.get(name, Quantity.from_int(0)) + amount
    return total


def _resource_violations(view: _View) -> list[Violation]:
    used: dict[str, dict[str, Quantity]] = defaultdict(dict)
    last: dict[str, Pod] = {}
    for pod in view.pods:
        node = pod.spec.node_name or ""
        totals = used[node]
        totals["pods"] = totals.get("pods", Quantity.from_int(0)) + Quantity.from_int(1)
        for name, amount in _requests(pod).items():
            totals[name] = totals.get(name, Quantity.from_int(0)) + amount
        last[node] = pod
    found = []
    for node_name, totals in used.items():
        allocatable = view.nodes[node_name].status.allocatable or {}
        for name, amount in sorted(totals.items()):
            limit = allocatable.get(name, Quantity.from_int(0))
            if limit < amount:
                detail = f"{name} requested {amount} > allocatable {limit}"
                found.append(Violation("resources", key(last[node_name]), node_name, detail))
    return found


def _host_ports(pod: Pod) -> list[tuple[str, str, int]]:
    containers = [
        *pod.spec.containers,
        *(c for c in pod.spec.init_containers or () if c.restart_policy == "Always"),
    ]
    return [
        (p.host_ip or WILDCARD_IP, p.protocol or "TCP", p.host_port)
        for c in containers
        for p in c.ports or ()
        if p.host_port
    ]


def _port_violations(view: _View) -> list[Violation]:
    claims: dict[str, list[tuple[Pod, tuple[str, str, int]]]] = defaultdict(list)
    for pod in view.pods:
        claims[pod.spec.node_name or ""].extend((pod, port) for port in _host_ports(pod))
    found = []
    for node, held in claims.items():
        for i, (pod, (ip, protocol, port)) in enumerate(held):
            for other, (other_ip, other_protocol, other_port) in held[:i]:
                if other is pod or (protocol, port) != (other_protocol, other_port):
                    continue
                if WILDCARD_IP in (ip, other_ip) or ip == other_ip:
                    detail = f"{ip}:{port}/{protocol} conflicts with {key(other)}'s {other_ip}:{port}"
                    found.append(Violation("host-port", key(pod), node, detail))
    return found


def _required(pod: Pod, anti: bool) -> list[PodAffinityTerm]:
    affinity = pod.spec.affinity
    terms = affinity and (affinity.pod_anti_affinity if anti else affinity.pod_affinity)
    return list((terms and terms.required_during_scheduling_ignored_during_execution) or ())


def _anti_affinity_violations(view: _View) -> list[Violation]:
    found = []
    for pod in view.pods:
        for term in _required(pod, anti=True):
            for other in view.matches_in_domain(pod, term):
                domain = f"{term.topology_key}={view.label(pod, term.topology_key)}"
                detail = f"shares {domain} with {key(other)}, which its anti-affinity term selects"
                found.append(Violation("anti-affinity", key(pod), pod.spec.node_name or "", detail))
    return found


def _term_identity(owner: Pod, term: PodAffinityTerm) -> str:
    own = owner.metadata.labels or {}
    return json.dumps(
        [
            owner.metadata.namespace,
            term.model_dump(mode="json", by_alias=True, exclude_none=True),
            {k: own.get(k) for k in [*(term.match_label_keys or ()), *(term.mismatch_label_keys or ())]},
        ],
        sort_keys=True,
    )


def _affinity_violations(view: _View) -> list[Violation]:
    found: list[Violation] = []
    # term identity -> domain -> the pods there that may have started a series (kube-scheduler's
    # exception for the first pod of pods with affinity to themselves)
    series: dict[str, dict[str, list[Pod]]] = defaultdict(lambda: defaultdict(list))
    for pod in view.pods:
        terms = _required(pod, anti=False)
        if not terms:
            continue
        where = (key(pod), pod.spec.node_name or "")
        missing = [t.topology_key for t in terms if view.label(pod, t.topology_key) is None]
        if missing:
            found.append(Violation("affinity", *where, f"node lacks topology label(s) {', '.join(missing)}"))
            continue
        step = view.step_of.get(key(pod), 0)
        earlier = any(
            view.step_of.get(key(other), 0) < step and view.term_selects(pod, t, other)
            for t in terms
            for other in view.pods
        )
        may_start = not earlier and all(view.term_selects(pod, t, pod) for t in terms)
        for term in terms:
            domain = view.label(pod, term.topology_key) or ""
            if may_start:
                series[_term_identity(pod, term)][domain].append(pod)
            elif not view.matches_in_domain(pod, term):
                detail = f"no pod its affinity term selects in {term.topology_key}={domain}"
                found.append(Violation("affinity", *where, detail))
    for identity, domains in series.items():
        owner = next(iter(domains.values()))[0]
        term = next(t for t in _required(owner, anti=False) if _term_identity(owner, t) == identity)
        started = {}
        for domain, starters in domains.items():
            anchors = [
                p
                for p in view.pods
                if view.label(p, term.topology_key) == domain
                and view.term_selects(owner, term, p)
                and p not in starters
            ]
            if not anchors:
                started[domain] = starters
        if len(started) > 1:
            names = "; ".join(f"{d}: {', '.join(key(p) for p in ps)}" for d, ps in sorted(started.items()))
            detail = (
                f"pods matching their own affinity term started {len(started)} separate "
                f"{term.topology_key} domains ({names}); only the first of a series may"
            )
            for ps in started.values():
                for p in ps:
                    found.append(Violation("affinity", key(p), p.spec.node_name or "", detail))
    return found


def _spread_identity(pod: Pod, constraint: TopologySpreadConstraint) -> str:
    node_affinity = pod.spec.affinity and pod.spec.affinity.node_affinity
    return json.dumps(
        [
            pod.metadata.namespace,
            constraint.model_dump(mode="json", by_alias=True, exclude_none=True),
            {k: (pod.metadata.labels or {}).get(k) for k in constraint.match_label_keys or ()},
            pod.spec.node_selector or {},
            node_affinity.model_dump(mode="json", by_alias=True, exclude_none=True)
            if node_affinity
            else None,
            sorted(c.topology_key for c in pod.spec.topology_spread_constraints or ()),
        ],
        sort_keys=True,
    )


def _spread_violations(view: _View) -> list[Violation]:
    found: list[Violation] = []
    groups: dict[str, list[tuple[Pod, TopologySpreadConstraint]]] = defaultdict(list)
    for pod in view.pods:
        for constraint in pod.spec.topology_spread_constraints or ():
            if constraint.when_unsatisfiable != "DoNotSchedule":
                continue
            if view.label(pod, constraint.topology_key) is None:
                detail = f"node lacks the spread constraint's key {constraint.topology_key}"
                found.append(Violation("spread", key(pod), pod.spec.node_name or "", detail))
                continue
            groups[_spread_identity(pod, constraint)].append((pod, constraint))
    for members in groups.values():
        pod, constraint = members[0]
        member_pods = {id(p) for p, _ in members}
        domains = view.spread_domains(pod, constraint)
        if not domains:
            continue
        counts = {d: len(ps) for d, ps in domains.items()}
        floor = 0 if len(counts) < (constraint.min_domains or 1) else min(counts.values())
        for domain, in_domain in sorted(domains.items()):
            skew = len(in_domain) - floor
            if skew <= constraint.max_skew:
                continue
            if any(id(p) not in member_pods for p in in_domain):
                continue  # pods without the constraint may have come last: no invariant to check
            detail = (
                f"{constraint.topology_key}={domain} holds {len(in_domain)} selected pods, the minimum "
                f"over {len(counts)} eligible domains counts {floor}: skew {skew} > maxSkew "
                f"{constraint.max_skew}"
                + (f" (minDomains {constraint.min_domains})" if constraint.min_domains else "")
            )
            found.extend(Violation("spread", key(p), p.spec.node_name or "", detail) for p in in_domain)
    return found


def _volume_violations(
    view: _View, claims: Sequence[PersistentVolumeClaim], volumes: Sequence[PersistentVolume]
) -> list[Violation]:
    by_claim = {(c.metadata.namespace, c.metadata.name): c for c in claims}
    by_volume = {v.metadata.name: v for v in volumes}
    found = []
    for pod in view.pods:
        where = (key(pod), pod.spec.node_name or "")
        for volume in pod.spec.volumes or ():
            source = volume.persistent_volume_claim
            if source is None:
                continue
            claim = by_claim.get((pod.metadata.namespace, source.claim_name))
            if claim is None:
                found.append(Violation("volume", *where, f"claim {source.claim_name} does not exist"))
                continue
            bound = by_volume.get(claim.spec.volume_name or "")
            if bound is None:
                found.append(
                    Violation("volume", *where, f"claim {source.claim_name} is not bound to a volume")
                )
                continue
            affinity = bound.spec.node_affinity.required if bound.spec.node_affinity else None
            if affinity is not None and not _selector_holds(affinity, view.node_of(pod)):
                detail = f"claim {source.claim_name}'s volume {bound.metadata.name} does not admit the node"
                found.append(Violation("volume", *where, detail))
    return found
