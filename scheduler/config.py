"""KubeSchedulerConfiguration: the process settings and the profiles koord-scheduler runs.

The file is kube-scheduler's ``kubescheduler.config.k8s.io/v1`` configuration, read as strictly as
kube-scheduler reads it (an unknown or duplicated field anywhere is an error naming it). Older
Koordinator releases shipped ``v1beta3`` and ``v1beta2`` configurations; both are accepted and read
as v1, because the fields koord-scheduler uses did not change between them (``v1beta2``'s
``healthzBindAddress``/``metricsBindAddress`` are accepted there and ignored: the HTTP address comes
from the command line). Plugin ``args`` may carry any of those three apiVersions.

Profiles resolve against a default plugin set with kube-scheduler v1's semantics. kube-scheduler v1
declares its defaults under ``multiPoint``; the default set given to ``load_config`` plays that
role, except that where each default runs is listed per extension point rather than derived from
the interfaces the plugin implements. At each extension point:

1. A profile without ``plugins`` runs the default set unchanged. ``pluginConfig`` only sets
   arguments, so a profile that only sets ``CoschedulingArgs`` keeps every default plugin.
2. ``disabled: [{name: X}]`` removes the default X there; ``disabled: [{name: "*"}]`` removes every
   default there (and every ``multiPoint`` plugin: only that point's own ``enabled`` list runs).
3. ``enabled`` plugins that are not defaults there run after the defaults, in the order given.
4. An ``enabled`` plugin that is also a default there re-configures it: it moves to the front, with
   the weight given (no weight means 1, as kube-scheduler's Score entry without a weight).
5. ``multiPoint.enabled`` adds a plugin at every extension point it implements (``implements``),
   after the defaults; a default re-listed there keeps its place and takes the weight given.
   ``multiPoint.disabled`` removes defaults at every point (``*``: all of them).
6. The Score weight is taken from, in order: the point's own ``enabled`` entry, the
   ``multiPoint.enabled`` entry, the default; a weight of 0 or none is 1.

``load_config`` returns a ``SchedulerConfig``: the process settings plus one ``ResolvedProfile`` per
profile, which ``scheduler.framework.runtime.Framework`` builds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

from apis.duration import format_go_duration, parse_go_duration
from apis.errors import InvalidValue
from scheduler.framework.profile import ExtensionPoint, PluginRef, ResolvedProfile

__all__ = [
    "ACCEPTED_API_VERSIONS",
    "API_VERSION",
    "DEFAULT_CONFIG_YAML",
    "DEFAULT_SCHEDULER_NAME",
    "KIND",
    "KOORD_SCHEDULER_NAME",
    "ClientConnectionConfiguration",
    "ConfigError",
    "Implements",
    "KubeSchedulerConfiguration",
    "KubeSchedulerProfile",
    "LeaderElectionConfiguration",
    "Plugin",
    "PluginConfig",
    "PluginSet",
    "Plugins",
    "SchedulerConfig",
    "load_config",
    "resolve",
]

log = logging.getLogger(__name__)

API_GROUP = "kubescheduler.config.k8s.io"
API_VERSION = f"{API_GROUP}/v1"
ACCEPTED_API_VERSIONS = (API_VERSION, f"{API_GROUP}/v1beta3", f"{API_GROUP}/v1beta2")
"""v1 is the version registered today; v1beta3 and v1beta2 are read as v1."""
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
"""kube-scheduler's name for a lone profile that names none."""
KOORD_SCHEDULER_NAME = "koord-scheduler"
"""The profile koord-scheduler runs when the file has no profiles at all."""

_MAX_NODE_SCORE = 100
_MAX_TOTAL_SCORE = 2**63 - 1
_V1BETA2_IGNORED = ("healthzBindAddress", "metricsBindAddress")

Implements = Callable[[str], AbstractSet[ExtensionPoint]]
"""``implements(plugin_name)``: the extension points a plugin implements; raises KeyError if unknown."""


