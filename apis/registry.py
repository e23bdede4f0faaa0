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

__all__ = ["ADMISSION_RESOURCES", "ALL_RESOURCES"]

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

ADMISSION_RESOURCES: tuple[type[KoordResource], ...] = tuple(
    m for m in ALL_RESOURCES if m is not NodeResourceTopology
)
"""The kinds koord-manager's validating webhooks check. NodeResourceTopology is left to its CRD
schema, as Koordinator does: koordlet writes it from every node, and a webhook that must answer
(failurePolicy Fail) would stop those writes whenever koord-manager is down."""
