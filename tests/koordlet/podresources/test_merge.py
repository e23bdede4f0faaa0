"""The devices of ``device-allocated``, added to the kubelet's List answer as Koordinator's
``fillPodDevicesAllocatedByKoord`` does (its test's cases first)."""

from __future__ import annotations

import pytest

from apis.core import Pod
from koordlet.podresources.api import api_pb2
from koordlet.podresources.merge import annotations_by_pod, fill_devices_allocated_by_koord
from tests.koordlet.podresources.builders import (
    GPU_AND_RDMA_VF,
    container,
    devices_of,
    listing,
    pod,
    pod_resources,
)

GPU_0 = '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100"},"id":"0"}]}'
RDMA_PF = '{"rdma":[{"minor":1,"resources":{"koordinator.sh/rdma":"100"},"id":"0000:1f:00.0"}]}'


def _merge(kubelet: api_pb2.ListPodResourcesResponse, *pods: Pod) -> api_pb2.ListPodResourcesResponse:
    merged, _ = fill_devices_allocated_by_koord(kubelet, annotations_by_pod(pods))
    return merged


def _listed(*names: str) -> api_pb2.ListPodResourcesResponse:
    return listing(*(pod_resources(name, container()) for name in names))


@pytest.mark.parametrize(
    ("listed", "pods", "want"),
    [
        pytest.param(
            ("a",),
            [pod("a", allocated=GPU_AND_RDMA_VF)],
            {"ns/a": [[("koordinator.sh/rdma", ["0000:01:00.2"]), ("nvidia.com/gpu", ["0"])]]},
            id="an RDMA VF by its bus id, sorted by resource name",
        ),
        pytest.param(
            ("b", "a"),
            [pod("b"), pod("a", allocated=GPU_AND_RDMA_VF)],
            {"ns/b": [[]], "ns/a": [[("koordinator.sh/rdma", ["0000:01:00.2"]), ("nvidia.com/gpu", ["0"])]]},
            id="only the pod with the annotation gains devices",
        ),
        pytest.param(
            ("a",), [pod("a", allocated=GPU_0)], {"ns/a": [[("nvidia.com/gpu", ["0"])]]}, id="a GPU"
        ),
        pytest.param(
            ("a",),
            [pod("a", allocated=RDMA_PF)],
            {"ns/a": [[("koordinator.sh/rdma", ["0000:1f:00.0"])]]},
            id="an RDMA NIC without VFs by its id",
        ),
        pytest.param(
            ("a",),
            [pod("a", allocated=GPU_0, namespace="other")],
            {"ns/a": [[]]},
            id="a pod the API server does not have is left as the kubelet answered",
        ),
        pytest.param(("a",), [pod("a", allocated="invalid-json")], {"ns/a": [[]]}, id="a bad annotation"),
        pytest.param(
            ("a",),
            [pod("a", allocated='{"fpga":[{"minor":2,"resources":{},"id":"f2"}]}')],
            {"ns/a": [[("", ["f2"])]]},
            id="another device type keeps Koordinator's empty resource name",
        ),
        pytest.param(
            ("a",),
            [pod("a", allocated='{"rdma":[{"minor":1,"resources":{},"id":"x","extension":{}}]}')],
            {"ns/a": [[("koordinator.sh/rdma", [])]]},
            id="an extension without VFs gives no ids, as Koordinator's",
        ),
    ],
)
def test_koord_devices_join_the_first_container(
    listed: tuple[str, ...], pods: list[Pod], want: dict[str, list[list[tuple[str, list[str]]]]]
) -> None:
    assert devices_of(_merge(_listed(*listed), *pods)) == want


def test_the_kubelets_devices_and_cpus_stay_and_come_first_on_a_tie() -> None:
    kubelet = listing(
        pod_resources(
            "a",
            container("first", devices={"nvidia.com/gpu": ["GPU-1"], "example.com/foo": ["f"]}, cpus=(2, 3)),
            container("second", devices={"example.com/bar": ["b"]}),
        )
    )
    merged = _merge(kubelet, pod("a", allocated=GPU_AND_RDMA_VF))
    assert devices_of(merged) == {
        "ns/a": [
            [
                ("example.com/foo", ["f"]),
                ("koordinator.sh/rdma", ["0000:01:00.2"]),
                ("nvidia.com/gpu", ["GPU-1"]),
                ("nvidia.com/gpu", ["0"]),
            ],
            [("example.com/bar", ["b"])],
        ]
    }
    assert list(merged.pod_resources[0].containers[0].cpu_ids) == [2, 3]


def test_the_kubelets_answer_is_not_changed() -> None:
    kubelet = _listed("a")
    before = kubelet.SerializeToString()
    assert devices_of(_merge(kubelet, pod("a", allocated=GPU_0))) == {"ns/a": [[("nvidia.com/gpu", ["0"])]]}
    assert kubelet.SerializeToString() == before


def test_a_pod_without_containers_gains_nothing() -> None:
    assert devices_of(_merge(listing(pod_resources("a")), pod("a", allocated=GPU_0))) == {"ns/a": []}


def test_pods_whose_annotation_does_not_parse_are_named() -> None:
    pods = [pod("a", allocated="{"), pod("b", allocated=GPU_0), pod("c", allocated='{"gpu":[{"id":"0"}]}')]
    _, unparsed = fill_devices_allocated_by_koord(_listed("a", "b", "c"), annotations_by_pod(pods))
    # Go's decoder would take {"id":"0"} with minor 0; apis.extension.device wants minor and resources,
    # which koord-scheduler always writes.
    assert unparsed == ["ns/a", "ns/c"]