class ConfigError(ValueError):
    """The configuration is invalid; ``problems`` lists each one as ``field.path: what is wrong``."""

    def __init__(self, problems: Sequence[str], source: str = "") -> None:
        self.problems = list(problems)
        where = f" in {source}" if source else ""
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid KubeSchedulerConfiguration{where}:\n{lines}")


# ---- wire model ------------------------------------------------------------------------------


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
        use_attribute_docstrings=True,
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


# ---- result ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SchedulerConfig:
    """What the process runs with: settings, and one resolved profile per scheduler name."""

    api_version: str
    leader_election: LeaderElectionConfiguration
    client_connection: ClientConnectionConfiguration
    parallelism: int
    pod_initial_backoff_seconds: int
    pod_max_backoff_seconds: int
    percentage_of_nodes_to_score: int | None
    enable_profiling: bool
    enable_contention_profiling: bool
    delay_cache_until_active: bool
    profiles: list[ResolvedProfile] = field(default_factory=list)

    def profile(self, scheduler_name: str) -> ResolvedProfile:
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        raise KeyError(f"no profile named {scheduler_name!r}")


# ---- loading ---------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """Rejects a key given twice in one mapping, as kube's strict decoder does."""


class _DuplicateField(yaml.YAMLError):
    pass


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise _DuplicateField(f"duplicate field {key!r} (line {key_node.start_mark.line + 1})")
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read(path_or_text: str | os.PathLike[str] | Mapping[str, Any]) -> tuple[Any, str]:
    if isinstance(path_or_text, Mapping):
        return dict(path_or_text), ""
    if isinstance(path_or_text, os.PathLike) or not (
        not path_or_text.strip() or "\n" in path_or_text or path_or_text.lstrip().startswith("{")
    ):
        path = Path(path_or_text)
        text, source = path.read_text(encoding="utf-8"), str(path)
    else:
        text, source = path_or_text, ""
    try:
        docs = [d for d in yaml.load_all(text, Loader=_StrictLoader) if d is not None]
    except _DuplicateField as exc:
        raise ConfigError([str(exc)], source) from None
    except yaml.YAMLError as exc:
        raise ConfigError([f"not valid YAML: {exc}"], source) from None
    if len(docs) != 1:
        raise ConfigError([f"expected exactly one YAML document, found {len(docs)}"], source)
    return docs[0], source


def _path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


def _pydantic_problems(exc: ValidationError) -> list[str]:
    problems = []
    for err in exc.errors():
        where = _path(err["loc"])
        if err["type"] == "extra_forbidden":
            problems.append(f'unknown field "{where}"')
        elif err["type"] == "missing":
            problems.append(f"{where}: required field is missing")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{where}: {msg} (got {err.get('input')!r})")
    return problems


def load_config(
    path_or_text: str | os.PathLike[str] | Mapping[str, Any],
    default_plugins: Mapping[ExtensionPoint, Sequence[PluginRef]],
    implements: Implements,
) -> SchedulerConfig:
    """Read, validate and resolve a KubeSchedulerConfiguration.

    Args:
        path_or_text: a file path (``str`` without a newline, or ``PathLike``), YAML/JSON text, or an
            already-parsed mapping.
        default_plugins: the default plugin set per extension point, in order, with Score weights.
        implements: the extension points a plugin implements (used to expand ``multiPoint`` and to
            check that an enabled plugin can run where it is enabled); raises KeyError if unknown.

    Returns:
        The process settings and one ``ResolvedProfile`` per profile.

    Raises:
        ConfigError: listing every problem found, each prefixed with its field path.
        OSError: the file cannot be read.
    """
    raw, source = _read(path_or_text)
    if not isinstance(raw, dict):
        raise ConfigError([f"expected a mapping at the top level, got {type(raw).__name__}"], source)
    if raw.get("apiVersion") == f"{API_GROUP}/v1beta2":
        for key in _V1BETA2_IGNORED:
            if key in raw:
                log.warning("%s is ignored: koord-scheduler's HTTP address comes from its flags", key)
                raw.pop(key)
    try:
        cfg = KubeSchedulerConfiguration.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_pydantic_problems(exc), source) from None
    try:
        return resolve(cfg, default_plugins, implements)
    except ConfigError as exc:
        raise ConfigError(exc.problems, source) from None


