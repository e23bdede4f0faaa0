"""koord-manager's CPU normalization controller on watch events: the node annotations it patches, the
amplification from the ratio just decided, and the Warning events for what it cannot honour."""

from __future__ import annotations

import json
import logging
from typing import Any

import kopf
import pytest

from apis.extension.numa import ANNOTATION_CPU_BASIC_INFO
from apis.extension.qosannotations import (
    ANNOTATION_CPU_NORMALIZATION_RATIO as RATIO,
)
from apis.extension.qosannotations import (
    ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO as AMPLIFICATION,
)
from apis.extension.qosannotations import LABEL_CPU_NORMALIZATION_ENABLED
from operators.handlers.cpu_normalization import CPUNormalization

LOG: Any = logging.getLogger("test")
MODEL = "Intel Xeon Platinum 8369B CPU @ 2.90GHz"
NORMALIZATION = {
    "enable": True,
    "ratioModel": {MODEL: {"hyperThreadTurboEnabledRatio": 1.2, "baseRatio": 1.69}},
}
AMPLIFICATION_CFG = {"enable": True, "resourceAmplificationRatio": {"cpu": 1.5, "memory": 1.25}}


def configmap(**data: object) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system", "uid": "cm"},
        "data": {
            k.replace("_", "-"): json.dumps(v) if not isinstance(v, str) else v for k, v in data.items()
        },
    }


def node(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": labels or {},
            "annotations": annotations or {},
        },
    }


def basic_info(ht: bool = True, turbo: bool = True) -> dict[str, str]:
    return {
        ANNOTATION_CPU_BASIC_INFO: json.dumps(
            {"cpuModel": MODEL, "hyperThreadEnabled": ht, "turboEnabled": turbo}
        )
    }


class FakeClient:
    def __init__(
        self, data: dict[str, str] | None = None, topologies: dict[str, dict[str, str]] | None = None
    ):
        self.data = data
        self.topologies = topologies or {}
        self.patches: list[tuple[str, dict[str, str | None]]] = []
        self.topology_reads: list[str] = []

    async def slo_config_map(self) -> dict[str, Any] | None:
        return None if self.data is None else {"data": self.data}

    async def get_nrt_annotations(self, name: str) -> dict[str, str] | None:
        self.topology_reads.append(name)
        return self.topologies.get(name)

    async def patch_node_annotations(self, name: str, annotations: dict[str, str | None]) -> None:
        self.patches.append((name, annotations))


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    posted: list[tuple[str, str, str]] = []

    def warn(obj: Any, *, reason: str, message: str = "") -> None:
        posted.append((obj["metadata"]["name"], reason, message))

    monkeypatch.setattr(kopf, "warn", warn)
    return posted


async def test_the_ratio_and_the_amplification_from_it_are_written_together(events: list[Any]) -> None:
    fake = FakeClient(
        {
            "cpu-normalization-config": json.dumps(NORMALIZATION),
            "resource-amplification-config": json.dumps(AMPLIFICATION_CFG),
        },
        {"n1": basic_info()},
    )
    handlers = CPUNormalization(fake)  # type: ignore[arg-type]
    await handlers.on_node(type=None, name="n1", body=node("n1"), logger=LOG)
    # 1.5 x 1.20: the ratio decided in this reconcile, not the one the node carried (none)
    assert fake.patches == [("n1", {RATIO: "1.20", AMPLIFICATION: '{"cpu":1.80,"memory":1.25}'})]
    assert fake.topology_reads == ["n1"]  # the node came first: its NRT was read, not waited for
    await handlers.on_node(
        type="MODIFIED", name="n1", body=node("n1", annotations=dict(fake.patches[0][1])), logger=LOG
    )  # type: ignore[arg-type]
    assert len(fake.patches) == 1
    # the NRT now reports neither hyper-threading nor turbo: the base ratio, amplified at once
    plain_cpu = {"metadata": {"annotations": basic_info(False, False)}}
    await handlers.on_topology(type="MODIFIED", name="n1", body=plain_cpu, logger=LOG)
    assert fake.patches[-1] == ("n1", {RATIO: "1.69", AMPLIFICATION: '{"cpu":2.54,"memory":1.25}'})
    # koordlet rewriting its other annotations changes nothing
    await handlers.on_topology(
        type="MODIFIED",
        name="n1",
        body={"metadata": {"annotations": {**basic_info(False, False), "x": "y"}}},
        logger=LOG,
    )
    assert len(fake.patches) == 2
    assert not events


