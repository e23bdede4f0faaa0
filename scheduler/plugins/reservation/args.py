"""ReservationArgs: Koordinator's arguments of the Reservation plugin, with its defaults."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from apis.base import KoordModel
from scheduler.plugins.not_supported import only_default

__all__ = ["PreAllocationConfig", "ReservationArgs", "ReservationSelectorIndex"]

_GC_DURATION_SECONDS = 86400
_GC_INTERVAL_SECONDS = 60


class PreAllocationConfig(KoordModel):
    enable_cluster_mode: bool = False
    cluster_label_key: str | None = None
    cluster_priority_annotation_key: str | None = None
    prefer_no_pre_allocated_pods: bool = False


class ReservationSelectorIndex(KoordModel):
    enabled: bool = False
    key_prefixes: list[str] = Field(default_factory=list)
    keys: list[str] = Field(default_factory=list)

    @field_validator("enabled")
    @classmethod
    def _no_index(cls, value: bool) -> bool:
        return only_default(value, False, "reservations are matched by scanning the node's reservations")


class ReservationArgs(KoordModel):
    enable_preemption: bool = False
    """Preempt lower-priority pods for a reservation that fits nowhere (v1.6)."""
    min_candidate_nodes_percentage: int = Field(default=10, ge=0, le=100)
    min_candidate_nodes_absolute: int = Field(default=100, ge=0)
    controller_workers: int = Field(default=1, ge=1)
    gc_duration_seconds: int = _GC_DURATION_SECONDS
    gc_interval_seconds: int = _GC_INTERVAL_SECONDS
    disable_garbage_collection: bool = False
    resync_interval_seconds: int = Field(default=60, ge=0)
    pre_allocation_config: PreAllocationConfig | None = None
    ignored_resources: list[str] = Field(default_factory=list)
    ignored_resource_groups: list[str] = Field(default_factory=list)
    reservation_selector_index: ReservationSelectorIndex | None = None

    @field_validator("min_candidate_nodes_percentage")
    @classmethod
    def _every_node_a_candidate_pct(cls, value: int) -> int:
        return only_default(value, 10, "a reservation's preemption considers every node a candidate")

    @field_validator("min_candidate_nodes_absolute")
    @classmethod
    def _every_node_a_candidate_abs(cls, value: int) -> int:
        return only_default(value, 100, "a reservation's preemption considers every node a candidate")

    @field_validator("controller_workers")
    @classmethod
    def _one_worker(cls, value: int) -> int:
        return only_default(
            value, 1, "reservation status and expiry are koord-manager's, not the scheduler's"
        )

    @field_validator("resync_interval_seconds")
    @classmethod
    def _watch_only(cls, value: int) -> int:
        return only_default(value, 60, "the scheduler's reservation cache follows the watch, with no resync")

    @model_validator(mode="after")
    def _honourable(self) -> ReservationArgs:
        # Koordinator's scheduler collects finished reservations; here koord-manager does, with
        # its own settings: a value the scheduler would silently ignore is refused instead.
        if (
            self.gc_duration_seconds != _GC_DURATION_SECONDS
            or self.gc_interval_seconds != _GC_INTERVAL_SECONDS
            or self.disable_garbage_collection
        ):
            raise ValueError(
                "gcDurationSeconds, gcIntervalSeconds and disableGarbageCollection are koord-manager's "
                "settings here (--reservation-gc-duration-seconds, chart value "
                "manager.reservation.gcDurationSeconds); remove them from ReservationArgs"
            )
        if self.pre_allocation_config is not None and self.pre_allocation_config != PreAllocationConfig():
            raise ValueError(
                "preAllocationConfig: not supported yet by koord-scheduler: only Koordinator's defaults "
                "(no cluster mode, no preferNoPreAllocatedPods) are accepted"
            )
        for name in self.ignored_resources:
            if "/" not in name:
                raise ValueError(
                    f"ignoredResources: {name!r} is a native resource; only extended ones may be ignored"
                )
        for group in self.ignored_resource_groups:
            if "/" in group or group == "kubernetes.io":
                raise ValueError(
                    f"ignoredResourceGroups: {group!r} must be a vendor domain other than kubernetes.io"
                )
        return self
