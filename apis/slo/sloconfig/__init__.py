"""The ``slo-controller-config`` ConfigMap (algorithms.md 10.1): one JSON document per key.

Each key has its own typed model module here; ``merge`` is Koordinator's ``MergeCfg`` overlay that
every key uses to lay a partial strategy over the defaults or over the cluster strategy.
"""

from apis.slo.sloconfig.merge import merge_cfg
from apis.slo.sloconfig.names import (
    KEY_COLOCATION,
    KEY_CPU_BURST,
    KEY_CPU_NORMALIZATION,
    KEY_HOST_APPLICATION,
    KEY_RESOURCE_AMPLIFICATION,
    KEY_RESOURCE_QOS,
    KEY_RESOURCE_THRESHOLD,
    KEY_SYSTEM,
    SLO_CONFIG_NAME,
    SLO_CONFIG_NAMESPACE,
)

__all__ = [
    "KEY_COLOCATION",
    "KEY_CPU_BURST",
    "KEY_CPU_NORMALIZATION",
    "KEY_HOST_APPLICATION",
    "KEY_RESOURCE_AMPLIFICATION",
    "KEY_RESOURCE_QOS",
    "KEY_RESOURCE_THRESHOLD",
    "KEY_SYSTEM",
    "SLO_CONFIG_NAME",
    "SLO_CONFIG_NAMESPACE",
    "merge_cfg",
]
