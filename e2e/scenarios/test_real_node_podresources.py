"""koordlet's PodResources proxy on the real node (D14, docs/koordlet.md#podresources-proxy).

The chart's koordlet (feature gate PodResourcesProxy, ``e2e/realnode/chart.py``) reads the real
kubelet's ``pod-resources/kubelet.sock`` and serves the same API on its own socket, which the host
sees under the cluster's state directory. Two pods run on the real node: an LSR pod of one whole CPU
and a pod that carries a ``device-allocated`` annotation (a GPU and an RDMA VF, Koordinator's own
example; a pod can carry it without the devices). Our generated client asks both sockets: the
proxy's ``List`` is the kubelet's answer, with the annotated devices added to the device pod's
first container; ``GetAllocatableResources`` and ``Get`` are the kubelet's answers.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from grpc import aio

from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED
from e2e.cluster.controlplane import ControlPlane
from e2e.realnode import RealNodeConfig
from e2e.realnode.chart import NAMESPACE as CHART_NAMESPACE
from e2e.realnode.testpods import cpuset_pod, sleeper_pod
from koordlet.podresources.api import api_pb2
from koordlet.podresources.client import PodResourcesClient
from koordlet.podresources.proxy import PROXY_SOCKET_NAME

pytestmark = [pytest.mark.real_node, pytest.mark.full]

ALLOCATED = {
    "gpu": [
        {
            "minor": 0,
            "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"},
            "id": "0",
        }
    ],
    "rdma": [
        {
            "minor": 0,
            "resources": {"koordinator.sh/rdma": "1"},
            "id": "0000:01:00.0",
            "extension": {"vfs": [{"minor": -1, "busID": "0000:01:00.2"}]},
        }
    ],
}
KOORD_DEVICES = [("koordinator.sh/rdma", ["0000:01:00.2"]), ("nvidia.com/gpu", ["0"])]
LSR, DEVICES = "podres-lsr", "podres-devices"


class Answers:
    """What one socket answered: List, GetAllocatableResources, and Get of the device pod (or the
    gRPC status code and message it failed with)."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.listed = api_pb2.ListPodResourcesResponse()
        self.allocatable = api_pb2.AllocatableResourcesResponse()
        self.got: api_pb2.GetPodResourcesResponse | tuple[str, str] = ("", "")

    async def ask(self) -> Answers:
        async with PodResourcesClient(self.socket) as client:
            self.listed = await client.list()
            self.allocatable = await client.get_allocatable_resources()
            try:
                self.got = await client.get("default", DEVICES)
            except aio.AioRpcError as error:
                self.got = (error.code().name, error.details() or "")
        return self

    def pods(self) -> dict[str, api_pb2.PodResources]:
        return {f"{p.namespace}/{p.name}": p for p in self.listed.pod_resources}


def _devices(pod: api_pb2.PodResources) -> list[list[tuple[str, list[str]]]]:
    return [[(d.resource_name, list(d.device_ids)) for d in c.devices] for c in pod.containers]


def _wait_for_socket(cp: ControlPlane, socket: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not socket.is_socket():
        if time.monotonic() > deadline:
            logs = cp.run_kubectl("logs", "-n", CHART_NAMESPACE, "daemonset/koordlet").stdout
            lines = [line for line in logs.splitlines() if "podresources" in line or "PodResources" in line]
            pytest.fail(f"no proxy socket {socket} after {timeout:g}s; koordlet:\n" + "\n".join(lines[-20:]))
        time.sleep(0.5)


def test_the_proxy_lists_the_kubelets_cpus_and_devices_and_koords_devices(
    chart: tuple[ControlPlane, RealNodeConfig],
) -> None:
    cp, c = chart
    lsr = cpuset_pod(LSR, c, "LSR", cpu="1", limit="1")
    annotated = sleeper_pod(
        DEVICES,
        c,
        labels={"app": "podres"},
        resources={"requests": {"cpu": "10m", "memory": "16Mi"}},
        annotations={ANNOTATION_DEVICE_ALLOCATED: json.dumps(ALLOCATED)},
    )
    for pod in (lsr, annotated):
        cp.kubectl("apply", "-f", "-", input=json.dumps(pod))
    try:
        cp.kubectl(
            "wait", "--for=condition=Ready", f"pod/{LSR}", f"pod/{DEVICES}", "-n", "default", "--timeout=90s"
        )
        proxy_socket = c.pod_resources_proxy_dir / PROXY_SOCKET_NAME
        _wait_for_socket(cp, proxy_socket)
        began = time.monotonic()
        proxy = asyncio.run(Answers(proxy_socket).ask())
        took = time.monotonic() - began
        kubelet = asyncio.run(Answers(c.pod_resources_socket).ask())

        kubelet_pods, proxy_pods = kubelet.pods(), proxy.pods()
        for key in (f"default/{LSR}", f"default/{DEVICES}"):
            assert key in kubelet_pods, f"the kubelet does not list {key}: {sorted(kubelet_pods)}"
            assert key in proxy_pods, f"the proxy does not list {key}: {sorted(proxy_pods)}"
        # Every pod both answers list: the kubelet's containers, CPUs and memory; devices only
        # gained on the annotated pod's first container.
        for key in kubelet_pods.keys() & proxy_pods.keys():
            ours, theirs = proxy_pods[key], kubelet_pods[key]
            assert [k.name for k in ours.containers] == [k.name for k in theirs.containers], key
            assert [list(k.cpu_ids) for k in ours.containers] == [list(k.cpu_ids) for k in theirs.containers]
            assert [list(k.memory) for k in ours.containers] == [list(k.memory) for k in theirs.containers]
            want = _devices(theirs)
            if key == f"default/{DEVICES}":
                want[0] = sorted(want[0] + KOORD_DEVICES, key=lambda entry: entry[0])
            assert _devices(ours) == want, key
        assert [k.name for k in proxy_pods[f"default/{LSR}"].containers] == ["sleep"]
        assert proxy.allocatable == kubelet.allocatable
        assert proxy.got == kubelet.got  # Koordinator's Get is the kubelet's answer, unchanged

        lsr_cpus = [list(k.cpu_ids) for k in kubelet_pods[f"default/{LSR}"].containers]
        print(
            f"\nproxy List+Allocatable+Get {took * 1000:.0f} ms; {len(proxy_pods)} pods listed; "
            f"kubelet's cpu_ids of the LSR pod {lsr_cpus} (CPU manager policy none); "
            f"allocatable cpu_ids {list(kubelet.allocatable.cpu_ids)}; "
            f"device pod's devices through the proxy {_devices(proxy_pods[f'default/{DEVICES}'])}; "
            f"Get: {kubelet.got if isinstance(kubelet.got, tuple) else 'answered'}"
        )
    finally:
        cp.kubectl("delete", "pod", LSR, DEVICES, "-n", "default", "--wait=false", check=False)
