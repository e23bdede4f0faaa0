"""Koordinator's ``DeschedulerConfiguration`` (``descheduler/v1alpha2``) and the
MigrationController's args, with Koordinator's defaults, merge rules and checks.

``load`` reads the YAML given to ``--config``; an unknown plugin, an unknown field or an invalid
argument is a ``ConfigError`` at start-up naming the field (``profiles[0].pluginConfig[1].args.
evictQPS: ...``), never a surprise in the middle of a round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from apis.duration import parse_go_duration
from apis.errors import MESSAGE_LIMIT, InvalidValue
from apis.meta import LabelSelector
from apis.types import GoDuration, IntOrString
from apis.yamltext import load_yaml

__all__ = [
    "ArbitrationArgs",
    "ConfigError",
    "DeschedulerConfiguration",
    "DeschedulerProfile",
    "EvictionPolicy",
    "LimiterKind",
    "MigrationControllerArgs",
    "Namespaces",
    "ObjectLimiterArgs",
    "Plugin",
    "PluginConfig",
    "PluginSet",
    "Plugins",
    "PriorityThreshold",
    "ResolvedProfile",
    "duration",
    "load",
]

MIGRATION_CONTROLLER = "MigrationController"
DEFAULT_PROFILE_NAME = "koord-descheduler"
EvictionPolicy = Literal["Eviction", "Delete", "SoftEviction"]
JobMode = Literal["ReservationFirst", "EvictDirectly"]


class ConfigError(ValueError):
    """The configuration cannot be used; the message names each offending field."""


def _listed(problems: Sequence[str]) -> str:
    """``problems`` one a line, as many whole ones as fit in :data:`MESSAGE_LIMIT` characters, then
    how many more: a configuration with 100,000 bad entries still gives a readable start-up error."""
    shown: list[str] = []
    used = 0
    for i, problem in enumerate(problems):
        if shown and used + len(problem) > MESSAGE_LIMIT:
            shown.append(f"and {len(problems) - i} more problems")
            break
        shown.append(problem if len(problem) <= MESSAGE_LIMIT else problem[:MESSAGE_LIMIT] + "...")
        used += len(shown[-1]) + 3
    return "\n  " + "\n  ".join(shown)


class _Strict(BaseModel):
    """Unknown fields are refused (Koordinator decodes its configuration strictly)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


def duration(text: str | None, default: timedelta = timedelta(0)) -> timedelta:
    return default if text is None else parse_go_duration(text)


class Plugin(_Strict):
    name: str
    weight: int | None = None


class PluginSet(_Strict):
    enabled: list[Plugin] = Field(default_factory=list)
    disabled: list[Plugin] = Field(default_factory=list)


class Plugins(_Strict):
    deschedule: PluginSet = Field(default_factory=PluginSet)
    balance: PluginSet = Field(default_factory=PluginSet)
    evict: PluginSet = Field(default_factory=PluginSet)
    filter: PluginSet = Field(default_factory=PluginSet)


class PluginConfig(_Strict):
    name: str
    args: dict[str, Any] | None = None


class DeschedulerProfile(_Strict):
    name: str | None = None
    node_selector: LabelSelector | None = None
    plugins: Plugins | None = None
    plugin_config: list[PluginConfig] = Field(default_factory=list)


class LeaderElection(_Strict):
    leader_elect: bool = True
    lease_duration: str = "15s"
    renew_deadline: str = "10s"
    retry_period: str = "2s"
    resource_lock: str = "leases"
    resource_name: str = "koord-descheduler"
    resource_namespace: str = "koordinator-system"


class ClientConnection(_Strict):
    kubeconfig: str | None = None
    accept_content_types: str | None = None
    content_type: str | None = None
    qps: float = 50
    burst: int = 100