def resolve(
    cfg: KubeSchedulerConfiguration,
    default_plugins: Mapping[ExtensionPoint, Sequence[PluginRef]],
    implements: Implements,
) -> SchedulerConfig:
    """Validate a parsed configuration as kube-scheduler does and resolve its profiles."""
    problems = _validate_settings(cfg)
    profiles_in = list(cfg.profiles)
    if not profiles_in:
        profiles_in = [KubeSchedulerProfile.model_validate({"schedulerName": KOORD_SCHEDULER_NAME})]
    elif len(profiles_in) == 1 and profiles_in[0].scheduler_name is None:
        profiles_in = [profiles_in[0].model_copy(update={"scheduler_name": DEFAULT_SCHEDULER_NAME})]

    resolved: list[ResolvedProfile] = []
    seen: dict[str, int] = {}
    for i, profile in enumerate(profiles_in):
        where = f"profiles[{i}]"
        name = profile.scheduler_name
        if not name:
            problems.append(f"{where}.schedulerName: required (every profile of several must be named)")
            continue
        if name in seen:
            problems.append(
                f"{where}.schedulerName: duplicate value {name!r} (also profiles[{seen[name]}].schedulerName)"
            )
            continue
        seen[name] = i
        plugin_problems: list[str] = []
        plugins = _resolve_plugins(profile.plugins, default_plugins, implements, where, plugin_problems)
        args = _plugin_args(profile.plugin_config, where, plugin_problems)
        problems.extend(plugin_problems)
        if not plugin_problems:
            resolved.append(
                ResolvedProfile(
                    scheduler_name=name,
                    plugins=plugins,
                    plugin_args=args,
                    percentage_of_nodes_to_score=profile.percentage_of_nodes_to_score,
                )
            )
    problems.extend(_common_queue_sort(resolved))
    if problems:
        raise ConfigError(problems)
    return SchedulerConfig(
        api_version=cfg.api_version,
        leader_election=cfg.leader_election,
        client_connection=cfg.client_connection,
        parallelism=cfg.parallelism,
        pod_initial_backoff_seconds=cfg.pod_initial_backoff_seconds,
        pod_max_backoff_seconds=cfg.pod_max_backoff_seconds,
        percentage_of_nodes_to_score=cfg.percentage_of_nodes_to_score,
        enable_profiling=cfg.enable_profiling,
        enable_contention_profiling=cfg.enable_contention_profiling,
        delay_cache_until_active=cfg.delay_cache_until_active,
        profiles=resolved,
    )


def _validate_settings(cfg: KubeSchedulerConfiguration) -> list[str]:
    """kube-scheduler's ValidateKubeSchedulerConfiguration, less the per-profile checks."""
    problems: list[str] = []
    if cfg.parallelism <= 0:
        problems.append(f"parallelism: must be greater than 0 (got {cfg.parallelism})")
    if cfg.pod_initial_backoff_seconds <= 0:
        problems.append(
            f"podInitialBackoffSeconds: must be greater than 0 (got {cfg.pod_initial_backoff_seconds})"
        )
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        problems.append(
            f"podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds "
            f"(got {cfg.pod_max_backoff_seconds} < {cfg.pod_initial_backoff_seconds})"
        )
    if cfg.client_connection.qps < 0 or cfg.client_connection.burst < 0:
        problems.append("clientConnection: qps and burst must not be negative")
    if cfg.extenders:
        problems.append("extenders: scheduler extenders are not supported by koord-scheduler; remove them")
    le = cfg.leader_election
    if le.leader_elect:
        zero = timedelta(0)
        for name, value in (
            ("leaseDuration", le.lease_duration),
            ("renewDeadline", le.renew_deadline),
            ("retryPeriod", le.retry_period),
        ):
            if value <= zero:
                problems.append(f"leaderElection.{name}: must be greater than zero")
        if le.lease_duration <= le.renew_deadline:
            problems.append("leaderElection.leaseDuration: must be greater than renewDeadline")
        if le.renew_deadline <= le.retry_period * 1.2:
            problems.append(
                "leaderElection.renewDeadline: must be greater than retryPeriod x 1.2 (client-go jitter)"
            )
        if le.resource_lock != "leases":
            problems.append(f'leaderElection.resourceLock: must be "leases" (got {le.resource_lock!r})')
        if not le.resource_name:
            problems.append("leaderElection.resourceName: required")
        if not le.resource_namespace:
            problems.append("leaderElection.resourceNamespace: required")
    return problems


