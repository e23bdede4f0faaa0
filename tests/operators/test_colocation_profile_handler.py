"""koord-manager's ClusterColocationProfile pod webhook as Kopf calls it: the JSON patch it answers
(none at all for a pod no profile applies to), the namespace read when the index lacks it, and the
refusals."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import kopf
import pytest

from apis.config.clustercolocationprofile import ClusterColocationProfile
from apis.core import PriorityClass
from operators.handlers.colocation_profile import ColocationProfileWebhook, colocation_profiles

QUICK_START = ClusterColocationProfile.model_validate(
    {
        "metadata": {"name": "batch-workload-profile"},
        "spec": {
            "namespaceSelector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
            "selector": {"matchLabels": {"app-type": "batch"}},
            "qosClass": "BE",
            "priorityClassName": "koord-batch",
            "schedulerName": "koord-scheduler",
            "labels": {"koordinator.sh/mutated": "true"},
        },
    }
)


class FakeClient:
    def __init__(self) -> None:
        self.namespaces = {"batch-demo": {"koordinator.sh/enable-colocation": "true"}, "plain": {}}
        self.read: list[str] = []
        self.classes = {
            "koord-batch": PriorityClass.model_validate({"metadata": {"name": "koord-batch"}, "value": 5000})
        }

    async def priority_class(self, name: str) -> PriorityClass | None:
        return self.classes.get(name)

    async def namespace_labels(self, name: str) -> dict[str, str] | None:
        self.read.append(name)
        return self.namespaces.get(name)


def pod_body(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "data-processing-job-", "namespace": namespace, "labels": labels},
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [
                {
                    "name": "worker",
                    "image": "python:3.9",
                    "resources": {
                        "requests": {"cpu": "2", "memory": "4Gi"},
                        "limits": {"cpu": "2", "memory": "4Gi"},
                    },
                }
            ],
        },
    }


async def admit(
    body: dict[str, Any], fake: FakeClient, namespaces: dict[str, list[dict[str, str]]] | None = None
) -> tuple[kopf.Patch, list[Any]]:
    webhook = ColocationProfileWebhook(fake, dice=lambda: 0)  # type: ignore[arg-type]
    patch = kopf.Patch(body=kopf.Body(copy.deepcopy(body)))  # type: ignore[arg-type]
    await webhook.mutate(
        body=kopf.Body(body),  # type: ignore[arg-type]
        patch=patch,
        colocation_profiles={QUICK_START.metadata.name: [QUICK_START]},  # type: ignore[arg-type]
        colocation_namespaces=namespaces or {},  # type: ignore[arg-type]
    )
    return patch, patch.as_json_patch()


async def test_a_matching_pod_gets_a_json_patch_that_makes_it_a_batch_pod() -> None:
    body = pod_body("batch-demo", {"app-type": "batch"})
    fake = FakeClient()
    _, ops = await admit(body, fake, {"batch-demo": [{"koordinator.sh/enable-colocation": "true"}]})
    assert fake.read == []  # the index knew the namespace
    mutated = jsonpatch.apply_patch(body, ops)
    assert mutated["spec"]["priority"] == 5000
    assert mutated["spec"]["schedulerName"] == "koord-scheduler"
    assert mutated["metadata"]["labels"]["koordinator.sh/qosClass"] == "BE"
    batch = {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "4Gi"}
    assert mutated["spec"]["containers"][0]["resources"] == {"requests": batch, "limits": batch}
    spec = json.loads(mutated["metadata"]["annotations"]["node.koordinator.sh/extended-resource-spec"])
    assert spec == {"containers": {"worker": {"requests": batch, "limits": batch}}}


@pytest.mark.parametrize(
    ("namespace", "labels"),
    [("plain", {"app-type": "batch"}), ("batch-demo", {"app-type": "web"}), ("gone", {"app-type": "batch"})],
    ids=["namespace-not-labelled", "pod-not-labelled", "namespace-unknown"],
)
async def test_a_pod_no_profile_matches_gets_no_patch_at_all(namespace: str, labels: dict[str, str]) -> None:
    fake = FakeClient()
    patch, ops = await admit(pod_body(namespace, labels), fake)
    assert not patch
    assert ops == []
    assert fake.read == [namespace]  # not in the (empty) index: read from the API server


async def test_a_missing_priority_class_refuses_the_pod() -> None:
    fake = FakeClient()
    fake.classes.clear()
    with pytest.raises(kopf.AdmissionError, match="no PriorityClass 'koord-batch' exists"):
        await admit(pod_body("batch-demo", {"app-type": "batch"}), fake)


def test_the_index_keeps_a_broken_profile_and_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    warned: list[str] = []
    monkeypatch.setattr(kopf, "warn", lambda body, *, reason, message: warned.append(f"{reason}: {message}"))
    body = {"metadata": {"name": "bad"}, "spec": {"probability": "half"}}
    indexed = colocation_profiles(name="bad", body=kopf.Body(body))  # type: ignore[arg-type]
    assert list(indexed) == ["bad"]
    assert warned == [
        "InvalidProfile: matches no pod until fixed: "
        "spec.probability: 'half' is neither an integer nor a percentage like '50%'"
    ]
