"""Profile resolution: kube-scheduler v1's enable/disable/``*``/multiPoint/pluginConfig semantics
against the default plugin set, and the checks kube-scheduler's validation makes.

kube-scheduler v1 declares its defaults under ``multiPoint``; the default set given to ``resolve``
plays that role, already expanded per extension point (``scheduler.framework.default_profile``
derives it from the interfaces each default plugin implements). At each extension point:

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
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import ValidationError

from scheduler.config.catalog import Catalog, Implements, PluginCatalog, catalog_of
from scheduler.config.errors import ConfigError, pydantic_problems, unknown_field_problem
from scheduler.config.models import (
    ACCEPTED_API_VERSIONS,
    DEFAULT_SCHEDULER_NAME,
    KOORD_SCHEDULER_NAME,
    ClientConnectionConfiguration,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    LeaderElectionConfiguration,
    Plugin,
    PluginConfig,
    Plugins,
)
from scheduler.config.strict import unknown_fields
from scheduler.framework.profile import ExtensionPoint, PluginRef, ResolvedProfile

__all__ = ["SchedulerConfig", "resolve"]

log = logging.getLogger(__name__)

_MAX_NODE_SCORE = 100
_MAX_TOTAL_SCORE = 2**63 - 1


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


def resolve(
    cfg: KubeSchedulerConfiguration,
    default_plugins: Mapping[ExtensionPoint, Sequence[PluginRef]],
    plugins: PluginCatalog | Implements,
) -> SchedulerConfig:
    """Validate a parsed configuration as kube-scheduler does and resolve its profiles.

    ``plugins`` is the plugin registry (names and ``pluginConfig`` args are checked against it), or
    only its ``implements`` (names are checked, args are left to the plugins).
    """
    catalog = catalog_of(plugins)
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
        enabled = _resolve_plugins(profile.plugins, default_plugins, catalog, where, plugin_problems)
        args = _plugin_args(profile.plugin_config, catalog, where, plugin_problems)
        problems.extend(plugin_problems)
        if not plugin_problems:
            resolved.append(
                ResolvedProfile(
                    scheduler_name=name,
                    plugins=enabled,
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


def _implemented(name: str, catalog: Catalog, where: str, problems: list[str]) -> frozenset[ExtensionPoint]:
    try:
        return frozenset(catalog.implements(name))
    except KeyError:
        problems.append(f"{where}: {catalog.unknown(name)}")
        return frozenset()


def _weight(value: int | None) -> int:
    return value if value else 1


def _resolve_plugins(
    custom: Plugins | None,
    defaults: Mapping[ExtensionPoint, Sequence[PluginRef]],
    catalog: Catalog,
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
        mp_points[entry.name] = _implemented(entry.name, catalog, f"{mp_where}.enabled[{j}]", problems)

    result: dict[ExtensionPoint, tuple[PluginRef, ...]] = {}
    reconfigured: list[str] = []  # "Plugin@point": a default or multiPoint plugin also listed here
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
            points = _implemented(entry.name, catalog, ewhere, problems)
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
                reconfigured.append(f"{name}@{point.value}")
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
    if reconfigured:
        # kube-scheduler logs each at INFO; re-enabling a default plugin is routine (Koordinator's own
        # configuration does it two dozen times), so one DEBUG line says it all.
        log.debug(
            "%s: default plugins explicitly re-configured (overriding): %s", where, ", ".join(reconfigured)
        )
    return result


def _check_weight(entry: Plugin, where: str, problems: list[str]) -> None:
    if entry.weight is not None and entry.weight < 0:
        problems.append(f"{where}.weight: must not be negative (got {entry.weight})")


def _plugin_args(
    configs: Sequence[PluginConfig], catalog: Catalog, where: str, problems: list[str]
) -> dict[str, dict[str, Any]]:
    """Each plugin's args, raw without ``apiVersion`` and ``kind`` (the framework builds the model),
    after checking the plugin exists and its args validate against its model."""
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
        try:
            catalog.implements(pc.name)
        except KeyError:
            problems.append(f"{cwhere}.name: {catalog.unknown(pc.name)}")
            continue
        problems.extend(_args_problems(catalog, pc.name, args, f"{where}.pluginConfig[{pc.name}].args"))
        out[pc.name] = args
    return out


def _args_problems(catalog: Catalog, name: str, args: Mapping[str, Any], where: str) -> list[str]:
    checkable, model = catalog.args_model(name)
    if not checkable:
        return []
    if model is None:
        return [f"{where}: plugin {name!r} takes no arguments (got {', '.join(args)})"] if args else []
    problems = [unknown_field_problem(u, where) for u in unknown_fields(model, args)]
    try:
        model.model_validate(args)
    except ValidationError as exc:
        problems.extend(pydantic_problems(exc, model=model, prefix=where))
    return problems


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