class DeschedulerConfiguration(_Strict):
    """``descheduler/v1alpha2`` DeschedulerConfiguration."""

    api_version: str | None = None
    kind: str | None = None
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    client_connection: ClientConnection = Field(default_factory=ClientConnection)
    enable_profiling: bool | None = None
    """component-base's ``DebuggingConfiguration`` (inline in Koordinator's): accepted, but no pprof
    handlers are served (:meth:`notes` warns when true)."""
    enable_contention_profiling: bool | None = None
    healthz_bind_address: str | None = None
    metrics_bind_address: str | None = None
    descheduling_interval: GoDuration | None = None
    """No default: unset or 0 runs one round, then the loop stops (Koordinator's ``Start``)."""
    dry_run: bool = False
    node_selector: LabelSelector | None = None
    max_no_of_pods_to_evict_per_node: int | None = Field(default=None, ge=0)
    max_no_of_pods_to_evict_per_namespace: int | None = Field(default=None, ge=0)
    max_no_of_pods_to_evict_total: int | None = Field(default=None, ge=0)
    profiles: list[DeschedulerProfile] = Field(default_factory=list)

    def notes(self) -> list[str]:
        """Warnings about fields accepted for compatibility with Koordinator that have no effect."""
        return [
            f"{field}: true is accepted for compatibility with Koordinator and has no effect here: "
            "koord-descheduler serves no pprof handlers"
            for field, value in (
                ("enableProfiling", self.enable_profiling),
                ("enableContentionProfiling", self.enable_contention_profiling),
            )
            if value
        ]

    @property
    def interval(self) -> timedelta:
        return duration(self.descheduling_interval)


class Namespaces(_Strict):
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_of(self) -> Namespaces:
        if self.include and self.exclude:
            raise ValueError("only one of include and exclude may be set")
        return self


class PriorityThreshold(_Strict):
    value: int | None = None
    name: str | None = None


class ObjectLimiterArgs(_Strict):
    duration: GoDuration = "5m"
    max_migrating: IntOrString | None = None
    burst: int = 0


class ArbitrationArgs(_Strict):
    enabled: bool = True
    interval: GoDuration = "500ms"


LimiterKind = Literal["workload", "namespace"]


def _default_limiters() -> dict[LimiterKind, ObjectLimiterArgs]:
    return {"workload": ObjectLimiterArgs()}


class MigrationControllerArgs(_Strict):
    """Koordinator's MigrationControllerArgs with its v1alpha2 defaults."""

    api_version: str | None = None
    kind: str | None = None
    dry_run: bool = False
    max_concurrent_reconciles: int = Field(default=1, ge=1)
    default_job_mode: JobMode = "ReservationFirst"
    default_job_ttl: GoDuration = Field(default="5m", alias="defaultJobTTL")
    eviction_policy: EvictionPolicy = "Eviction"
    default_delete_options: dict[str, Any] | None = None
    evict_qps: float = Field(default=10, gt=0, alias="evictQPS")
    evict_burst: int = Field(default=1, gt=0)
    max_migrating_per_node: int | None = 2
    max_migrating_per_namespace: int | None = None
    max_migrating_globally: int | None = None
    max_migrating_per_workload: IntOrString | None = None
    max_unavailable_per_workload: IntOrString | None = None
    skip_check_expected_replicas: bool | None = None
    object_limiters: dict[LimiterKind, ObjectLimiterArgs] = Field(default_factory=_default_limiters)
    scheduler_names: list[str] = Field(default_factory=lambda: ["koord-scheduler"])
    arbitration_args: ArbitrationArgs = Field(default_factory=ArbitrationArgs)
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    priority_threshold: PriorityThreshold | None = None
    node_fit: bool = False
    node_selector: str | None = None
    evict_failed_bare_pods: bool = False
    evict_all_bare_pods: bool = False
    evict_local_storage_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    skip_eviction_gates: list[str] = Field(default_factory=list)

    @field_validator("max_migrating_per_workload", "max_unavailable_per_workload")
    @classmethod
    def _int_or_percent(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, str):
            digits = value.removesuffix("%")
            if not value.endswith("%") or not digits.isdigit():
                raise ValueError(f"must be an integer or a percentage such as 10%, not {value!r}")
        elif isinstance(value, int) and value < 0:
            raise ValueError("must not be negative")
        return value

    @property
    def job_ttl(self) -> timedelta:
        return duration(self.default_job_ttl)

    @property
    def arbitration_interval(self) -> timedelta:
        return duration(self.arbitration_args.interval)


class ResolvedProfile(BaseModel):
    """One profile after the merge: plugin names per extension point and each plugin's args."""

    name: str
    node_selector: LabelSelector | None
    deschedule: list[str]
    balance: list[str]
    evict: list[str]
    filter: list[str]
    args: dict[str, BaseModel]