async def test_the_node_label_disables_it_and_the_amplification_follows(events: list[Any]) -> None:
    fake = FakeClient({"cpu-normalization-config": json.dumps(NORMALIZATION)}, {"n1": basic_info()})
    handlers = CPUNormalization(fake)  # type: ignore[arg-type]
    current = {RATIO: "1.20", AMPLIFICATION: '{"cpu":1.20}'}
    await handlers.on_node(
        type=None, name="n1", body=node("n1", {LABEL_CPU_NORMALIZATION_ENABLED: "false"}, current), logger=LOG
    )
    assert fake.patches == [("n1", {RATIO: "1.00", AMPLIFICATION: None})]
    assert fake.topology_reads == []  # disabled: the NRT is not needed


async def test_a_bad_key_keeps_the_last_good_one_and_warns_on_the_configmap_once(events: list[Any]) -> None:
    fake = FakeClient(None, {"n1": basic_info()})
    handlers = CPUNormalization(fake)  # type: ignore[arg-type]
    await handlers.on_configmap(type=None, body=configmap(cpu_normalization_config=NORMALIZATION), logger=LOG)
    await handlers.on_node(type=None, name="n1", body=node("n1"), logger=LOG)
    assert fake.patches == [("n1", {RATIO: "1.20", AMPLIFICATION: '{"cpu":1.20}'})]
    bad = configmap(cpu_normalization_config='{"ratioModel": {"X": {"baseRatio": "fast"}}}')
    await handlers.on_configmap(type="MODIFIED", body=bad, logger=LOG)
    await handlers.on_configmap(type="MODIFIED", body=bad, logger=LOG)
    [(name, reason, message)] = events
    assert (name, reason) == ("slo-controller-config", "CPUNormalizationCfgUnmarshalFailed")
    assert message.startswith(
        "cpu-normalization-config: ratioModel.X.baseRatio: Input should be a valid number"
    )
    assert "the last good cpu-normalization-config stays in force" in message
    assert handlers.normalization.value is not None
    assert handlers.normalization.value.ratio_model is not None
    assert MODEL in handlers.normalization.value.ratio_model
    assert len(fake.patches) == 1


async def test_a_node_it_cannot_honour_keeps_its_annotation_and_gets_one_warning(events: list[Any]) -> None:
    unknown = {
        ANNOTATION_CPU_BASIC_INFO: json.dumps({"cpuModel": "AMD EPYC 7T83", "hyperThreadEnabled": True})
    }
    fake = FakeClient({"cpu-normalization-config": json.dumps(NORMALIZATION)}, {"n1": unknown})
    handlers = CPUNormalization(fake)  # type: ignore[arg-type]
    before = {RATIO: "1.35"}
    await handlers.on_node(type=None, name="n1", body=node("n1", annotations=before), logger=LOG)
    # the ratio stays; the amplification follows the ratio in force
    assert fake.patches == [("n1", {AMPLIFICATION: '{"cpu":1.35}'})]
    after = {**before, AMPLIFICATION: '{"cpu":1.35}'}
    await handlers.on_node(type="MODIFIED", name="n1", body=node("n1", annotations=after), logger=LOG)
    assert len(fake.patches) == 1
    [(name, reason, message)] = events
    assert (name, reason) == ("n1", "CPUNormalizationFailed")
    assert "ratioModel has no CPU model 'AMD EPYC 7T83'" in message
    # no NodeResourceTopology at all
    await handlers.on_node(type=None, name="n2", body=node("n2"), logger=LOG)
    assert events[-1][0] == "n2"
    assert "node n2 has no NodeResourceTopology" in events[-1][2]
    assert ("n2", {RATIO: "1.20"}) not in fake.patches


async def test_a_bad_key_before_any_good_one_leaves_the_nodes_and_is_posted_by_the_watch(
    events: list[Any],
) -> None:
    bad = {"cpu-normalization-config": '{"enable": "yes"}'}
    fake = FakeClient(bad, {"n1": basic_info()})
    handlers = CPUNormalization(fake)  # type: ignore[arg-type]
    await handlers.on_node(type=None, name="n1", body=node("n1", annotations={RATIO: "1.35"}), logger=LOG)
    # no normalization value in force: the ratio stays; the amplification follows it
    assert fake.patches == [("n1", {AMPLIFICATION: '{"cpu":1.35}'})]
    assert not events  # read at start, outside a watch event
    await handlers.on_configmap(
        type=None, body=configmap(cpu_normalization_config='{"enable": "yes"}'), logger=LOG
    )
    [(name, reason, message)] = events
    assert (name, reason) == ("slo-controller-config", "CPUNormalizationCfgUnmarshalFailed")
    assert message.startswith("cpu-normalization-config: enable: Input should be a valid boolean")
