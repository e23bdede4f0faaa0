"""A PodResources client over a unix socket: the kubelet's (``/var/lib/kubelet/pod-resources/kubelet.sock``)
or the proxy's, since both serve the same API.

As Koordinator's ``GetResourceClient`` (``pkg/koordlet/util/kubelet/kubelet_resource_client.go``):
plaintext gRPC on the socket, answers up to 16 MiB, 10 s to connect.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from grpc import aio

from koordlet.podresources.api import api_pb2, api_pb2_grpc

__all__ = ["CONNECT_TIMEOUT_SECONDS", "MAX_MESSAGE_BYTES", "PodResourcesClient"]

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""Koordinator's ``defaultPodResourcesMaxSize``."""
CONNECT_TIMEOUT_SECONDS = 10.0
"""Koordinator's ``kubeletConnectionTimeout``."""


class PodResourcesClient:
    """The three calls of ``v1.PodResourcesLister`` on one channel; a failed call raises
    ``grpc.aio.AioRpcError`` with the server's status."""

    def __init__(self, socket: Path, *, timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
        self.socket = socket
        self.timeout = timeout
        self._channel = aio.insecure_channel(
            f"unix://{socket.absolute()}",
            options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)],
        )
        self._stub = api_pb2_grpc.PodResourcesListerStub(self._channel)  # the async stub, for an aio channel

    async def list(self) -> api_pb2.ListPodResourcesResponse:
        return await self._stub.List(api_pb2.ListPodResourcesRequest(), timeout=self.timeout)

    async def get_allocatable_resources(self) -> api_pb2.AllocatableResourcesResponse:
        return await self._stub.GetAllocatableResources(
            api_pb2.AllocatableResourcesRequest(), timeout=self.timeout
        )

    async def get(self, namespace: str, name: str) -> api_pb2.GetPodResourcesResponse:
        request = api_pb2.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
        return await self._stub.Get(request, timeout=self.timeout)

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> PodResourcesClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
