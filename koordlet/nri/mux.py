"""NRI's connection multiplexer: several byte streams over one socket (``pkg/net/multiplex``).

NRI runs two ttrpc connections over the one unix socket a plugin opens: on connection 1 the
plugin serves the ``Plugin`` service, on connection 2 it calls the runtime's ``Runtime`` service.
Each write is cut into chunks of at most ``MAX_PAYLOAD`` bytes, each sent behind an 8-byte header
(connection id uint32, chunk length uint32, big-endian); the reader feeds every chunk into its
connection's stream. Id 0 is reserved.
"""

from __future__ import annotations

import asyncio
import logging
import struct

from koordlet.nri.ttrpc import HEADER as TTRPC_HEADER
from koordlet.nri.ttrpc import MESSAGE_LENGTH_MAX, Send

__all__ = ["MAX_PAYLOAD", "PLUGIN_SERVICE_CONN", "RUNTIME_SERVICE_CONN", "Mux", "MuxError"]

log = logging.getLogger("koordlet.nri")

HEADER = struct.Struct(">II")
MAX_PAYLOAD = TTRPC_HEADER.size + MESSAGE_LENGTH_MAX
"""The largest chunk either side writes: one whole ttrpc message."""
PLUGIN_SERVICE_CONN = 1
RUNTIME_SERVICE_CONN = 2


class MuxError(ValueError):
    pass


class Mux:
    """The connections of one trunk: :meth:`open` them, then :meth:`run` reads until the trunk ends."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._conns: dict[int, asyncio.StreamReader] = {}
        self._lock = asyncio.Lock()

    def open(self, conn_id: int) -> asyncio.StreamReader:
        """The stream that connection ``conn_id``'s bytes arrive on (the same one on each call)."""
        if conn_id == 0:
            raise MuxError("connection id 0 is reserved")
        if conn_id not in self._conns:
            self._conns[conn_id] = asyncio.StreamReader(limit=MAX_PAYLOAD)
        return self._conns[conn_id]

    def sender(self, conn_id: int) -> Send:
        async def send(data: bytes) -> None:
            await self.write(conn_id, data)

        return send

    async def write(self, conn_id: int, data: bytes) -> None:
        async with self._lock:
            view = memoryview(data)
            while True:
                chunk = view[:MAX_PAYLOAD]
                self._writer.write(HEADER.pack(conn_id, len(chunk)) + chunk)
                view = view[len(chunk) :]
                if not view:
                    break
            await self._writer.drain()

    async def run(self) -> None:
        """Route chunks to their connections until the trunk ends; then every connection ends.
        Raises MuxError for a chunk over ``MAX_PAYLOAD`` (the trunk is out of step after it)."""
        try:
            while True:
                try:
                    conn_id, length = HEADER.unpack(await self._reader.readexactly(HEADER.size))
                except asyncio.IncompleteReadError:
                    return
                if length > MAX_PAYLOAD:
                    raise MuxError(f"chunk of {length} bytes for connection {conn_id} exceeds {MAX_PAYLOAD}")
                try:
                    payload = await self._reader.readexactly(length)
                except asyncio.IncompleteReadError:
                    return
                stream = self._conns.get(conn_id)
                if stream is None:
                    log.debug("mux: dropping %d bytes for unopened connection %d", length, conn_id)
                    continue
                stream.feed_data(payload)
        finally:
            for stream in self._conns.values():
                stream.feed_eof()

    def close(self) -> None:
        self._writer.close()
