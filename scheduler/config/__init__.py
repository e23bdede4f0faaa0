"""KubeSchedulerConfiguration: the process settings and the profiles koord-scheduler runs.

The file is kube-scheduler's ``kubescheduler.config.k8s.io/v1`` configuration, read as strictly as
kube-scheduler reads it (an unknown or duplicated field anywhere is an error naming it). Older
Koordinator releases shipped ``v1beta3`` and ``v1beta2`` configurations; both are accepted and read
as v1, because the fields koord-scheduler uses did not change between them (``v1beta2``'s
``healthzBindAddress``/``metricsBindAddress`` are accepted there and ignored: the HTTP address comes
from the command line). Plugin ``args`` may carry any of those three apiVersions.

One module per job:

- ``models``: the wire model (pydantic, strict);
- ``load``: YAML text, file or mapping -> wire model -> ``resolve``;
- ``resolve``: profiles resolved against the default plugin set with kube-scheduler v1's
  semantics (its docstring lists them), and kube-scheduler's validation;
- ``catalog``: the plugins a configuration may name (the registry), and the ones Koordinator or
  kube-scheduler has that koord-scheduler does not support yet;
- ``strict``: unknown keys inside API types that plugin args embed (they read leniently);
- ``errors``: ``ConfigError`` listing every problem as ``field.path: what is wrong``;
- ``default``: the shipped configuration.

``load_config`` returns a ``SchedulerConfig``: the process settings plus one ``ResolvedProfile`` per
profile, which ``scheduler.framework.runtime.Framework`` builds.
"""

from __future__ import annotations

from scheduler.config.catalog import Implements, PluginCatalog
from scheduler.config.default import BIND_CONCURRENCY, DEFAULT_CONFIG_YAML
from scheduler.config.errors import ConfigError
from scheduler.config.load import load_config
from scheduler.config.models import (
    ACCEPTED_API_VERSIONS,
    API_VERSION,
    DEFAULT_SCHEDULER_NAME,
    KIND,
    KOORD_SCHEDULER_NAME,
    ClientConnectionConfiguration,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    LeaderElectionConfiguration,
    Plugin,
    PluginConfig,
    Plugins,
    PluginSet,
)
from scheduler.config.resolve import SchedulerConfig, resolve

__all__ = [
    "ACCEPTED_API_VERSIONS",
    "API_VERSION",
    "BIND_CONCURRENCY",
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
    "PluginCatalog",
    "PluginConfig",
    "PluginSet",
    "Plugins",
    "SchedulerConfig",
    "load_config",
    "resolve",
]
