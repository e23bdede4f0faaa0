"""ttrpc, containerd's small RPC protocol, over one byte stream (asyncio).

A message is a 10-byte header (payload length uint32, stream id uint32, both big-endian; message
type; flags) and a protobuf payload of at most 4 MiB. A call is one ``Request`` frame (service,
method, payload) from the client on an odd stream id the client picks, answered by one ``Response``
frame (a status and a payload) on the same id. NRI uses unary calls only, so streams, data frames
and their flags are not implemented; a data frame is dropped.

:class:`Server` answers calls with async handlers keyed by ``"service/method"``; :class:`Client`
sends them. Both read through :func:`read_frame` and write whole frames with a ``send`` callable,
so that they work on a socket as well as on one connection of :mod:`koordlet.nri.mux`.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from koordlet.nri.proto import ttrpc_pb2

__all__ = [
    "MESSAGE_LENGTH_MAX",
    "Client",
    "Code",
    "Frame",
    "Handler",
    "MessageType",
    "OversizedMessage",
    "RPCError",
    "Send",
    "Server",
    "encode_frame",
    "read_frame",
]

log = logging.getLogger("koordlet.nri")

HEADER = struct.Struct(">IIBB")
MESSAGE_LENGTH_MAX = 4 << 20
"""ttrpc's ``messageLengthMax``: a longer payload is refused on both sides."""

Send = Callable[[bytes], Awaitable[None]]
Handler = Callable[[bytes], Awaitable[bytes]]
"""A unary method: the request's protobuf bytes in, the response's out."""


class MessageType(enum.IntEnum):
    REQUEST = 1
    RESPONSE = 2
    DATA = 3


class Code(enum.IntEnum):
    """The gRPC status codes ttrpc answers with (google.golang.org/grpc/codes)."""

    OK = 0
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    RESOURCE_EXHAUSTED = 8
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14


class OversizedMessage(ValueError):
    def __init__(self, length: int, stream_id: int = 0) -> None:
        super().__init__(f"message length {length} exceeds the maximum of {MESSAGE_LENGTH_MAX}")
        self.length = length
        self.stream_id = stream_id


