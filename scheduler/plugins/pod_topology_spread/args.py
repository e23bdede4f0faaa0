"""``PodTopologySpreadArgs`` (kubescheduler.config.k8s.io/v1) with kube-scheduler's validation."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from apis.base import KoordModel
from apis.core import TopologySpreadConstraint

__all__ = [
    "DO_NOT_SCHEDULE",
    "HOSTNAME_KEY",
    "SCHEDULE_ANYWAY",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "ZONE_KEY",
    "PodTopologySpreadArgs",
]

HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"

SYSTEM_DEFAULT_CONSTRAINTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(max_skew=3, topology_key=HOSTNAME_KEY, when_unsatisfiable=SCHEDULE_ANYWAY),
    TopologySpreadConstraint(max_skew=5, topology_key=ZONE_KEY, when_unsatisfiable=SCHEDULE_ANYWAY),
)
"""kube-scheduler's ``systemDefaultConstraints``, used when ``defaultingType`` is ``System``."""


class PodTopologySpreadArgs(KoordModel):
    """kube-scheduler's ``PodTopologySpreadArgs``: constraints for pods that declare none.

    ``System`` (the default): the system defaults above, ``defaultConstraints`` must be empty.
    ``List``: ``defaultConstraints`` (possibly none). Either way a default constraint's selector is
    built per pod from the Services, ReplicationControllers, ReplicaSets and StatefulSets that
    select or own it, so default constraints must not carry a ``labelSelector``.
    """

    model_config = ConfigDict(extra="forbid")

    default_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    defaulting_type: Literal["System", "List"] = "System"

    @model_validator(mode="after")
    def _check(self) -> PodTopologySpreadArgs:
        if self.defaulting_type == "System" and self.default_constraints:
            raise ValueError(
                'defaultConstraints: Invalid value: when .defaultingType is "System", must be empty'
            )
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(self.default_constraints):
            path = f"defaultConstraints[{i}]"
            if c.max_skew <= 0:
                raise ValueError(f"{path}.maxSkew: Invalid value: {c.max_skew}: not in valid range [1, inf)")
            if not c.topology_key:
                raise ValueError(f"{path}.topologyKey: Required value: can not be empty")
            if c.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                raise ValueError(
                    f"{path}.whenUnsatisfiable: Unsupported value: {c.when_unsatisfiable!r}: "
                    f'supported values: "{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"'
                )
            pair = (c.topology_key, c.when_unsatisfiable)
            if pair in seen:
                raise ValueError(f"{path}: Duplicate value: {{{c.topology_key!r}, {c.when_unsatisfiable!r}}}")
            seen.add(pair)
            if c.label_selector is not None:
                raise ValueError(
                    f"{path}.labelSelector: Forbidden: constraint must not define a selector, "
                    "as they deduced for each pod"
                )
        return self

    def defaults(self) -> tuple[TopologySpreadConstraint, ...]:
        """The constraints a pod without its own gets (their selectors still to be built)."""
        if self.defaulting_type == "System":
            return SYSTEM_DEFAULT_CONSTRAINTS
        return tuple(self.default_constraints)
