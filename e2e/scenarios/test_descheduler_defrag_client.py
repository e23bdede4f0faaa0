"""GangDefragmentation's API client (``operators/descheduler/defrag/client.py``) against the real
API server: what the plugin reads and writes beyond the descheduler handle."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from apis.extension.defrag import LABEL_DEFRAG_PLAN, DefragMove, DefragPlan
from apis.meta import ObjectMeta, OwnerReference
from apis.scheduling.reservation import Reservation, ReservationOwner, ReservationSpec
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.workloads import apply, get_object, list_items, make_pod
from operators.descheduler.defrag.client import kube_client
from operators.descheduler.defrag.reservations import reservation_for

NAMESPACE = "defrag-client"
TOPOLOGY = repo_root() / "docs" / "examples" / "v1.7" / "02-cluster-network-topology.yaml"


def _reservation(name: str) -> Reservation:
    return Reservation(
        api_version="scheduling.koordinator.sh/v1alpha1",
        kind="Reservation",
        metadata=ObjectMeta(name=name, labels={LABEL_DEFRAG_PLAN: "p1"}),
        spec=ReservationSpec.model_validate(
            {
                "template": {
                    "spec": {
                        "schedulerName": "no-such-scheduler",  # stays Pending: nothing places it
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
                    }
                },
                "owners": [ReservationOwner.model_validate({"labelSelector": {"matchLabels": {"app": "x"}}})],
                "ttl": "5m",
            }
        ),
    )


async def _exercise(cp: ControlPlane) -> dict[str, Any]:
    configuration = k8s_client.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(cp.kubeconfig), client_configuration=configuration, persist_config=False
    )
    async with k8s_client.ApiClient(configuration) as api:
        defrag = kube_client(api)
        groups = [g for g in await defrag.pod_groups() if g.metadata.namespace == NAMESPACE]
        unbound = [p.metadata.name for p in await defrag.unbound_pods() if p.metadata.namespace == NAMESPACE]
        topology = await defrag.topology()
        created = await defrag.create_reservation(_reservation("defrag-client-r0"))
        again = await defrag.create_reservation(_reservation("defrag-client-r0"))
        listed = [r.metadata.name for r in await defrag.reservations(LABEL_DEFRAG_PLAN)]
        await defrag.annotate_pod_group(NAMESPACE, "train", {"x.example/plan": "yes"})
        await defrag.annotate_pod_group(NAMESPACE, "gone", {"x.example/plan": "yes"})  # no error
        await defrag.pod_group_event(groups[0], "DefragmentationPlanned", "a plan")
        await defrag.delete_reservation("defrag-client-r0")
        await defrag.delete_reservation("defrag-client-r0")  # already gone: no error
        after = [r.metadata.name for r in await defrag.reservations(LABEL_DEFRAG_PLAN)]
        # A plan's Reservation as the plugin builds it passes the CRD schema and koord-manager's
        # admission webhook.
        pod = next(p for p in await defrag.unbound_pods() if p.metadata.name == "train-0")
        pod.spec.node_name = "n0"
        pod.metadata.owner_references = [
            OwnerReference(
                api_version="apps/v1", kind="ReplicaSet", name="web", uid="uid-web", controller=True
            )
        ]
        move = DefragMove(
            namespace=NAMESPACE,
            name="train-0",
            uid=pod.metadata.uid or "",
            node="n0",
            priority=0,
            reservation="defrag-client-p2-0",
        )
        plan = DefragPlan(
            id="p2",
            gang=f"{NAMESPACE}/train",
            layer="BlockLayer",
            domain="b0",
            nodes=["n0", "n1"],
            moves=[move],
            created=datetime.now(UTC),
        )
        planned = await defrag.create_reservation(reservation_for(pod, move, plan, 300))
        await defrag.delete_reservation("defrag-client-p2-0")
    return {
        "groups": [g.metadata.name for g in groups],
        "unbound": unbound,
        "topology": topology,
        "created": created,
        "again": again,
        "listed": listed,
        "after": after,
        "planned": planned,
    }


def test_the_client_reads_and_writes_what_the_plugin_needs(control_plane: ControlPlane) -> None:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(TOPOLOGY))
    try:
        apply(
            cp,
            [
                {
                    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                    "kind": "PodGroup",
                    "metadata": {"name": "train", "namespace": NAMESPACE},
                    "spec": {"minMember": 1},
                },
                make_pod("train-0", NAMESPACE, scheduler="no-such-scheduler"),
            ],
        )
        got = asyncio.run(_exercise(cp))
        assert got["groups"] == ["train"]
        assert got["unbound"] == ["train-0"]
        topology = got["topology"]
        assert topology is not None
        assert [layer.topology_layer for layer in topology.spec.layer_chain()] == [
            "SpineLayer",
            "BlockLayer",
            "NodeTopologyLayer",
        ]
        assert (got["created"], got["again"]) == (True, False)
        assert "defrag-client-r0" in got["listed"]
        assert "defrag-client-r0" not in got["after"]
        assert got["planned"] is True
        pg = get_object(cp, "podgroup", "train", namespace=NAMESPACE)
        assert pg["metadata"]["annotations"]["x.example/plan"] == "yes"
        events = list_items(cp, "events", namespace=NAMESPACE)
        ours = [e for e in events if e["reason"] == "DefragmentationPlanned"]
        assert ours
        assert ours[0]["involvedObject"]["kind"] == "PodGroup"
        assert ours[0]["source"]["component"] == "koord-descheduler"
    finally:
        cp.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        cp.kubectl("delete", "reservation", "defrag-client-r0", "--ignore-not-found")
