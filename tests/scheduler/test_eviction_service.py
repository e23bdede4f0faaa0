"""The one eviction service: the Eviction API honours a PodDisruptionBudget, ``delete`` (the
descheduler's evictionPolicy Delete) does not ask it."""

from __future__ import annotations

import asyncio

from apis.client.backend import PDBS, PODS
from apis.client.eviction import EvictionRequest, EvictionService
from apis.core import Pod, PodDisruptionBudget
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.pod_info import PodInfo


def _backend() -> tuple[MemoryBackend, Pod]:
    backend = MemoryBackend()
    pod = backend.apply(
        PODS,
        {
            "metadata": {"name": "p", "namespace": "default", "uid": "u", "labels": {"app": "a"}},
            "spec": {"containers": []},
        },
    )
    backend.apply(
        PDBS,
        PodDisruptionBudget.model_validate(
            {
                "metadata": {"name": "pdb", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "a"}}},
                "status": {"disruptionsAllowed": 0},
            }
        ),
    )
    return backend, pod


def _request(pod: Pod, *, delete: bool = False) -> EvictionRequest:
    return EvictionRequest(pod=PodInfo.of(pod), reason="Evicted", message="m", delete=delete)


def test_a_pdb_refuses_the_eviction_but_not_a_delete() -> None:
    backend, pod = _backend()
    service = EvictionService(backend, "koord-descheduler")
    assert not asyncio.run(service.evict(_request(pod)))
    assert backend.get(PODS, "default", "p") is not None
    assert asyncio.run(service.evict(_request(pod, delete=True)))
    assert backend.get(PODS, "default", "p") is None
    assert [e.reason for e in backend.events] == ["Evicted"]
