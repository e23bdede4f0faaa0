"""The real node: one node of the local cluster run by a real kubelet over containerd 2.x (NRI on),
runc and the CNI bridge, beside the KWOK nodes. See docs/real-node.md.

``start_real_node(cp)`` / ``stop_real_node(cp)`` for a running cluster started with
``ControlPlane(real_node=True)``; ``import_image(config, archive, name)`` loads an OCI archive into
the node's containerd; ``leftovers(config)`` lists what of it is still on the host.
"""

from __future__ import annotations

from e2e.realnode.config import PAUSE_IMAGE, RealNodeConfig, config_for
from e2e.realnode.images import build_image, import_image
from e2e.realnode.node import start, start_real_node
from e2e.realnode.preflight import PreflightError
from e2e.realnode.teardown import leftovers, stop

__all__ = [
    "PAUSE_IMAGE",
    "PreflightError",
    "RealNodeConfig",
    "build_image",
    "config_for",
    "import_image",
    "leftovers",
    "start",
    "start_real_node",
    "stop",
    "stop_real_node",
]


def stop_real_node(config: RealNodeConfig) -> list[str]:
    """Stop the real node and take back what it created on the host; what is done, line by line."""
    return stop(config)
