"""The configuration koord-scheduler runs without ``--config`` (the Helm chart's ConfigMap)."""

from __future__ import annotations

__all__ = ["BIND_CONCURRENCY", "DEFAULT_CONFIG_YAML"]

BIND_CONCURRENCY = 128
"""Bind calls koord-scheduler has in flight at once (``AppSettings.bind_concurrency``), and its
connection's write slots; no flag or field sets it. Here, not in ``scheduler.app``, because the
backend is connected before the app is imported (``scheduler.first_lists``)."""

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