DEFAULT_PLUGINS: Mapping[str, Sequence[str]] = {
    "deschedule": (),
    "balance": (),
    "evict": (MIGRATION_CONTROLLER,),
    "filter": (MIGRATION_CONTROLLER,),
}
"""Koordinator's ``default_plugins.go``: Evict = Filter = [MigrationController]."""


def merge(defaults: Sequence[str], custom: PluginSet) -> list[str]:
    """Koordinator's merge: disabling ``*`` drops the defaults, disabling a name drops it; an
    enabled plugin with a default's name replaces it in place, others are appended."""
    disabled = {p.name for p in custom.disabled}
    kept = [] if "*" in disabled else [name for name in defaults if name not in disabled]
    for plugin in custom.enabled:
        if plugin.name not in kept:
            kept.append(plugin.name)
    return kept


def _problems(exc: ValidationError, prefix: str) -> list[str]:
    out = []
    for error in exc.errors():
        path = prefix
        for part in error["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        out.append(f"{path}: {error['msg']}")
    return out


def resolve(
    config: DeschedulerConfiguration, args_models: Mapping[str, tuple[type[BaseModel], frozenset[str]]]
) -> list[ResolvedProfile]:
    """Merge every profile against the defaults and validate each enabled plugin's args.

    ``args_models`` maps a known plugin name to its args model and the extension points it
    implements (``deschedule``, ``balance``, ``evict``, ``filter``)."""
    problems: list[str] = []
    resolved = []
    profiles = config.profiles or [DeschedulerProfile()]
    for index, profile in enumerate(profiles):
        where = f"profiles[{index}]"
        name = profile.name or (DEFAULT_PROFILE_NAME if len(profiles) == 1 else None)
        if name is None:
            problems.append(f"{where}.name: required when there is more than one profile")
            name = ""
        plugins = profile.plugins or Plugins()
        points: dict[str, list[str]] = {}
        for point in ("deschedule", "balance", "evict", "filter"):
            names = merge(DEFAULT_PLUGINS[point], getattr(plugins, point))
            for name_ in names:
                known = args_models.get(name_)
                if known is None:
                    choices = ", ".join(sorted(args_models))
                    problems.append(f"{where}.plugins.{point}: unknown plugin {name_!r} (known: {choices})")
                elif point not in known[1]:
                    problems.append(f"{where}.plugins.{point}: {name_} is not a {point} plugin")
            points[point] = names
        configured = {}
        for i, entry in enumerate(profile.plugin_config):
            if entry.name not in args_models:
                problems.append(f"{where}.pluginConfig[{i}].name: unknown plugin {entry.name!r}")
                continue
            model = args_models[entry.name][0]
            try:
                configured[entry.name] = model.model_validate(entry.args or {})
            except ValidationError as exc:
                problems += _problems(exc, f"{where}.pluginConfig[{i}].args")
        enabled = {n for names in points.values() for n in names}
        args = {n: configured.get(n) or args_models[n][0]() for n in sorted(enabled) if n in args_models}
        resolved.append(ResolvedProfile(name=name, node_selector=profile.node_selector, args=args, **points))
    if problems:
        raise ConfigError("invalid DeschedulerConfiguration:" + _listed(problems))
    return resolved


def load(path_or_text: Path | str) -> DeschedulerConfiguration:
    """Parse ``--config`` (a path, or YAML text for tests)."""
    text = path_or_text.read_text() if isinstance(path_or_text, Path) else path_or_text
    try:
        raw = load_yaml(text, "DeschedulerConfiguration") or {}
    except InvalidValue as exc:  # not YAML, too deep, too many values once aliases are expanded
        raise ConfigError(str(exc)) from None
    if not isinstance(raw, dict):
        raise ConfigError("DeschedulerConfiguration must be a mapping")
    api_version = raw.get("apiVersion")
    if api_version not in (None, "descheduler/v1alpha2"):
        raise ConfigError(f"apiVersion: {api_version!r} is not descheduler/v1alpha2")
    try:
        return DeschedulerConfiguration.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError("invalid DeschedulerConfiguration:" + _listed(_problems(exc, ""))) from None
