"""ImageLocality: the cases of kube-scheduler v1.35's image_locality_test.go (expected scores copied
from there) and normalizedImageName."""

from __future__ import annotations

import hashlib

import pytest

from apis.core import Node
from scheduler.cache.snapshot import Snapshot
from scheduler.plugins import image_locality
from tests.scheduler.builders import PodBuilder, make_cache, make_node, make_pod, make_snapshot
from tests.scheduler.plugins.helpers import scores

MB = 1024 * 1024


def image_node(name: str, *images: tuple[list[str], int]) -> Node:
    return make_node(name).alloc(cpu="4").images(*[(names, size * MB) for names, size in images]).obj()


NODE_40_300_2000 = [
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300),
    (["gcr.io/2000:latest"], 2000),
]
NODE_250_10 = [(["gcr.io/250:latest"], 250), (["gcr.io/10:latest", "gcr.io/10:v1"], 10)]
NODE_600_40_900 = [(["gcr.io/600:latest"], 600), (["gcr.io/40:latest"], 40), (["gcr.io/900:latest"], 900)]
NODE_300_600_900 = [(["gcr.io/300:latest"], 300), (["gcr.io/600:latest"], 600), (["gcr.io/900:latest"], 900)]
NODE_4000_30 = [(["gcr.io/4000:latest"], 4000), (["gcr.io/30:latest"], 30)]
NODE_20_30_40 = [(["gcr.io/20:latest"], 20), (["gcr.io/30:latest"], 30), (["gcr.io/40:latest"], 40)]

CASES = [
    # node2: 100 * (250M/2 - 23M) / (1000M * 2 - 23M) = 5
    pytest.param(
        make_pod("p").image("gcr.io/40", "gcr.io/250"),
        [("node1", NODE_40_300_2000), ("node2", NODE_250_10)],
        {"node1": 0, "node2": 5},
        id="two images spread on two nodes, prefer the larger image one",
    ),
    pytest.param(
        make_pod("p").image("gcr.io/40", "gcr.io/300"),
        [("node1", NODE_40_300_2000), ("node2", NODE_250_10)],
        {"node1": 7, "node2": 0},
        id="two images on one node, prefer this node",
    ),
    pytest.param(
        make_pod("p").image("gcr.io/10", "gcr.io/4000"),
        [("node1", NODE_4000_30), ("node2", NODE_250_10)],
        {"node1": 100, "node2": 0},
        id="if exceed limit, use limit",
    ),
    pytest.param(
        make_pod("p").image("gcr.io/10", "gcr.io/4000"),
        [("node1", NODE_4000_30), ("node2", NODE_250_10), ("node3", [])],
        {"node1": 66, "node2": 0, "node3": 0},
        id="if exceed limit, use limit (with node which has no images present)",
    ),
    pytest.param(
        make_pod("p").image("gcr.io/300", "gcr.io/600", "gcr.io/900"),
        [("node1", NODE_600_40_900), ("node2", NODE_300_600_900), ("node3", [])],
        {"node1": 32, "node2": 36, "node3": 0},
        id="pod with multiple large images, node2 is preferred",
    ),
    pytest.param(
        make_pod("p").image("gcr.io/30", "gcr.io/40"),
        [("node1", NODE_20_30_40), ("node2", NODE_4000_30)],
        {"node1": 1, "node2": 0},
        id="pod with multiple small images",
    ),
    pytest.param(
        make_pod("p").image("gcr.io/30").image("gcr.io/300", init=True),
        [("node1", NODE_40_300_2000), ("node2", NODE_20_30_40)],
        {"node1": 6, "node2": 0},
        id="include InitContainers: two images spread on two nodes, prefer the larger image one",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "expected"), CASES)
def test_upstream_cases(
    pod: PodBuilder, nodes: list[tuple[str, list[tuple[list[str], int]]]], expected: dict[str, int]
) -> None:
    snapshot = make_snapshot([image_node(name, *images) for name, images in nodes])
    plugin = image_locality.new(None, None)  # type: ignore[arg-type]
    assert scores(plugin, pod.info(), snapshot) == expected


def fake_digest(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()


@pytest.mark.parametrize(
    ("given", "normalized"),
    [
        ("root", "root:latest"),
        ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("root:tag", "root:tag"),
        ("root@" + fake_digest("root"), "root@" + fake_digest("root")),
        ("docker.io/library/nginx", "docker.io/library/nginx:latest"),  # no registry rewriting, as upstream
    ],
)
def test_normalized_image_name(given: str, normalized: str) -> None:
    assert image_locality.normalized_image_name(given) == normalized


def test_an_image_name_matches_only_as_written_in_node_status() -> None:
    # upstream's TODO: "nginx" in the pod and "docker.io/library/nginx:latest" on the node do not match
    snapshot = make_snapshot(
        [image_node("a", (["docker.io/library/nginx:latest"], 500)), image_node("b", (["nginx:latest"], 500))]
    )
    plugin = image_locality.new(None, None)  # type: ignore[arg-type]
    # b: 100 * (500M * 1/2 - 23M) / (1000M - 23M) = 23
    assert scores(plugin, make_pod("p").image("nginx").info(), snapshot) == {"a": 0, "b": 23}


def test_images_follow_node_status_updates() -> None:
    cache = make_cache([image_node("a", (["gcr.io/big:latest"], 2000)), image_node("b")])
    snapshot = Snapshot(cache)
    plugin = image_locality.new(None, None)  # type: ignore[arg-type]
    pod = make_pod("p").image("gcr.io/big").info()
    # 2000M * 1/2 = 1000M >= the max for one container
    assert scores(plugin, pod, snapshot) == {"a": 100, "b": 0}
    cache.upsert_node(image_node("a"))  # the kubelet garbage-collected it
    assert scores(plugin, pod, snapshot) == {"a": 0, "b": 0}


def test_huge_image_sizes_do_not_wrap() -> None:
    huge = 2**63 - 1
    snapshot = make_snapshot(
        [make_node("a").images((["x:latest"], huge), (["y:latest"], huge)).obj(), make_node("b").obj()]
    )
    plugin = image_locality.new(None, None)  # type: ignore[arg-type]
    assert scores(plugin, make_pod("p").image("x", "y").info(), snapshot) == {"a": 100, "b": 0}
