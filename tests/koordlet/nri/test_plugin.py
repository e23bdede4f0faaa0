"""koordlet's NRI plugin: the settings it answers CreateContainer with (the reconcile's cpuset rule
on the pod NRI hands over), and a whole session against a fake runtime on a unix socket."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from apis.core import Pod
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.config import NRIOptions
from koordlet.nri import adjust
from koordlet.nri.mux import PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN, Mux
from koordlet.nri.plugin import EVENTS, PLUGIN_SERVICE, RUNTIME_SERVICE, NRIPlugin, event_mask
from koordlet.nri.proto import api_pb2
from koordlet.nri.server import NRIServer
from koordlet.nri.ttrpc import Client, Server
from koordlet.qos.slo import effective_spec
from koordlet.topology.cpuset_rule import CPUSetRule

RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
POOLS = {"node.koordinator.sh/cpu-shared-pools": json.dumps([{"socket": 0, "node": 0, "cpuset": "4-7"}])}


def sandbox(
    name: str,
    *,
    qos: str | None = None,
    cpuset: str | None = None,
    parent: str = "/koordpy/kubepods/burstable/podu",
    annotations: dict[str, str] | None = None,
) -> api_pb2.PodSandbox:
    pod = api_pb2.PodSandbox(id=f"sb-{name}", name=name, namespace="default", uid=f"u-{name}")
    if qos:
        pod.labels["koordinator.sh/qosClass"] = qos
    if cpuset:
        pod.annotations[RESOURCE_STATUS] = json.dumps({"cpuset": cpuset})
    pod.annotations.update(annotations or {})
    pod.linux.cgroup_parent = parent
    return pod


class Pods:
    def __init__(
        self,
        rule: CPUSetRule | None = None,
        watched: dict[str, Pod] | None = None,
        slo: NodeSLOSpec | None = None,
        ratio: float | None = None,
    ) -> None:
        self.rule = rule or CPUSetRule()
        self.watched = watched or {}
        self.slo = effective_spec(slo)
        self.ratio = ratio

    def watched_pod(self, uid: str) -> Pod | None:
        return self.watched.get(uid)

    def cpuset_rule(self) -> CPUSetRule:
        return self.rule

    def node_slo_spec(self) -> NodeSLOSpec:
        return self.slo

    def cpu_normalization_ratio(self) -> float | None:
        return self.ratio


@pytest.mark.parametrize(
    ("parent", "expected"),
    [
        ("/kubepods/besteffort/pod1", "BestEffort"),
        ("kubepods-burstable-pod1.slice", "Burstable"),
        ("/koordpy-wta/kubepods/pod1", "Guaranteed"),
    ],
)
def test_the_kubernetes_qos_class_is_read_from_the_cgroup_parent(parent: str, expected: str) -> None:
    assert adjust.kube_qos_of_sandbox(sandbox("p", parent=parent)) == expected


@pytest.mark.parametrize(
    ("the_sandbox", "rule", "expected"),
    [
        (sandbox("lsr", qos="LSR", cpuset="3,2"), CPUSetRule(), adjust.ContainerSettings("2-3", True)),
        (sandbox("lse", qos="LSE", cpuset="0-1"), CPUSetRule(), adjust.ContainerSettings("0-1", True)),
        (sandbox("ls", qos="LS"), CPUSetRule.from_annotations(POOLS), adjust.ContainerSettings("4-7", False)),
        (sandbox("ls-no-topology", qos="LS"), CPUSetRule(), None),
        (
            sandbox("be", qos="BE", parent="/kubepods/besteffort/podu"),
            CPUSetRule.from_annotations(POOLS),
            None,
        ),
        (
            sandbox("lsr-unbound", qos="LSR", parent="/kubepods/podu"),
            CPUSetRule(kubelet_policy="static"),
            None,
        ),
    ],
    ids=lambda value: value.name if isinstance(value, api_pb2.PodSandbox) else None,
)
def test_a_container_gets_the_cpuset_the_reconcile_would_write(
    the_sandbox: api_pb2.PodSandbox, rule: CPUSetRule, expected: adjust.ContainerSettings | None
) -> None:
    pod = adjust.sandbox_pod(the_sandbox)
    assert adjust.container_settings(pod, rule) == expected


def test_the_adjustment_sets_the_cpuset_and_lifts_the_quota_of_a_bound_pod() -> None:
    adjustment = adjust.adjustment(adjust.ContainerSettings("2-3", True))
    assert adjustment.linux.resources.cpu.cpus == "2-3"
    assert adjustment.linux.resources.cpu.HasField("quota")
    assert adjustment.linux.resources.cpu.quota.value == -1
    shared = adjust.adjustment(adjust.ContainerSettings("4-7", False))
    assert not shared.linux.resources.cpu.HasField("quota")


def test_a_pod_with_gpus_gets_their_minors_in_nvidia_visible_devices() -> None:
    allocated = {"gpu": [{"minor": 1, "resources": {}}, {"minor": 3, "resources": {}}]}
    the_sandbox = sandbox(
        "gpu", annotations={"scheduling.koordinator.sh/device-allocated": json.dumps(allocated)}
    )
    settings = adjust.container_settings(adjust.sandbox_pod(the_sandbox), CPUSetRule())
    assert settings == adjust.ContainerSettings(env=(("NVIDIA_VISIBLE_DEVICES", "1,3"),))
    adjustment = adjust.adjustment(settings)
    assert [(kv.key, kv.value) for kv in adjustment.env] == [("NVIDIA_VISIBLE_DEVICES", "1,3")]
    assert not adjustment.HasField("linux")
    assert adjust.update("c1", settings) is None


def test_the_watched_pods_qos_class_wins_over_the_cgroup_parent() -> None:
    watched = Pod.model_validate({"metadata": {"uid": "u-p"}, "status": {"qosClass": "BestEffort"}})
    assert adjust.sandbox_pod(sandbox("p"), watched).status.qos_class == "BestEffort"


def test_the_event_mask_has_one_bit_per_event() -> None:
    assert event_mask((api_pb2.CREATE_CONTAINER, api_pb2.UPDATE_CONTAINER)) == (1 << 3) | (1 << 7)


def test_the_plugin_subscribes_to_the_pod_events_and_the_container_ones() -> None:
    """RunPodSandbox for the pod cgroup's settings, RemovePodSandbox for its resctrl group."""
    assert set(EVENTS) == {
        api_pb2.RUN_POD_SANDBOX,
        api_pb2.REMOVE_POD_SANDBOX,
        api_pb2.CREATE_CONTAINER,
        api_pb2.UPDATE_CONTAINER,
    }


