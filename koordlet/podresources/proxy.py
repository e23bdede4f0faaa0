"""koordlet's PodResources proxy (feature gate ``PodResourcesProxy``, docs/koordlet.md).

Serves ``v1.PodResourcesLister`` on ``<pod-resources-proxy-path>/kubelet.sock`` (Koordinator's
socket, ``/var/run/koordlet/pod-resources/kubelet.sock`` by default), so that Multus-CNI or the DCGM
exporter, pointed there instead of at the kubelet's socket, also see the GPUs and RDMA NICs
koord-scheduler allocated. As Koordinator, it starts once the kubelet's socket exists and koordlet
has its node's pods; unlike Koordinator's, which stops koordlet when the kubelet's socket is
missing, it says so once and looks again every ``retry_seconds``, and a socket it cannot serve on
is reported once and retried the same way. Stopping it removes its socket.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path

from koordlet.podresources.client import PodResourcesClient
from koordlet.podresources.server import PodResourcesProxyServicer, start_server
from koordlet.states.resources import Kind
from koordlet.states.store import States

__all__ = ["PROXY_SOCKET_NAME", "PodResourcesProxy"]

log = logging.getLogger("koordlet.podresources")

PROXY_SOCKET_NAME = "kubelet.sock"
"""The socket's name in the proxy's directory: the kubelet's own, so that a consumer only changes the
directory it mounts."""
_STOP_GRACE_SECONDS = 1.0


class PodResourcesProxy:
    def __init__(
        self, node_name: str, kubelet_socket: Path, proxy_dir: Path, *, retry_seconds: float = 10.0
    ) -> None:
        self.node_name = node_name
        self.kubelet_socket = kubelet_socket
        self.socket = proxy_dir / PROXY_SOCKET_NAME
        self.retry_seconds = retry_seconds

    async def run(self, states: States) -> None:
        """Serve until cancelled; an unexpected failure is logged and the proxy started again, so that
        it never takes koordlet's other loops down."""
        while True:
            try:
                await self._serve(states)
            except Exception:
                log.exception("the PodResources proxy failed; starting it again in %gs", self.retry_seconds)
            await asyncio.sleep(self.retry_seconds)

    async def _serve(self, states: States) -> None:
        await self._wait_for_kubelet()
        await states.wait_synced(Kind.POD)
        async with PodResourcesClient(self.kubelet_socket) as kubelet:
            servicer = PodResourcesProxyServicer(kubelet, lambda: states.pods(self.node_name))
            reported = False
            while True:
                try:
                    server = await start_server(servicer, self.socket)
                    break
                except (OSError, RuntimeError) as exc:
                    if not reported:
                        log.error(
                            "cannot serve the PodResources proxy on %s: %s; retrying every %gs",
                            self.socket,
                            exc,
                            self.retry_seconds,
                        )
                        reported = True
                    await asyncio.sleep(self.retry_seconds)
            log.info("PodResources proxy serving on %s (the kubelet's %s)", self.socket, self.kubelet_socket)
            try:
                # Shielded: a cancel that reached grpc's own wait cancelled the future its stop
                # waits on too, so that stop raised and the socket was left behind.
                await asyncio.shield(server.wait_for_termination())
            finally:
                try:
                    await server.stop(_STOP_GRACE_SECONDS)
                finally:
                    self.socket.unlink(missing_ok=True)

    async def _wait_for_kubelet(self) -> None:
        for attempt in itertools.count():
            if self.kubelet_socket.is_socket():
                if attempt:
                    log.info("the kubelet's pod-resources socket %s is there", self.kubelet_socket)
                return
            if not attempt:
                log.warning(
                    "the kubelet's pod-resources socket %s is not there; the PodResources proxy waits "
                    "for it (looking every %gs)",
                    self.kubelet_socket,
                    self.retry_seconds,
                )
            await asyncio.sleep(self.retry_seconds)