def _implemented(
    name: str, implements: Implements, where: str, problems: list[str]
) -> frozenset[ExtensionPoint]:
    try:
        return frozenset(implements(name))
    except KeyError:
        problems.append(f"{where}: unknown plugin {name!r}")
        return frozenset()


def _weight(value: int | None) -> int:
    return value if value else 1


def _resolve_plugins(
    custom: Plugins | None,
    defaults: Mapping[ExtensionPoint, Sequence[PluginRef]],
    implements: Implements,
    where: str,
    problems: list[str],
) -> dict[ExtensionPoint, tuple[PluginRef, ...]]:
    if custom is None:
        return {point: tuple(defaults.get(point, ())) for point in ExtensionPoint}

    mp_where = f"{where}.plugins.multiPoint"
    mp_disabled = {p.name for p in custom.multi_point.disabled}
    mp_weight: dict[str, int | None] = {}
    mp_points: dict[str, frozenset[ExtensionPoint]] = {}
    for j, entry in enumerate(custom.multi_point.enabled):
        if entry.name in mp_weight:
            problems.append(f"{mp_where}.enabled[{j}]: plugin {entry.name!r} is listed twice")
            continue
        _check_weight(entry, f"{mp_where}.enabled[{j}]", problems)
        mp_weight[entry.name] = entry.weight
        mp_points[entry.name] = _implemented(entry.name, implements, f"{mp_where}.enabled[{j}]", problems)

    result: dict[ExtensionPoint, tuple[PluginRef, ...]] = {}
    for point in ExtensionPoint:
        pset = custom.at(point)
        pwhere = f"{where}.plugins.{point.value}"
        own: dict[str, Plugin] = {}
        for j, entry in enumerate(pset.enabled):
            ewhere = f"{pwhere}.enabled[{j}]"
            if entry.name in own:
                problems.append(f"{ewhere}: plugin {entry.name!r} is listed twice")
                continue
            _check_weight(entry, ewhere, problems)
            points = _implemented(entry.name, implements, ewhere, problems)
            if points and point not in points:
                problems.append(f"{ewhere}: plugin {entry.name!r} does not implement {point.value}")
            own[entry.name] = entry
        disabled = {p.name for p in pset.disabled}

        # The defaults and multiPoint plugins that expand here, in order (kube's merged multiPoint set).
        expanded: list[str] = []
        weights: dict[str, int] = {}
        if "*" not in disabled:
            if "*" not in mp_disabled:
                for ref in defaults.get(point, ()):
                    if ref.name in mp_disabled:
                        continue
                    expanded.append(ref.name)
                    weights[ref.name] = _weight(mp_weight.get(ref.name, ref.weight))
            for name, w in mp_weight.items():
                if point in mp_points.get(name, ()) and name not in weights:
                    expanded.append(name)
                    weights[name] = _weight(w)
        for name, entry in own.items():
            if name in weights:
                log.info(
                    "%s: plugin %s is explicitly re-configured at %s; overriding", where, name, point.value
                )
            weights[name] = _weight(entry.weight)

        overrides = [n for n in own if n in expanded and n not in disabled]
        additions = [n for n in expanded if n not in disabled and n not in own]
        rest = [n for n in own if n not in overrides]
        order = overrides + additions + rest
        if point is ExtensionPoint.SCORE:
            result[point] = tuple(PluginRef(n, weights[n]) for n in order)
            total = sum(weights[n] * _MAX_NODE_SCORE for n in order)
            if total > _MAX_TOTAL_SCORE:
                problems.append(f"{pwhere}: total score of Score plugins could overflow")
        else:
            result[point] = tuple(PluginRef(n) for n in order)
    for point, min_count, max_count in ((ExtensionPoint.QUEUE_SORT, 1, 1), (ExtensionPoint.BIND, 1, None)):
        count = len(result[point])
        if count < min_count or (max_count is not None and count > max_count):
            need = "exactly one" if max_count == 1 else "at least one"
            problems.append(f"{where}.plugins.{point.value}: {need} plugin must be enabled, got {count}")
    return result


