"""The proxy end to end over unix sockets: a fake kubelet, the proxy koordlet runs, and our client."""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from grpc import aio

from koordlet.podresources.api import api_pb2
from koordlet.podresources.client import PodResourcesClient
from koordlet.podresources.proxy import PodResourcesProxy
from koordlet.states.resources import Kind
from koordlet.states.store import States
from tests.koordlet.podresources.builders import (
    GPU_AND_RDMA_VF,
    container,
    devices_of,
    listing,
    pod,
    pod_resources,
)
from tests.koordlet.podresources.fake_kubelet import FakeKubelet

KUBELET = listing(
    pod_resources("lsr", container(cpus=(1,))),
    pod_resources("rdma", container(devices={"example.com/nic": ["n0"]}), container("side")),
)
ALLOCATABLE = api_pb2.AllocatableResourcesResponse(cpu_ids=[0, 1])


@pytest.fixture
def sockets() -> Iterator[Path]:
    """A short directory: a unix socket's path has at most 107 bytes."""
    directory = Path(tempfile.mkdtemp(prefix="podres-", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _states() -> States:
    states = States()
    pods = [pod("lsr"), pod("rdma", allocated=GPU_AND_RDMA_VF), pod("elsewhere", node="n2")]
    states.replace(Kind.POD, pods)
    return states


async def _wait_for(path: Path) -> None:
    for _ in range(500):
        if path.is_socket():  # noqa: ASYNC240 (a test's poll)
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


@pytest_asyncio.fixture(loop_scope="function")
async def proxied(sockets: Path) -> AsyncIterator[tuple[FakeKubelet, PodResourcesClient]]:
    kubelet = FakeKubelet(KUBELET, ALLOCATABLE)
    kubelet_socket = sockets / "kubelet" / "kubelet.sock"
    server = await kubelet.serve(kubelet_socket)
    proxy = PodResourcesProxy("n1", kubelet_socket, sockets / "proxy", retry_seconds=0.01)
    task = asyncio.create_task(proxy.run(_states()))
    await _wait_for(proxy.socket)
    async with PodResourcesClient(proxy.socket) as client:
        yield kubelet, client
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await server.stop(None)


async def test_list_is_the_kubelets_answer_with_koords_devices(
    proxied: tuple[FakeKubelet, PodResourcesClient],
) -> None:
    kubelet, client = proxied
    answer = await client.list()
    assert devices_of(answer) == {
        "ns/lsr": [[]],
        "ns/rdma": [
            [
                ("example.com/nic", ["n0"]),
                ("koordinator.sh/rdma", ["0000:01:00.2"]),
                ("nvidia.com/gpu", ["0"]),
            ],
            [],
        ],
    }
    assert list(answer.pod_resources[0].containers[0].cpu_ids) == [1]
    assert kubelet.calls == ["List"]


async def test_allocatable_and_get_are_the_kubelets_answers(
    proxied: tuple[FakeKubelet, PodResourcesClient],
) -> None:
    kubelet, client = proxied
    assert await client.get_allocatable_resources() == ALLOCATABLE
    got = await client.get("ns", "rdma")
    assert got.pod_resources == KUBELET.pod_resources[1]  # Koordinator's Get adds nothing either
    assert kubelet.calls == ["GetAllocatableResources", "Get ns/rdma"]


async def test_a_kubelet_error_reaches_the_caller_with_its_status(
    proxied: tuple[FakeKubelet, PodResourcesClient],
) -> None:
    _, client = proxied
    with pytest.raises(aio.AioRpcError) as caught:
        await client.get("ns", "gone")
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND
    assert caught.value.details() == "pod gone not found in ns"


async def test_a_missing_kubelet_socket_is_reported_once_then_the_proxy_starts_and_stops_cleanly(
    sockets: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kubelet_socket = sockets / "kubelet" / "kubelet.sock"
    proxy = PodResourcesProxy("n1", kubelet_socket, sockets / "proxy", retry_seconds=0.01)
    with caplog.at_level(logging.INFO, logger="koordlet.podresources"):
        task = asyncio.create_task(proxy.run(_states()))
        await asyncio.sleep(0.2)  # about 20 looks
        assert not task.done()
        assert not proxy.socket.exists()
        server = await FakeKubelet(KUBELET).serve(kubelet_socket)
        await _wait_for(proxy.socket)
        async with PodResourcesClient(proxy.socket) as client:
            assert len((await client.list()).pod_resources) == 2
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await server.stop(None)
    missing = [r for r in caplog.records if "is not there" in r.getMessage()]
    assert len(missing) == 1
    assert missing[0].levelno == logging.WARNING
    assert not proxy.socket.exists()  # stopping removed it


async def test_the_proxy_waits_for_its_pods_before_serving(sockets: Path) -> None:
    kubelet_socket = sockets / "kubelet.sock"
    server = await FakeKubelet(KUBELET).serve(kubelet_socket)
    states = States()
    proxy = PodResourcesProxy("n1", kubelet_socket, sockets / "proxy", retry_seconds=0.01)
    task = asyncio.create_task(proxy.run(states))
    await asyncio.sleep(0.1)
    assert not proxy.socket.exists()  # an answer without koord's devices would be wrong, not late
    states.replace(Kind.POD, [pod("rdma", allocated=GPU_AND_RDMA_VF)])
    await _wait_for(proxy.socket)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await server.stop(None)


async def test_a_stale_proxy_socket_is_replaced(sockets: Path) -> None:
    kubelet_socket = sockets / "kubelet.sock"
    server = await FakeKubelet(KUBELET).serve(kubelet_socket)
    (sockets / "proxy").mkdir()
    (sockets / "proxy" / "kubelet.sock").write_text("left by a koordlet that was killed")
    proxy = PodResourcesProxy("n1", kubelet_socket, sockets / "proxy", retry_seconds=0.01)
    task = asyncio.create_task(proxy.run(_states()))
    await _wait_for(proxy.socket)
    async with PodResourcesClient(proxy.socket) as client:
        assert len((await client.list()).pod_resources) == 2
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await server.stop(None)


async def test_an_unexpected_failure_is_logged_and_the_proxy_starts_again(
    sockets: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubelet_socket = sockets / "kubelet.sock"
    server = await FakeKubelet(KUBELET).serve(kubelet_socket)
    proxy = PodResourcesProxy("n1", kubelet_socket, sockets / "proxy", retry_seconds=0.01)
    failures = iter([ValueError("boom")])
    original = proxy._wait_for_kubelet

    async def flaky() -> None:
        for error in failures:
            raise error
        await original()

    monkeypatch.setattr(proxy, "_wait_for_kubelet", flaky)
    task = asyncio.create_task(proxy.run(_states()))
    await _wait_for(proxy.socket)
    assert any("failed; starting it again" in r.getMessage() for r in caplog.records)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await server.stop(None)


async def test_a_socket_it_cannot_serve_on_is_reported_once_and_retried(
    sockets: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kubelet_socket = sockets / "kubelet.sock"
    server = await FakeKubelet(KUBELET).serve(kubelet_socket)
    (sockets / "not-a-dir").write_text("")
    proxy = PodResourcesProxy("n1", kubelet_socket, sockets / "not-a-dir", retry_seconds=0.01)
    task = asyncio.create_task(proxy.run(_states()))
    await asyncio.sleep(0.2)
    assert not task.done()
    cannot = [r for r in caplog.records if "cannot serve the PodResources proxy" in r.getMessage()]
    assert len(cannot) == 1
    (sockets / "not-a-dir").unlink()  # the directory can be made now
    await _wait_for(proxy.socket)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await server.stop(None)
