"""NodeNUMAResource's PreFilter answer is kept per distinct pod fields: each field it reads tells
pods apart, equal pods share one answer."""

from __future__ import annotations

import json

from apis.extension.numa import ANNOTATION_RESOURCE_SPEC
from apis.extension.qos import LABEL_POD_QOS
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.node_numa_resource.pod_request import PodRequest, PodRequests
from tests.scheduler.builders import make_pod

FULL_PCPUS = json.dumps({"preferredCPUBindPolicy": "FullPCPUs"})


def _info(name: str, *, cpu: str = "4", qos: str | None = None, spec: str | None = None) -> PodInfo:
    builder = make_pod(name).req(cpu=cpu, memory="1Gi").priority(9000)
    if qos is not None:
        builder.label(LABEL_POD_QOS, qos)
    pod = builder.obj()
    if spec is not None:
        pod.metadata.annotations = {ANNOTATION_RESOURCE_SPEC: spec}
    return PodInfo.of(pod)


def test_replicas_share_one_answer() -> None:
    requests = PodRequests("None")
    first, second = (
        requests.of(_info("a", qos="LSR", spec=FULL_PCPUS)),
        requests.of(_info("b", qos="LSR", spec=FULL_PCPUS)),
    )
    assert isinstance(first, PodRequest)
    assert first is second
    assert first.cpu.bind
    assert first.cpu.bind_policy == "FullPCPUs"


def test_each_field_read_tells_pods_apart() -> None:
    requests = PodRequests("None")
    bound = requests.of(_info("a", qos="LSR", spec=FULL_PCPUS))
    assert isinstance(bound, PodRequest)
    assert bound.cpu.bind
    no_qos = requests.of(_info("b", spec=FULL_PCPUS))
    assert isinstance(no_qos, PodRequest)
    assert not no_qos.cpu.bind
    no_spec = requests.of(_info("c", qos="LSR"))
    assert isinstance(no_spec, PodRequest)
    assert not no_spec.cpu.bind
    fraction = requests.of(_info("d", cpu="1500m", qos="LSR", spec=FULL_PCPUS))
    assert isinstance(fraction, str)  # a bound pod needs whole CPUs
    assert isinstance(requests.of(_info("e", qos="LSR", spec="{not json")), str)


def test_default_bind_policy_applies_to_pods_without_one() -> None:
    answer = PodRequests("FullPCPUs").of(_info("a", qos="LSR"))
    assert isinstance(answer, PodRequest)
    assert answer.cpu.bind
    assert answer.cpu.implicit_spec
