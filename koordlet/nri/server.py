"""koordlet's NRI connection: dial the runtime's socket, register the plugin, serve it until the
runtime goes, and dial again with exponential backoff (Koordinator's ``NriServer.keepAlive``).

One session: the socket is multiplexed (:mod:`koordlet.nri.mux`); the plugin's ttrpc server runs
on connection 1 and a ttrpc client on connection 2 calls ``Runtime.RegisterPlugin``; the runtime
then calls Configure and Synchronize, and from then on the container events. The session ends when
the runtime closes the socket (containerd restarting) or registration fails. While there is no
session the reconcile alone writes the cgroups, as it always does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from koordlet.config import NRIOptions
from koordlet.nri.mux import PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN, Mux
from koordlet.nri.plugin import RUNTIME_SERVICE, NRIPlugin
from koordlet.nri.proto import api_pb2
from koordlet.nri.ttrpc import Client, RPCError, Server

__all__ = ["NRIServer"]

log = logging.getLogger("koordlet.nri")


class NRIServer:
    def __init__(
        self,
        options: NRIOptions,
        plugin: NRIPlugin,
        *,
        on_connected: Callable[[bool], None] | None = None,
    ) -> None:
        self.options = options
        self.plugin = plugin
        self.on_connected = on_connected
        self.sessions = 0
        self._last_error = ""

    def _delay(self, failures: int) -> float:
        step = (failures - 1) % self.options.backoff_steps
        delay = self.options.backoff_seconds * self.options.backoff_factor**step
        return float(min(delay, self.options.backoff_cap_seconds))

    async def run(self) -> None:
        failures = 0
        while True:
            registered = False
            try:
                registered = await self.session()
            except (OSError, RPCError, TimeoutError, ValueError) as exc:
                message = f"{type(exc).__name__}: {exc}"
                if message != self._last_error:
                    log.warning("NRI: no connection to %s: %s", self.options.socket_path, message)
                    self._last_error = message
            failures = 0 if registered else failures + 1
            delay = self._delay(max(failures, 1))
            log.debug("NRI: dialling again in %.1f s", delay)
            await asyncio.sleep(delay)

    async def session(self) -> bool:
        """One connection, to its end; True when the plugin had registered."""
        timeout = self.options.connect_timeout_seconds
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(str(self.options.socket_path)), timeout
        )
        mux = Mux(reader, writer)
        server = Server(self.plugin.handlers())
        client = Client(mux.open(RUNTIME_SERVICE_CONN), mux.sender(RUNTIME_SERVICE_CONN))
        tasks = [
            asyncio.create_task(mux.run(), name="nri-mux"),
            asyncio.create_task(
                server.serve(mux.open(PLUGIN_SERVICE_CONN), mux.sender(PLUGIN_SERVICE_CONN)),
                name="nri-plugin",
            ),
            asyncio.create_task(client.run(), name="nri-runtime-client"),
        ]
        registered = False
        try:
            request = api_pb2.RegisterPluginRequest(
                plugin_name=self.options.plugin_name, plugin_idx=self.options.plugin_index
            )
            await client.call(
                RUNTIME_SERVICE, "RegisterPlugin", request.SerializeToString(), deadline=timeout
            )
            registered = True
            self.sessions += 1
            self._last_error = ""
            log.info(
                "NRI: registered as %s-%s at %s",
                self.options.plugin_index,
                self.options.plugin_name,
                self.options.socket_path,
            )
            if self.on_connected is not None:
                self.on_connected(True)
            await tasks[0]
            log.warning("NRI: the runtime closed the connection; the reconcile alone applies settings")
        finally:
            if registered and self.on_connected is not None:
                self.on_connected(False)
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            mux.close()
        return registered
