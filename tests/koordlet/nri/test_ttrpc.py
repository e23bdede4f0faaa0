"""ttrpc's framing and unary calls, over in-memory streams."""

from __future__ import annotations

import asyncio
import struct

import pytest

from koordlet.nri.proto import ttrpc_pb2
from koordlet.nri.ttrpc import (
    MESSAGE_LENGTH_MAX,
    Client,
    Code,
    Frame,
    MessageType,
    OversizedMessage,
    RPCError,
    Server,
    encode_frame,
    read_frame,
)


def _stream(data: bytes = b"", *, eof: bool = True) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    if eof:
        reader.feed_eof()
    return reader


def test_the_header_is_length_stream_type_flags_big_endian() -> None:
    encoded = encode_frame(Frame(stream_id=3, type=MessageType.REQUEST, flags=0, payload=b"abc"))
    assert encoded == struct.pack(">IIBB", 3, 3, 1, 0) + b"abc"


async def test_a_frame_round_trips() -> None:
    frame = Frame(stream_id=7, type=MessageType.RESPONSE, flags=2, payload=b"\x00\x01payload")
    assert await read_frame(_stream(encode_frame(frame))) == frame


async def test_a_frame_arriving_in_pieces_is_read_whole() -> None:
    encoded = encode_frame(Frame(5, MessageType.REQUEST, 0, b"x" * 1000))
    reader = asyncio.StreamReader()
    reading = asyncio.create_task(read_frame(reader))
    for start in range(0, len(encoded), 7):
        reader.feed_data(encoded[start : start + 7])
        await asyncio.sleep(0)
    assert (await reading).payload == b"x" * 1000


async def test_a_stream_cut_mid_frame_ends_the_reader() -> None:
    encoded = encode_frame(Frame(5, MessageType.REQUEST, 0, b"abcdef"))
    with pytest.raises(asyncio.IncompleteReadError):
        await read_frame(_stream(encoded[:-2]))


def test_an_oversized_payload_is_refused_when_sending() -> None:
    with pytest.raises(OversizedMessage):
        encode_frame(Frame(1, MessageType.REQUEST, 0, b"x" * (MESSAGE_LENGTH_MAX + 1)))


async def test_an_oversized_frame_is_skipped_and_the_next_one_read() -> None:
    big = MESSAGE_LENGTH_MAX + 10
    data = struct.pack(">IIBB", big, 9, 1, 0) + b"y" * big + encode_frame(Frame(11, 1, 0, b"ok"))
    reader = _stream(data)
    with pytest.raises(OversizedMessage) as caught:
        await read_frame(reader)
    assert caught.value.stream_id == 9
    assert (await read_frame(reader)).payload == b"ok"


class Pipe:
    """Two ends of an in-memory duplex stream: what one end sends, the other reads."""

    def __init__(self) -> None:
        self.to_server = asyncio.StreamReader()
        self.to_client = asyncio.StreamReader()

    async def client_send(self, data: bytes) -> None:
        self.to_server.feed_data(data)

    async def server_send(self, data: bytes) -> None:
        self.to_client.feed_data(data)

    def close(self) -> None:
        self.to_server.feed_eof()
        self.to_client.feed_eof()


async def _echo(payload: bytes) -> bytes:
    return payload[::-1]


async def _boom(payload: bytes) -> bytes:
    raise RuntimeError("no")


async def test_a_call_is_answered_by_its_handler_and_errors_carry_their_code() -> None:
    pipe = Pipe()
    server = Server({"svc/Echo": _echo, "svc/Boom": _boom})
    client = Client(pipe.to_client, pipe.client_send)
    tasks = [
        asyncio.create_task(server.serve(pipe.to_server, pipe.server_send)),
        asyncio.create_task(client.run()),
    ]
    first, second = await asyncio.gather(
        client.call("svc", "Echo", b"abc"), client.call("svc", "Echo", b"xyz", deadline=5)
    )
    assert (first, second) == (b"cba", b"zyx")
    with pytest.raises(RPCError) as missing:
        await client.call("svc", "Nope", b"")
    assert missing.value.code == Code.UNIMPLEMENTED
    with pytest.raises(RPCError) as failed:
        await client.call("svc", "Boom", b"")
    assert failed.value.code == Code.INTERNAL
    pipe.close()
    await asyncio.gather(*tasks)
    with pytest.raises(RPCError) as closed:
        await client.call("svc", "Echo", b"")
    assert closed.value.code == Code.UNAVAILABLE


async def test_the_client_uses_odd_stream_ids_and_fails_pending_calls_when_the_stream_ends() -> None:
    pipe = Pipe()
    client = Client(pipe.to_client, pipe.client_send)
    running = asyncio.create_task(client.run())
    calls = [asyncio.create_task(client.call("svc", "M", b"")) for _ in range(2)]
    await asyncio.sleep(0.01)
    ids = [(await read_frame(pipe.to_server)).stream_id for _ in range(2)]
    assert ids == [1, 3]
    pipe.close()
    await running
    for call in calls:
        with pytest.raises(RPCError):
            await call


async def test_a_response_decodes_as_ttrpcs_envelope() -> None:
    pipe = Pipe()
    server = Server({"svc/Echo": _echo})
    serving = asyncio.create_task(server.serve(pipe.to_server, pipe.server_send))
    request = ttrpc_pb2.Request(service="svc", method="Echo", payload=b"12")
    await pipe.client_send(encode_frame(Frame(1, MessageType.REQUEST, 0, request.SerializeToString())))
    frame = await read_frame(pipe.to_client)
    response = ttrpc_pb2.Response.FromString(frame.payload)
    assert (frame.stream_id, frame.type, response.status.code, response.payload) == (1, 2, 0, b"21")
    pipe.close()
    await serving