class RPCError(Exception):
    """A call answered with a status other than OK, or not answered because the connection went."""

    def __init__(self, code: int, message: str) -> None:
        name = Code(code).name if code in Code.__members__.values() else str(code)
        super().__init__(f"{name}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Frame:
    stream_id: int
    type: int
    flags: int
    payload: bytes


def encode_frame(frame: Frame) -> bytes:
    if len(frame.payload) > MESSAGE_LENGTH_MAX:
        raise OversizedMessage(len(frame.payload), frame.stream_id)
    return HEADER.pack(len(frame.payload), frame.stream_id, frame.type, frame.flags) + frame.payload


async def read_frame(reader: asyncio.StreamReader) -> Frame:
    """The next frame; raises IncompleteReadError at the end of the stream and OversizedMessage,
    after skipping the payload, for one over the limit (the stream stays usable, as in ttrpc)."""
    length, stream_id, kind, flags = HEADER.unpack(await reader.readexactly(HEADER.size))
    if length > MESSAGE_LENGTH_MAX:
        left = length
        while left:
            left -= len(await reader.readexactly(min(left, 1 << 16)))
        raise OversizedMessage(length, stream_id)
    payload = await reader.readexactly(length) if length else b""
    return Frame(stream_id, kind, flags, payload)


def _response(stream_id: int, code: int, message: str = "", payload: bytes = b"") -> bytes:
    response = ttrpc_pb2.Response(payload=payload)
    if code != Code.OK:
        response.status.code = code
        response.status.message = message
    return encode_frame(Frame(stream_id, MessageType.RESPONSE, 0, response.SerializeToString()))


class Server:
    """Answers the calls that arrive on one stream, each in a task of its own, until it ends."""

    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        self.handlers = dict(handlers)

    async def serve(self, reader: asyncio.StreamReader, send: Send) -> None:
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                try:
                    frame = await read_frame(reader)
                except OversizedMessage as exc:
                    await send(_response(exc.stream_id, Code.RESOURCE_EXHAUSTED, str(exc)))
                    continue
                except asyncio.IncompleteReadError:
                    return
                if frame.type != MessageType.REQUEST:
                    log.debug("ttrpc server: dropping a frame of type %d", frame.type)
                    continue
                task = asyncio.create_task(self._answer(frame, send))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            for task in tasks:
                task.cancel()

    async def _answer(self, frame: Frame, send: Send) -> None:
        request = ttrpc_pb2.Request()
        try:
            request.ParseFromString(frame.payload)
        except Exception as exc:  # protobuf raises its DecodeError or a plain ValueError
            await send(_response(frame.stream_id, Code.INVALID_ARGUMENT, f"bad request: {exc}"))
            return
        name = f"{request.service}/{request.method}"
        handler = self.handlers.get(name)
        if handler is None:
            await send(_response(frame.stream_id, Code.UNIMPLEMENTED, f"{name} is not implemented"))
            return
        try:
            payload = await handler(request.payload)
        except Exception as exc:
            log.exception("ttrpc server: %s failed", name)
            await send(_response(frame.stream_id, Code.INTERNAL, f"{name}: {exc}"))
            return
        try:
            await send(_response(frame.stream_id, Code.OK, payload=payload))
        except OversizedMessage as exc:
            await send(_response(frame.stream_id, Code.RESOURCE_EXHAUSTED, str(exc)))


class Client:
    """Calls over one stream; :meth:`run` reads the responses and must run while calls are made."""

    def __init__(self, reader: asyncio.StreamReader, send: Send) -> None:
        self.reader = reader
        self.send = send
        self._ids = itertools.count(1, 2)
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._closed: str | None = None

    async def run(self) -> None:
        try:
            while True:
                try:
                    frame = await read_frame(self.reader)
                except OversizedMessage as exc:
                    self._fail(exc.stream_id, RPCError(Code.RESOURCE_EXHAUSTED, str(exc)))
                    continue
                if frame.type != MessageType.RESPONSE:
                    continue
                future = self._pending.pop(frame.stream_id, None)
                if future is None or future.done():
                    continue
                response = ttrpc_pb2.Response()
                try:
                    response.ParseFromString(frame.payload)
                except Exception as exc:
                    future.set_exception(RPCError(Code.INTERNAL, f"bad response: {exc}"))
                    continue
                if response.status.code != Code.OK:
                    future.set_exception(RPCError(response.status.code, response.status.message))
                else:
                    future.set_result(response.payload)
        except asyncio.IncompleteReadError:
            pass
        finally:
            self._closed = "connection closed"
            for stream_id in list(self._pending):
                self._fail(stream_id, RPCError(Code.UNAVAILABLE, self._closed))

    def _fail(self, stream_id: int, error: RPCError) -> None:
        future = self._pending.pop(stream_id, None)
        if future is not None and not future.done():
            future.set_exception(error)

    async def call(
        self, service: str, method: str, payload: bytes, *, deadline: float | None = None
    ) -> bytes:
        if self._closed is not None:
            raise RPCError(Code.UNAVAILABLE, self._closed)
        stream_id = next(self._ids)
        request = ttrpc_pb2.Request(service=service, method=method, payload=payload)
        if deadline is not None:
            request.timeout_nano = int(deadline * 1e9)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[stream_id] = future
        try:
            await self.send(
                encode_frame(Frame(stream_id, MessageType.REQUEST, 0, request.SerializeToString()))
            )
            async with asyncio.timeout(deadline):
                return await future
        except TimeoutError:
            raise RPCError(Code.DEADLINE_EXCEEDED, f"{service}/{method}: no answer in {deadline} s") from None
        finally:
            self._pending.pop(stream_id, None)
            if not future.done():
                future.cancel()
