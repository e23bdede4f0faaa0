"""Custom resources of ``config.koordinator.sh``."""

from apis.config.clustercolocationprofile import (
    ClusterColocationProfile,
    ClusterColocationProfileSpec,
    ClusterColocationProfileStatus,
)

__all__ = [
    "ClusterColocationProfile",
    "ClusterColocationProfileSpec",
    "ClusterColocationProfileStatus",
]
