"""Render the chart's koord-scheduler RBAC from the rules declared in code; never hand-edited.

``python -m scheduler.rbacgen`` (``make rbac``) writes
``charts/koordinator-py/templates/scheduler-rbac.yaml``: the core's rules (``CORE_RULES``: what
the informers, the loop and the events need) plus every registered plugin's ``PluginSpec.rbac``
(any plugin may be enabled by configuration), de-duplicated in order, each with its reason as a
comment. ``--check`` fails when the checked-in file differs (``tests/scheduler/test_rbac.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from apis.client.backend import PODGROUPS, PODS
from apis.client.rbac import PolicyRule
from apis.client.rbacchart import ChartRBAC, generate, merged_rules
from scheduler.framework.registry import Registry
from scheduler.plugins import DEFAULT_REGISTRY
from scheduler.whatif.priorities import PRIORITYCLASSES

__all__ = ["CORE_RULES", "main", "render", "rules"]

OUTPUT = (
    Path(__file__).resolve().parents[1] / "charts" / "koordinator-py" / "templates" / "scheduler-rbac.yaml"
)

CORE_RULES = (
    PolicyRule(
        ("",),
        ("pods", "nodes"),
        ("list", "watch"),
        why="Informers: every pod (pending ones to schedule, assigned ones to account) and every node.",
    ),
    PolicyRule.on(
        PODS, "patch", subresource="status", why="The PodScheduled condition and nominatedNodeName."
    ),
    PolicyRule.watching(
        PRIORITYCLASSES,
        why="What-if: a job's priorityClassName resolved as the API server's admission resolves it.",
    ),
    PolicyRule(
        ("", "events.k8s.io"),
        ("events",),
        ("create", "patch"),
        why="Scheduled / FailedScheduling / Preempted events.",
    ),
    PolicyRule.on(
        PODGROUPS,
        "patch",
        why="What-if advice (--whatif-advice-seconds): the PodGroup's Schedulable condition.",
    ),
)

CHART = ChartRBAC(
    component="koord-scheduler",
    label="scheduler",
    values_key="scheduler",
    generator="python -m scheduler.rbacgen",
    source="CORE_RULES, then each plugin's RBAC (declared next to the plugin)",
)


def rules(registry: Registry = DEFAULT_REGISTRY) -> list[tuple[str, PolicyRule]]:
    """(who needs it, rule): the core's, then each plugin's by name, without repeats."""
    return merged_rules([("core", CORE_RULES), *((spec.name, spec.rbac) for spec in registry.specs())])


def render(registry: Registry = DEFAULT_REGISTRY) -> str:
    return CHART.render(rules(registry))


def main(argv: list[str] | None = None) -> int:
    return generate("python -m scheduler.rbacgen", __doc__.splitlines()[0], OUTPUT, render, argv)


if __name__ == "__main__":
    sys.exit(main())
