"""NodeResourcesFitPlus and ScarceResourceAvoidance give Koordinator's scores (computed by hand below)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.plugins import node_resources_fit_plus as fit_plus
from scheduler.plugins import scarce_resource_avoidance as scarce
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.helpers import scores

GPU = "nvidia.com/gpu"
FPGA = "example.com/fpga"


def fit_plus_snapshot() -> Any:
    return make_snapshot(
        [
            make_node("a").alloc({GPU: "8"}, cpu="8", memory="32Gi").obj(),
            make_node("b").alloc({GPU: "8"}, cpu="8", memory="32Gi").obj(),
            make_node("c").alloc(cpu="8", memory="32Gi").obj(),
        ],
        assigned=[make_pod("trainer").req({GPU: "4"}, cpu="0", memory="1Gi").on("a").obj()],
    )


FIT_PLUS_ARGS = {
    "resources": {"cpu": {"type": "LeastAllocated", "weight": 1}, GPU: {"type": "MostAllocated", "weight": 2}}
}

FIT_PLUS_CASES = [
    # a: cpu (8000-1000)*100/8000 = 87, gpu (4+2)*100/8 = 75 -> (87 + 2*75) / 3 = 79
    # b: cpu 87, gpu 2*100/8 = 25 -> (87 + 50) / 3 = 45
    # c: cpu 87, no gpu: most-requested of capacity 0 is 0, its weight still counts -> 87 / 3 = 29
    pytest.param(
        make_pod("p").req({GPU: "2"}, cpu="1"), {"a": 79, "b": 45, "c": 29}, id="gpu-binpack-cpu-spread"
    ),
    # only cpu is requested and configured: 87 everywhere
    pytest.param(make_pod("p").req(cpu="1"), {"a": 87, "b": 87, "c": 87}, id="only-cpu"),
    # memory is requested but not configured, and cpu is not requested: nothing to score -> 100
    pytest.param(make_pod("p").req(memory="1Gi"), {"a": 100, "b": 100, "c": 100}, id="nothing-configured"),
    # cpu from a request-less second container counts 100m: (8000-1100)*100/8000 = 86
    pytest.param(make_pod("p").req(cpu="1").req(), {"a": 86, "b": 86, "c": 86}, id="non-zero-cpu-default"),
]


@pytest.mark.parametrize(("pod", "expected"), FIT_PLUS_CASES)
@pytest.mark.parametrize("pre_score", [True, False], ids=["with-prescore", "score-only"])
def test_fit_plus_scores(pod: Any, expected: dict[str, int], pre_score: bool) -> None:
    plugin = fit_plus.new(fit_plus.NodeResourcesFitPlusArgs.model_validate(FIT_PLUS_ARGS), handle=None)  # type: ignore[arg-type]
    assert scores(plugin, pod.info(), fit_plus_snapshot(), pre_score=pre_score) == expected


def test_fit_plus_args_wire_shape() -> None:
    args = fit_plus.NodeResourcesFitPlusArgs.model_validate(FIT_PLUS_ARGS)
    assert args.resources[GPU].type == "MostAllocated"
    assert args.resources[GPU].weight == 2
    assert fit_plus.NodeResourcesFitPlusArgs().resources == {}


def scarce_snapshot() -> Any:
    return make_snapshot(
        [
            make_node("gpu").alloc({GPU: "8"}, cpu="8", memory="32Gi").obj(),
            make_node("gpu-fpga").alloc({GPU: "8", FPGA: "2"}, cpu="8", memory="32Gi").obj(),
            make_node("plain").alloc(cpu="8", memory="32Gi").obj(),
            make_node("gpu-used-up").alloc({GPU: "0"}, cpu="8", memory="32Gi").obj(),
        ]
    )


SCARCE_CASES = [
    # gpu: diff {gpu}, scarce {gpu} -> (1-1)*100/1 = 0; gpu-fpga: diff {gpu, fpga}, scarce {gpu} -> 50;
    # plain: diff {} -> 100; a zero allocatable is not a resource the node has -> 100
    pytest.param(
        [GPU],
        make_pod("p").req(cpu="1", memory="1Gi"),
        {"gpu": 0, "gpu-fpga": 50, "plain": 100, "gpu-used-up": 100},
        id="cpu-pod-avoids-gpu-nodes",
    ),
    pytest.param(
        [GPU],
        make_pod("p").req({GPU: "1"}, cpu="1", memory="1Gi"),
        {"gpu": 100, "gpu-fpga": 100, "plain": 100, "gpu-used-up": 100},
        id="gpu-pod-is-not-penalized",
    ),
    # both scarce: gpu-fpga diff {gpu, fpga} all scarce -> 0
    pytest.param(
        [GPU, FPGA],
        make_pod("p").req(cpu="1", memory="1Gi"),
        {"gpu": 0, "gpu-fpga": 0, "plain": 100, "gpu-used-up": 100},
        id="two-scarce-resources",
    ),
    # memory not requested: gpu diff {memory, gpu}, scarce {gpu} -> 50; gpu-fpga {memory, gpu, fpga} -> 66
    pytest.param(
        [GPU],
        make_pod("p").req(cpu="1"),
        {"gpu": 50, "gpu-fpga": 66, "plain": 100, "gpu-used-up": 100},
        id="unrequested-plain-resources-dilute",
    ),
    pytest.param(
        [],
        make_pod("p").req(cpu="1"),
        {"gpu": 100, "gpu-fpga": 100, "plain": 100, "gpu-used-up": 100},
        id="none",
    ),
]


@pytest.mark.parametrize(("resources", "pod", "expected"), SCARCE_CASES)
def test_scarce_resource_avoidance_scores(resources: list[str], pod: Any, expected: dict[str, int]) -> None:
    plugin = scarce.new(scarce.ScarceResourceAvoidanceArgs(resources=resources), handle=None)  # type: ignore[arg-type]
    assert scores(plugin, pod.info(), scarce_snapshot()) == expected
