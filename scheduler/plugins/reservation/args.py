"""ReservationArgs: Koordinator's arguments of the Reservation plugin, with its defaults."""

from __future__ import annotations

from pydantic import Field, model_validator

from apis.base import KoordModel

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
        if self.pre_allocation_config is not None and self.pre_allocation_config.enable_cluster_mode:
            raise ValueError("preAllocationConfig.enableClusterMode: pre-allocation is not supported yet")
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