def _check_weight(entry: Plugin, where: str, problems: list[str]) -> None:
    if entry.weight is not None and entry.weight < 0:
        problems.append(f"{where}.weight: must not be negative (got {entry.weight})")


def _plugin_args(
    configs: Sequence[PluginConfig], where: str, problems: list[str]
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for j, pc in enumerate(configs):
        cwhere = f"{where}.pluginConfig[{j}]"
        if pc.name in out:
            problems.append(f"{cwhere}.name: duplicate config for plugin {pc.name!r}")
            continue
        args = dict(pc.args or {})
        kind = args.pop("kind", None)
        api_version = args.pop("apiVersion", None)
        if kind is not None and kind != f"{pc.name}Args":
            problems.append(
                f"{cwhere}.args.kind: must be {pc.name + 'Args'!r} for plugin {pc.name!r} (got {kind!r})"
            )
        if api_version is not None and api_version not in ACCEPTED_API_VERSIONS:
            problems.append(
                f"{cwhere}.args.apiVersion: must be one of {', '.join(ACCEPTED_API_VERSIONS)}"
                f" (got {api_version!r})"
            )
        out[pc.name] = args
    return out


def _common_queue_sort(profiles: Sequence[ResolvedProfile]) -> list[str]:
    """All profiles share one queue, so they must agree on its sort plugin and its args."""
    if len(profiles) < 2:
        return []
    first = profiles[0]
    canon = first.plugins.get(ExtensionPoint.QUEUE_SORT, ())
    names = [r.name for r in canon]
    problems = []
    for i, p in enumerate(profiles[1:], start=1):
        if p.plugins.get(ExtensionPoint.QUEUE_SORT, ()) != canon:
            problems.append(f"profiles[{i}].plugins.queueSort: must be the same for all profiles")
        for name in names:
            if p.plugin_args.get(name) != first.plugin_args.get(name):
                problems.append(
                    f"profiles[{i}].pluginConfig: args of queueSort plugin {name!r}"
                    " must be the same for all profiles"
                )
    return problems


DEFAULT_CONFIG_YAML = """\
# koord-scheduler's configuration, as shipped in the Helm chart's ConfigMap.
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: 15s
  renewDeadline: 10s
  retryPeriod: 2s
  resourceLock: leases
  resourceName: koord-scheduler
  resourceNamespace: koordinator-system
clientConnection:
  qps: 50
  burst: 100
parallelism: 16
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 10
profiles:
  # No `plugins` section: the profile runs the default plugin set. Enable or disable against it
  # per extension point (`disabled: [{name: "*"}]` removes every default there), and set plugin
  # arguments under `pluginConfig`, e.g.
  #   pluginConfig:
  #     - name: Coscheduling
  #       args:
  #         apiVersion: kubescheduler.config.k8s.io/v1
  #         kind: CoschedulingArgs
  #         enablePreemption: true
  - schedulerName: koord-scheduler
"""
"""The shipped default configuration (the Helm chart's ConfigMap renders the same content)."""
