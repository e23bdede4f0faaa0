"""The real node, for every ``test_real_node*.py`` file: each module that asks for it gets a cluster
of its own in the real-node flavour with the chart installed (what ``make up-real`` runs).

There is one real node per host, so e2e/conftest.py hands every ``test_real_node*.py`` file to the
same xdist worker, one after the other.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import yaml

from e2e.cluster.controlplane import ControlPlane
from e2e.realnode import RealNodeConfig, config_for, import_image, preflight
from e2e.realnode.__main__ import main as realnode_main
from e2e.realnode.images import BUSYBOX_IMAGE, busybox_image
from scheduler.simulator import description as desc

CLUSTER = os.environ.get("KOORD_E2E_CLUSTER", "e2e") + "-realnode"
NODES = desc.ClusterDescription.model_validate(
    {"name": CLUSTER, "nodePools": [{"name": "fake", "count": 2, "cpu": "8", "memory": "16Gi"}]}
)


@pytest.fixture(scope="module")
def real_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, RealNodeConfig]]:
    """What ``make up-real`` runs (``python -m e2e.realnode up --chart``), with two KWOK nodes:
    the cluster, the real node, our image imported and the chart installed on it."""
    cp = ControlPlane(name=CLUSTER, real_node=True)
    c = config_for(cp)
    preflight.check(c)  # fails the tests with what this host lacks, before anything starts
    description = tmp_path_factory.mktemp("real-node") / "cluster.yaml"
    description.write_text(yaml.safe_dump(NODES.model_dump(by_alias=True, mode="json")))
    try:
        assert realnode_main(["up", "--chart", "--cluster", CLUSTER, "-f", str(description)]) == 0
        import_image(c, busybox_image(c), BUSYBOX_IMAGE)
        yield cp, c
    finally:
        cp.stop(quiet=True)  # the real node first (ControlPlane._stop_real_node)


@pytest.fixture(scope="module")
def chart(real_node: tuple[ControlPlane, RealNodeConfig]) -> tuple[ControlPlane, RealNodeConfig]:
    """The chart installed from our image by ``up --chart``: every component on the real node."""
    return real_node
