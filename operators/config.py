"""koord-manager's settings: command-line flags validated into one typed model."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from apis.features import FeatureGates

__all__ = ["ManagerConfig"]


class ManagerConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    kubeconfig: Path | None = None
    """Kubeconfig to use; None means in-cluster service-account credentials."""
    webhook_host: str = "127.0.0.1"
    """Host name or IP the API server uses to reach the admission webhook; also the certificate's SAN."""
    webhook_bind: str = "127.0.0.1"
    """Address the webhook server listens on (0.0.0.0 in a pod)."""
    webhook_port: int = Field(default=9443, ge=1, le=65535)
    webhook_cert_dir: Path = Path(".cluster/koord-manager")
    """Where the serving certificate is read from, or created self-signed when absent."""
    webhook_configuration: str = "koordinator-py.koordinator.sh"
    """Name of the Validating- and MutatingWebhookConfiguration with koord-manager's webhooks."""
    manage_webhook_configuration: bool = True
    """Let Kopf create and update the webhook configurations, pointing at ``webhook_host`` (the
    local-process mode of `make up` and the e2e tests). Kopf removes its webhooks again when the
    process stops, which in a cluster would leave a rolling update without admission for a moment:
    there the Helm chart renders them (``operators.webhookgen``) and passes
    ``--no-manage-webhook-configuration``."""
    liveness_port: int | None = Field(default=None, ge=1, le=65535)
    """Serve /healthz on this port (kopf's liveness probe); None disables it."""
    verbosity: int = Field(default=0, ge=0)
    """klog's ``-v``: 0-1 INFO, 2-3 klog's V(2)/V(3), 4 and above DEBUG (``apis.goflags``)."""
    flag_notes: tuple[str, ...] = ()
    """Warnings about flags accepted for compatibility with Koordinator, logged at start."""
    peering_name: str = "koord-manager"
    """Kopf peering object (cluster-wide ClusterKopfPeering) shared by the replicas: the one with the
    highest priority acts, the others pause until its keep-alive lapses. koord-manager creates the
    object at startup; the ClusterKopfPeering CRD must be installed (the chart does)."""
    standalone: bool = False
    """Run without peering (one replica, or a developer's copy that must act regardless)."""
    peering_priority: int | None = Field(default=None, ge=0)
    """This replica's peering priority; None picks a random one at start, so two replicas never tie
    (Kopf freezes every operator of a tie) and the newest replica is as likely as any to lead."""
    resync_seconds: float = Field(default=2.0, gt=0)
    """How often PodGroup and ClusterNetworkTopology status is recomputed from the indexed pods and
    nodes, in seconds (Koordinator rebuilds the topology every 10s); writes happen only on change."""
    quota_group_namespace: str = "koordinator-system"
    """``ElasticQuotaArgs.quotaGroupNamespace``: where the root, system and default quotas live."""
    shutdown_timeout_seconds: float = Field(default=5.0, gt=0)
    """How long koord-manager may take to exit after SIGTERM/SIGINT, in seconds, before it kills
    itself (Kopf's ``settings.process.ultimate_exiting_timeout``, 10 minutes by default). With the
    API server up it exits in about a second; with it gone, Kopf would retry its last peering and
    webhook-configuration writes for minutes. Below a pod's 30 s termination grace period."""
    feature_gates: FeatureGates = Field(default_factory=FeatureGates)
    """Koordinator's feature gates (``--feature-gates``); koord-manager acts on
    ElasticQuotaGuaranteeUsage (admission rule 11), the others change nothing it does."""
    default_schedule_timeout_seconds: int = Field(default=600, gt=0)
    """``CoschedulingArgs.defaultTimeout``: a PodGroup's schedule timeout when
    ``spec.scheduleTimeoutSeconds`` is not > 0, in seconds."""
    reservation_gc_duration_seconds: int = Field(default=86400, gt=0)
    """``ReservationArgs.gcDurationSeconds``: how long a Succeeded or Failed Reservation is kept
    after it finished before koord-manager deletes it, in seconds (Koordinator's 24h default)."""
