"""Where the ConfigMap lives and the keys it holds (Koordinator's ``pkg/util/sloconfig``)."""

from __future__ import annotations

SLO_CONFIG_NAMESPACE = "koordinator-system"
SLO_CONFIG_NAME = "slo-controller-config"
"""Default name; koord-manager's ``--slo-config-name`` changes it."""

KEY_COLOCATION = "colocation-config"
KEY_RESOURCE_THRESHOLD = "resource-threshold-config"
KEY_RESOURCE_QOS = "resource-qos-config"
KEY_CPU_BURST = "cpu-burst-config"
KEY_SYSTEM = "system-config"
KEY_HOST_APPLICATION = "host-application-config"
KEY_CPU_NORMALIZATION = "cpu-normalization-config"
KEY_RESOURCE_AMPLIFICATION = "resource-amplification-config"
