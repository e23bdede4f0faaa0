"""Every root custom resource kind koordinator-py serves; ``apis.crdgen`` renders one CRD each.

NodeResourceTopology (``topology.node.k8s.io``) is the upstream CRD, rendered from its model as
the other kinds are.
"""

from __future__ import annotations

from apis.config import ClusterColocationProfile
from apis.meta import KoordResource
from apis.quota import ElasticQuotaProfile
from apis.scheduling import (
    ClusterNetworkTopology,
    Device,
    ElasticQuota,
    PodGroup,
    PodMigrationJob,
    Reservation,
)
from apis.slo import NodeMetric, NodeSLO
from apis.topology import NodeResourceTopology

__all__ = ["ALL_RESOURCES"]

ALL_RESOURCES: tuple[type[KoordResource], ...] = (
    PodGroup,
    ElasticQuota,
    Reservation,
    Device,
    ClusterNetworkTopology,
    PodMigrationJob,
    ElasticQuotaProfile,
    NodeMetric,
    NodeSLO,
    ClusterColocationProfile,
    NodeResourceTopology,
)
