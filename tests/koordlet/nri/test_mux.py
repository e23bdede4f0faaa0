"""NRI's multiplexer: chunks with an 8-byte header, routed to their connection's stream."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from koordlet.nri.mux import MAX_PAYLOAD, Mux, MuxError


async def _pair() -> tuple[Mux, Mux]:
    left, right = socket.socketpair()
    a = Mux(*await asyncio.open_connection(sock=left))
    b = Mux(*await asyncio.open_connection(sock=right))
    return a, b


async def test_bytes_written_on_a_connection_arrive_on_the_same_connection() -> None:
    a, b = await _pair()
    one, two = b.open(1), b.open(2)
    a.open(1)
    running = asyncio.create_task(b.run())
    await a.write(2, b"second")
    await a.write(1, b"first")
    assert await two.readexactly(6) == b"second"
    assert await one.readexactly(5) == b"first"
    a.close()
    await running
    b.close()
    assert one.at_eof()
    assert two.at_eof()


async def test_a_large_write_is_cut_into_chunks_no_larger_than_one_ttrpc_message() -> None:
    left, right = socket.socketpair()
    mux = Mux(*await asyncio.open_connection(sock=left))
    raw_reader, raw_writer = await asyncio.open_connection(sock=right)
    data = bytes(range(256)) * (MAX_PAYLOAD // 256 + 10)
    writing = asyncio.create_task(mux.write(1, data))
    received = b""
    sizes = []
    while len(received) < len(data):
        conn, size = struct.unpack(">II", await raw_reader.readexactly(8))
        assert conn == 1
        sizes.append(size)
        received += await raw_reader.readexactly(size)
    await writing
    assert received == data
    assert sizes == [MAX_PAYLOAD, len(data) - MAX_PAYLOAD]
    mux.close()
    raw_writer.close()


async def test_a_chunk_split_across_reads_is_reassembled() -> None:
    left, right = socket.socketpair()
    mux = Mux(*await asyncio.open_connection(sock=left))
    stream = mux.open(1)
    running = asyncio.create_task(mux.run())
    frame = struct.pack(">II", 1, 5) + b"hello"
    for byte in frame:
        right.send(bytes([byte]))
        await asyncio.sleep(0)
    assert await stream.readexactly(5) == b"hello"
    right.close()
    await running
    mux.close()


async def test_an_oversized_chunk_breaks_the_trunk() -> None:
    left, right = socket.socketpair()
    mux = Mux(*await asyncio.open_connection(sock=left))
    stream = mux.open(1)
    right.send(struct.pack(">II", 1, MAX_PAYLOAD + 1))
    with pytest.raises(MuxError):
        await mux.run()
    assert stream.at_eof()
    right.close()
    mux.close()


async def test_chunks_for_an_unopened_connection_are_dropped() -> None:
    a, b = await _pair()
    one = b.open(1)
    running = asyncio.create_task(b.run())
    await a.write(7, b"nobody")
    await a.write(1, b"me")
    assert await one.readexactly(2) == b"me"
    a.close()
    await running
    b.close()


def test_connection_zero_is_reserved() -> None:
    with pytest.raises(MuxError):
        Mux.open(Mux.__new__(Mux), 0)
