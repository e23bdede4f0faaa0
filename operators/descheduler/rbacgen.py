"""Render the chart's koord-descheduler RBAC from the rules declared in code; never hand-edited.

``python -m operators.descheduler.rbacgen`` (``make rbac``) writes
``charts/koordinator-py/templates/descheduler-rbac.yaml``: ``CORE_RULES`` (the watches of
``operators.descheduler.handlers``, the MigrationController's writes, Kopf's own needs) plus every
registered plugin's ``PluginFactory.rbac``, de-duplicated in order, each with its reason as a
comment; and the Role for the leader-election Lease. ``--check`` fails when the checked-in file
differs (``tests/operators/descheduler/test_rbac.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from apis.client.rbac import PolicyRule
from apis.client.rbacchart import ChartRBAC, generate, merged_rules
from operators.descheduler.informers import WORKLOAD_KINDS
from operators.descheduler.registry import REGISTRY, PluginFactory

__all__ = ["CORE_RULES", "main", "render"]

OUTPUT = (
    Path(__file__).resolve().parents[2] / "charts" / "koordinator-py" / "templates" / "descheduler-rbac.yaml"
)

CORE_RULES = (
    PolicyRule(
        ("apiextensions.k8s.io",),
        ("customresourcedefinitions",),
        ("list", "watch"),
        why="Kopf discovers the served resources and follows CRDs being added or removed.",
    ),
    PolicyRule(("",), ("pods", "nodes"), ("list", "watch"), why="Informers: pods by node and owner, nodes."),
    PolicyRule(
        ("slo.koordinator.sh",),
        ("nodemetrics",),
        ("list", "watch"),
        why="Informer: node usage for policy plugins.",
    ),
    PolicyRule(
        tuple(sorted({k.group for k in WORKLOAD_KINDS})),
        tuple(sorted({k.plural for k in WORKLOAD_KINDS})),
        ("list", "watch"),
        why="Informers: the workloads whose replicas bound maxMigrating/maxUnavailable.",
    ),
    PolicyRule(
        ("*",),
        ("*/scale",),
        ("get",),
        why="Replicas of any other controller, through its /scale subresource.",
    ),
    PolicyRule(
        ("scheduling.koordinator.sh",),
        ("podmigrationjobs",),
        ("list", "watch", "get", "create", "patch", "delete"),
        why="The MigrationController creates, arbitrates, reconciles and scavenges PodMigrationJobs.",
    ),
    PolicyRule(
        ("scheduling.koordinator.sh",),
        ("podmigrationjobs/status",),
        ("patch",),
        why="Phase, conditions and reasons of a PodMigrationJob.",
    ),
    PolicyRule(
        ("scheduling.koordinator.sh",),
        ("reservations",),
        ("list", "watch", "get", "create", "delete"),
        why="ReservationFirst: the replacement's Reservation, deleted with its job.",
    ),
    PolicyRule(("",), ("pods/eviction",), ("create",), why="evictionPolicy Eviction: the Eviction API."),
    PolicyRule(("",), ("pods",), ("delete",), why="evictionPolicy Delete."),
    PolicyRule(("",), ("pods",), ("patch",), why="evictionPolicy SoftEviction marks the pod."),
    PolicyRule(
        ("", "events.k8s.io"),
        ("events",),
        ("create", "patch"),
        why="Evicted events on pods, plugins' events, Kopf's warnings.",
    ),
)

CHART = ChartRBAC(
    component="koord-descheduler",
    label="descheduler",
    values_key="descheduler",
    generator="python -m operators.descheduler.rbacgen",
    source="CORE_RULES, then each plugin's rbac (operators/descheduler/registry.py)",
)


def rules(registry: Mapping[str, PluginFactory] = REGISTRY) -> list[tuple[str, PolicyRule]]:
    """(who needs it, rule): the core's, then each plugin's by name, without repeats."""
    return merged_rules([("core", CORE_RULES), *((name, factory.rbac) for name, factory in registry.items())])


def render(registry: Mapping[str, PluginFactory] = REGISTRY) -> str:
    return CHART.render(rules(registry))


def main(argv: list[str] | None = None) -> int:
    return generate("python -m operators.descheduler.rbacgen", __doc__.splitlines()[0], OUTPUT, render, argv)


if __name__ == "__main__":
    sys.exit(main())