async def test_a_bad_resource_status_creates_the_container_unchanged() -> None:
    plugin = NRIPlugin(Pods())
    bad = sandbox("bad", qos="LSR", annotations={RESOURCE_STATUS: '{"cpuset": 3}'})
    response = await plugin.create_container(api_pb2.CreateContainerRequest(pod=bad))
    assert not response.HasField("adjust")


async def test_an_update_keeps_the_cpuset() -> None:
    plugin = NRIPlugin(Pods())
    request = api_pb2.UpdateContainerRequest(
        pod=sandbox("lsr", qos="LSR", cpuset="1"), container=api_pb2.Container(id="c1")
    )
    response = await plugin.update_container(request)
    assert [(u.container_id, u.linux.resources.cpu.cpus) for u in response.update] == [("c1", "1")]


class FakeRuntime:
    """containerd's side of NRI: accepts a plugin, takes its registration, configures it and
    creates one container."""

    def __init__(self, path: Path, the_sandbox: api_pb2.PodSandbox) -> None:
        self.path = path
        self.sandbox = the_sandbox
        self.registered: list[api_pb2.RegisterPluginRequest] = []
        self.events = 0
        self.created: asyncio.Future[api_pb2.CreateContainerResponse] | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        mux = Mux(reader, writer)
        registered = asyncio.Event()

        async def register(payload: bytes) -> bytes:
            self.registered.append(api_pb2.RegisterPluginRequest.FromString(payload))
            registered.set()
            return api_pb2.Empty().SerializeToString()

        server = Server({f"{RUNTIME_SERVICE}/RegisterPlugin": register})
        client = Client(mux.open(PLUGIN_SERVICE_CONN), mux.sender(PLUGIN_SERVICE_CONN))
        tasks = [
            asyncio.create_task(mux.run()),
            asyncio.create_task(
                server.serve(mux.open(RUNTIME_SERVICE_CONN), mux.sender(RUNTIME_SERVICE_CONN))
            ),
            asyncio.create_task(client.run()),
        ]
        await registered.wait()
        configured = await client.call(
            PLUGIN_SERVICE, "Configure", api_pb2.ConfigureRequest(runtime_name="fake").SerializeToString()
        )
        self.events = api_pb2.ConfigureResponse.FromString(configured).events
        await client.call(PLUGIN_SERVICE, "Synchronize", api_pb2.SynchronizeRequest().SerializeToString())
        request = api_pb2.CreateContainerRequest(pod=self.sandbox, container=api_pb2.Container(name="main"))
        answer = await client.call(PLUGIN_SERVICE, "CreateContainer", request.SerializeToString())
        assert self.created is not None
        self.created.set_result(api_pb2.CreateContainerResponse.FromString(answer))
        writer.close()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_session_registers_then_answers_create_container_and_redials_after_the_runtime_goes(
    tmp_path: Path,
) -> None:
    runtime = FakeRuntime(tmp_path / "nri.sock", sandbox("lsr", qos="LSR", cpuset="2-3"))
    runtime.created = asyncio.get_running_loop().create_future()
    listener = await asyncio.start_unix_server(runtime.accept, path=str(runtime.path))
    states: list[bool] = []
    recorded: list[tuple[str, str]] = []
    plugin = NRIPlugin(Pods(), record=lambda event, cpuset: recorded.append((event, cpuset)))
    options = NRIOptions(socket_path=runtime.path, plugin_name="koordlet_nri", backoff_seconds=0.05)
    server = NRIServer(options, plugin, on_connected=states.append)
    running = asyncio.create_task(server.run())
    created = await asyncio.wait_for(runtime.created, 5)
    assert created.adjust.linux.resources.cpu.cpus == "2-3"
    assert [(r.plugin_name, r.plugin_idx) for r in runtime.registered] == [("koordlet_nri", "00")]
    assert runtime.events == event_mask(EVENTS)
    assert recorded == [("CreateContainer", "2-3")]
    runtime.created = asyncio.get_running_loop().create_future()
    await asyncio.wait_for(runtime.created, 5)
    assert server.sessions == 2
    assert states[:3] == [True, False, True]
    running.cancel()
    listener.close()
    await listener.wait_closed()
    with pytest.raises(asyncio.CancelledError):
        await running


async def test_without_a_socket_the_server_keeps_dialling_with_backoff(tmp_path: Path) -> None:
    options = NRIOptions(socket_path=tmp_path / "missing.sock", backoff_seconds=1, backoff_factor=2)
    server = NRIServer(options, NRIPlugin(Pods()))
    assert [server._delay(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 8]
    capped = NRIServer(options.model_copy(update={"backoff_cap_seconds": 3}), NRIPlugin(Pods()))
    assert capped._delay(4) == 3
    with pytest.raises(FileNotFoundError):
        await server.session()
