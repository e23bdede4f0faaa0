"""Equal parts of decoded pods are one object; different parts stay apart; the table is bounded."""

from __future__ import annotations

from typing import Any

from apis.core import Pod
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.sharing import PartSharing


def replica(name: str, app: str = "web", cpu: str = "1") -> Pod:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "web:1", "resources": {"requests": {"cpu": cpu}}}],
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "nodeName": f"node-{name}",
    }
    return Pod.model_validate(
        {"metadata": {"name": name, "namespace": "default", "labels": {"app": app}}, "spec": spec}
    )


def test_replicas_share_their_parts_and_keep_their_own_names() -> None:
    sharing = PartSharing()
    a, b = sharing.share(replica("a")), sharing.share(replica("b"))
    assert a.spec.containers is b.spec.containers
    assert a.spec.affinity is b.spec.affinity
    assert a.spec.tolerations is b.spec.tolerations
    assert a.metadata.labels is b.metadata.labels
    assert (a.metadata.name, b.metadata.name) == ("a", "b")
    assert (a.spec.node_name, b.spec.node_name) == ("node-a", "node-b")
    fresh = replica("b")
    assert b == fresh
    assert b.spec.model_fields_set == fresh.spec.model_fields_set
    assert b.metadata.model_fields_set == fresh.metadata.model_fields_set


def test_different_parts_are_not_shared() -> None:
    sharing = PartSharing()
    web, db = sharing.share(replica("a")), sharing.share(replica("b", app="db", cpu="2"))
    assert web.spec.containers is not db.spec.containers
    assert web.spec.containers != db.spec.containers
    assert web.spec.affinity != db.spec.affinity
    assert web.metadata.labels == {"app": "web"}
    assert db.metadata.labels == {"app": "db"}


def test_the_table_forgets_the_least_recently_used_parts() -> None:
    sharing = PartSharing(capacity=4)
    for i in range(10):
        sharing.share(replica(str(i), app=f"app-{i}", cpu=str(i + 1)))
    assert len(sharing) == 4


def test_pod_info_of_shares_the_parts_of_replicas() -> None:
    a, b = PodInfo.of(replica("x1", app="shared-app")), PodInfo.of(replica("x2", app="shared-app"))
    assert a.pod.spec.containers is b.pod.spec.containers
    assert a.labels is b.labels
    assert a.requests == b.requests


def test_a_pod_shared_again_keeps_its_parts_and_equal_parts_still_meet_them() -> None:
    # The backend shares each pod as it decodes it and PodInfo shares it again.
    sharing = PartSharing()
    a = sharing.share(replica("a"))
    parts = (a.spec.containers, a.spec.affinity, a.spec.tolerations, a.metadata.labels)
    again = sharing.share(a)
    assert (
        again.spec.containers,
        again.spec.affinity,
        again.spec.tolerations,
        again.metadata.labels,
    ) == parts
    assert all(
        x is y
        for x, y in zip(
            parts, (a.spec.containers, a.spec.affinity, a.spec.tolerations, a.metadata.labels), strict=True
        )
    )
    b = sharing.share(replica("b"))
    assert b.spec.containers is a.spec.containers


def test_a_forgotten_part_is_serialized_again_rather_than_taken_for_a_kept_one() -> None:
    sharing = PartSharing(capacity=2)
    first = sharing.share(replica("0", app="app-0", cpu="1"))
    for i in range(1, 6):
        sharing.share(replica(str(i), app=f"app-{i}", cpu=str(i + 1)))
    assert len(sharing) == 2
    again = sharing.share(replica("x", app="app-0", cpu="1"))
    assert again.spec.containers == first.spec.containers
    assert again.spec.containers is not first.spec.containers  # the table had forgotten it
