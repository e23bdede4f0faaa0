"""The KubeSchedulerConfiguration wire model (``kubescheduler.config.k8s.io/v1``), read strictly.

Strict as kube's decoder: camelCase names only, an unknown field is an error, no type coercion.
``scheduler.config.load`` reads a file into these models; ``scheduler.config.resolve`` turns them
into the profiles the framework runs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

from apis.duration import format_go_duration, parse_go_duration
from apis.errors import InvalidValue
from scheduler.framework.profile import ExtensionPoint

__all__ = [
    "ACCEPTED_API_VERSIONS",
    "API_GROUP",
    "API_VERSION",
    "DEFAULT_SCHEDULER_NAME",
    "KIND",
    "KOORD_SCHEDULER_NAME",
    "ClientConnectionConfiguration",
    "Duration",
    "KubeSchedulerConfiguration",
    "KubeSchedulerProfile",
    "LeaderElectionConfiguration",
    "Plugin",
    "PluginConfig",
    "PluginSet",
    "Plugins",
]

API_GROUP = "kubescheduler.config.k8s.io"
API_VERSION = f"{API_GROUP}/v1"
ACCEPTED_API_VERSIONS = (API_VERSION, f"{API_GROUP}/v1beta3", f"{API_GROUP}/v1beta2")
"""v1 is the version registered today; v1beta3 and v1beta2 are read as v1."""
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
"""kube-scheduler's name for a lone profile that names none."""
KOORD_SCHEDULER_NAME = "koord-scheduler"
"""The profile koord-scheduler runs when the file has no profiles at all."""


def _parse_duration(value: Any) -> Any:
    if isinstance(value, timedelta):
        return value
    if not isinstance(value, str):
        raise ValueError(f"must be a Go duration string such as '15s', got {value!r}")
    try:
        return parse_go_duration(value)
    except InvalidValue as exc:
        raise ValueError(str(exc)) from None


def _format_duration(value: timedelta) -> str:
    return format_go_duration((value // timedelta(microseconds=1)) * 1000)


Duration = Annotated[timedelta, BeforeValidator(_parse_duration), PlainSerializer(_format_duration)]
"""A Go duration string on the wire (``"15s"``, ``"1m30s"``), a timedelta in Python."""

Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
Percentage = Annotated[int, Field(ge=0, le=100)]


class _Strict(BaseModel):
    """camelCase wire names only, unknown fields rejected, no type coercion (kube's strict decoding)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        extra="forbid",
        strict=True,
        frozen=True,
    )


class LeaderElectionConfiguration(_Strict):
    """component-base's LeaderElectionConfiguration with kube-scheduler's defaults and our lock name."""

    leader_elect: bool = True
    """Run only while holding the lease. Default true, as kube-scheduler."""
    lease_duration: Duration = timedelta(seconds=15)
    """How long a non-leader waits after the last renewal before taking over. Default 15s."""
    renew_deadline: Duration = timedelta(seconds=10)
    """How long the leader keeps retrying a renewal before giving up leadership. Default 10s."""
    retry_period: Duration = timedelta(seconds=2)
    """Wait between attempts to acquire or renew. Default 2s."""
    resource_lock: str = "leases"
    """Only ``leases`` is valid (kube-scheduler dropped the endpoints/configmaps locks)."""
    resource_name: str = KOORD_SCHEDULER_NAME
    """Name of the coordination.k8s.io Lease. Default ``koord-scheduler``, as Koordinator's chart."""
    resource_namespace: str = "koordinator-system"
    """Namespace of the Lease. Default ``koordinator-system``, as Koordinator's chart."""


class ClientConnectionConfiguration(_Strict):
    """component-base's ClientConnectionConfiguration; 0 means the default, as kube-scheduler."""

    kubeconfig: str = ""
    """Path of a kubeconfig file; empty means in-cluster configuration."""
    accept_content_types: str = ""
    content_type: str = "application/vnd.kubernetes.protobuf"
    qps: float = 50.0
    """Sustained requests per second to the API server. Default 50 (kube-scheduler's own default)."""
    burst: Int32 = 100
    """Requests allowed above ``qps`` in a burst. Default 100."""

    @field_validator("qps", "burst")
    @classmethod
    def _zero_is_default(cls, value: float, info: ValidationInfo) -> float:
        if value == 0:
            return 50.0 if info.field_name == "qps" else 100
        return value


class Plugin(_Strict):
    name: str
    weight: Int32 | None = None
    """Only meaningful for Score; none or 0 means 1."""


class PluginSet(_Strict):
    enabled: list[Plugin] = []
    disabled: list[Plugin] = []


class Plugins(_Strict):
    multi_point: PluginSet = PluginSet()
    pre_enqueue: PluginSet = PluginSet()
    queue_sort: PluginSet = PluginSet()
    pre_filter: PluginSet = PluginSet()
    filter: PluginSet = PluginSet()
    post_filter: PluginSet = PluginSet()
    pre_score: PluginSet = PluginSet()
    score: PluginSet = PluginSet()
    reserve: PluginSet = PluginSet()
    permit: PluginSet = PluginSet()
    pre_bind: PluginSet = PluginSet()
    bind: PluginSet = PluginSet()
    post_bind: PluginSet = PluginSet()

    def at(self, point: ExtensionPoint) -> PluginSet:
        result: PluginSet = getattr(self, _FIELD_OF[point])
        return result


_FIELD_OF: dict[ExtensionPoint, str] = {
    point: "".join("_" + c.lower() if c.isupper() else c for c in point.value) for point in ExtensionPoint
}


class PluginConfig(_Strict):
    name: str
    args: dict[str, Any] | None = None
    """Kept raw: ``apiVersion`` and ``kind`` are checked and stripped; the plugin's model checks the rest."""


class KubeSchedulerProfile(_Strict):
    scheduler_name: str | None = None
    """Pods whose ``spec.schedulerName`` equals this run this profile. A lone profile defaults to
    ``default-scheduler``; with several profiles each must name itself."""
    percentage_of_nodes_to_score: Percentage | None = None
    """Overrides the top-level value for this profile; 0 means adaptive."""
    plugins: Plugins | None = None
    """None: the default plugin set."""
    plugin_config: list[PluginConfig] = []


class KubeSchedulerConfiguration(_Strict):
    api_version: Literal[
        "kubescheduler.config.k8s.io/v1",
        "kubescheduler.config.k8s.io/v1beta3",
        "kubescheduler.config.k8s.io/v1beta2",
    ]
    kind: Literal["KubeSchedulerConfiguration"]
    parallelism: Int32 = 16
    """Concurrency of the scheduling algorithm in kube-scheduler; koord-scheduler's bind concurrency."""
    leader_election: LeaderElectionConfiguration = LeaderElectionConfiguration()
    client_connection: ClientConnectionConfiguration = ClientConnectionConfiguration()
    enable_profiling: bool = True
    enable_contention_profiling: bool = True
    percentage_of_nodes_to_score: Percentage | None = None
    """Share of feasible nodes to find before scoring; unset or 0 means adaptive."""
    pod_initial_backoff_seconds: int = 1
    """Backoff of an unschedulable pod after its first failed attempt. Default 1."""
    pod_max_backoff_seconds: int = 10
    """Cap of the doubling backoff. Default 10."""
    profiles: list[KubeSchedulerProfile] = []
    extenders: list[dict[str, Any]] = []
    """Scheduler extenders are not supported; the list must be empty."""
    delay_cache_until_active: bool = False
