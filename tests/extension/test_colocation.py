from __future__ import annotations

import pytest

from apis.errors import InvalidAnnotation
from apis.extension import colocation as c
from apis.quantity import Quantity


def test_resource_names() -> None:
    assert (c.BATCH_CPU, c.BATCH_MEMORY) == ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory")
    assert (c.MID_CPU, c.MID_MEMORY) == ("kubernetes.io/mid-cpu", "kubernetes.io/mid-memory")
    assert c.DEPRECATED_BATCH_RESOURCE_ALIASES["koordinator.sh/batch-cpu"] == "kubernetes.io/batch-cpu"
    assert c.ANNOTATION_EXTENDED_RESOURCE_SPEC == "node.koordinator.sh/extended-resource-spec"
    assert c.ANNOTATION_POD_REPLACE_RESOURCES == "pod.koordinator.sh/replace-resources"


@pytest.mark.parametrize(
    ("klass", "resource", "expected"),
    [
        ("koord-batch", "cpu", "kubernetes.io/batch-cpu"),
        ("koord-batch", "memory", "kubernetes.io/batch-memory"),
        ("koord-mid", "cpu", "kubernetes.io/mid-cpu"),
        ("koord-mid", "memory", "kubernetes.io/mid-memory"),
        ("koord-prod", "cpu", "cpu"),
        ("", "memory", "memory"),
        ("koord-free", "cpu", None),
        ("koord-batch", "nvidia.com/gpu", None),
    ],
)
def test_translate_resource_name(klass: str, resource: str, expected: str | None) -> None:
    assert c.translate_resource_name(klass, resource) == expected


def test_extended_resource_spec() -> None:
    spec = c.parse_extended_resource_spec(
        '{"containers": {"main": {"requests": {"kubernetes.io/batch-cpu": "500",'
        ' "kubernetes.io/batch-memory": "1Gi"},'
        ' "limits": {"kubernetes.io/batch-cpu": 1000}}}}'
    )
    assert spec.containers is not None
    main = spec.containers["main"]
    assert main.requests == {
        "kubernetes.io/batch-cpu": Quantity.parse("500"),
        "kubernetes.io/batch-memory": Quantity.parse("1Gi"),
    }
    assert main.limits == {"kubernetes.io/batch-cpu": Quantity.parse("1000")}
    assert c.get_extended_resource_spec({}) == c.ExtendedResourceSpec()


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param(
            '{"containers": [{"name": "main"}]}', "containers: Input should be an object", id="list"
        ),
        pytest.param(
            '{"containers": {"main": {"requests": {"cpu": "x"}}}}', "containers.main.requests.cpu", id="qty"
        ),
        pytest.param("test", "malformed JSON", id="koordlet-test-value"),
    ],
)
def test_extended_resource_spec_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        c.parse_extended_resource_spec(raw)
    assert caught.value.key == c.ANNOTATION_EXTENDED_RESOURCE_SPEC
    assert fragment in caught.value.problem


@pytest.mark.parametrize(
    ("raw", "replace", "erase", "ignored"),
    [
        pytest.param("a:b,c:d,e:", {"a": "b", "c": "d"}, ["e"], [], id="reference-format"),
        pytest.param(" a : b , e: ", {"a": "b"}, ["e"], [], id="trimmed"),
        pytest.param("", {}, [], [], id="empty"),
        pytest.param("a:b,bogus,x:y:z", {"a": "b"}, [], ["bogus", "x:y:z"], id="malformed-skipped"),
        pytest.param(
            "nvidia.com/gpu:koordinator.sh/gpu,cpu:",
            {"nvidia.com/gpu": "koordinator.sh/gpu"},
            ["cpu"],
            [],
            id="resource-names",
        ),
    ],
)
def test_replace_resources(raw: str, replace: dict[str, str], erase: list[str], ignored: list[str]) -> None:
    parsed = c.parse_replace_resources(raw)
    assert (parsed.replace, parsed.erase, parsed.ignored) == (replace, erase, ignored)


def test_get_replace_resources() -> None:
    assert c.get_replace_resources({c.ANNOTATION_POD_REPLACE_RESOURCES: "a:b"}).replace == {"a": "b"}
    assert c.get_replace_resources(None) == c.ReplaceResources()
