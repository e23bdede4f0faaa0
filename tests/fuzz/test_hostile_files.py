"""Hostile files that a person hands a component: ``koordctl simulate``'s cluster description and
workload, the KubeSchedulerConfiguration, the DeschedulerConfiguration, koordlet's kubelet
configuration, devices and device description files and load file, and the GPU shared-resource
templates ConfigMap.

Each reader returns, or raises a ValueError (InvalidValue, ConfigError, pydantic's
ValidationError) with a bounded message; never RecursionError, TypeError, KeyError, AttributeError
or MemoryError. What it builds is bounded by what it read: without YAML aliases at most a few values
per character, with them at most :data:`apis.yamltext.MAX_NODES`; a workload at most
:data:`scheduler.simulator.run.MAX_PODS` pods, a cluster at most
:data:`scheduler.simulator.description.MAX_NODES` nodes. The bound is counted, never timed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis.errors import MESSAGE_LIMIT
from apis.yamltext import MAX_DEPTH, MAX_NODES, load_yaml_documents
from koordlet.devices.description import load_description, load_devices_file
from koordlet.simulate.model import load_file
from koordlet.topology.kubelet import load_kubelet_config
from operators.descheduler.config import load as load_descheduler_config
from scheduler.config import load_config
from scheduler.koordctl import main as koordctl
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.device_share.templates import parse_templates
from scheduler.simulator import description, run
from tests.examples import examples
from tests.fuzz.test_hostile_text import any_text, size

Reader = Callable[[Path], object]


def _scheduler_config(path: Path) -> object:
    return load_config(path, DEFAULT_PLUGINS, DEFAULT_REGISTRY)


def _workload(path: Path) -> object:
    return (run.load_workload(path), run.load_custom_resources(path))


READERS: dict[str, Reader] = {
    "simulate-cluster": description.load,
    "simulate-workload": _workload,
    "scheduler-config": _scheduler_config,
    "descheduler-config": load_descheduler_config,
    "kubelet-config": load_kubelet_config,
    "koordlet-devices": load_devices_file,
    "koordlet-device-description": load_description,
    "koordlet-load-file": load_file,
    "gpu-share-templates": lambda path: parse_templates(
        path.read_text(encoding="utf-8", errors="surrogatepass")
    ),
}

hostile_numbers: st.SearchStrategy[Any] = st.sampled_from(
    [-1, 0, 3, 1.5, "3", True, None, 10**12, 2**63, -(2**63), 1e308, float("inf"), [], {}, run.MAX_PODS + 1]
)
hostile_scalars = st.one_of(any_text, hostile_numbers)


def _alias_bomb(levels: int, fan_out: int) -> str:
    lines = [f"a0: &a0 [{', '.join(['x'] * fan_out)}]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * fan_out)}]")
    return "\n".join(lines) + "\n"


def _documents(docs: list[Any]) -> str:
    # ensure_ascii=False keeps lone surrogates in the text, as a file written by hand can hold them.
    return "\n---\n".join(json.dumps(doc, ensure_ascii=False) for doc in docs)


deployments = st.builds(
    lambda kind, replicas, meta, template: {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": meta,
        "spec": {"replicas": replicas, "parallelism": replicas, "template": template},
    },
    st.sampled_from(["Deployment", "StatefulSet", "Job", "List", "Pod", "PodGroup", "Bogus"]),
    hostile_numbers,
    st.one_of(
        st.just({"name": "web"}), hostile_scalars, st.dictionaries(any_text, hostile_scalars, max_size=2)
    ),
    st.one_of(
        st.just({"spec": {"containers": [{"name": "c", "image": "i"}]}}),
        hostile_scalars,
        st.fixed_dictionaries({"metadata": hostile_scalars, "spec": hostile_scalars}),
    ),
)
pools = st.builds(
    lambda count, cpu: {"nodePools": [{"name": "p", "count": count, "cpu": cpu}]},
    hostile_numbers,
    hostile_scalars,
)

texts = st.one_of(
    any_text,
    st.builds(lambda n: "a: " + "[" * n + "]" * n, st.integers(MAX_DEPTH - 2, 5 * MAX_DEPTH)),
    st.builds(lambda n: "a:\n" + "".join(" " * i + "- \n" for i in range(n)), st.integers(1, 3 * MAX_DEPTH)),
    st.builds(_alias_bomb, st.integers(1, 9), st.integers(1, 9)),
    st.lists(st.one_of(deployments, pools, hostile_scalars), min_size=1, max_size=4).map(_documents),
)


def check(read: Reader, tmp_path: Path, text: str) -> None:
    path = tmp_path / "hostile.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        result = read(path)
    except ValueError as exc:
        refused: ValueError | None = exc
    else:
        refused = None
    if refused is not None:
        assert len(str(refused).splitlines()[0]) <= 4 * MESSAGE_LIMIT, (
            "the first line of the error is bounded"
        )
        return
    bound = MAX_NODES + 1 if "*" in text else 8 * len(text) + 64
    assert size(result, bound) <= bound, f"{size(result, bound)} values from {len(text)} characters"


@pytest.mark.parametrize("name", sorted(READERS))
@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(text=texts)
def test_a_hostile_file_is_read_or_refused_with_a_value_error(name: str, tmp_path: Path, text: str) -> None:
    check(READERS[name], tmp_path, text)


@pytest.mark.parametrize("name", sorted(READERS))
@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a: " + "[" * 10_000 + "]" * 10_000, id="10000-levels"),
        pytest.param(_alias_bomb(9, 9), id="billion-laughs"),
        pytest.param('"\\ud800": 1', id="escaped-surrogate"),
        pytest.param("\ud800: 1", id="raw-surrogate"),
        pytest.param("- 1\n- 2\n", id="a-list"),
        pytest.param("kind: List\nitems: 3\n", id="list-items-not-a-list"),
        pytest.param(
            "kind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1000000000000}\n", id="1e12-replicas"
        ),
        pytest.param("nodePools: [{name: p, count: 1000000000}]\n", id="1e9-nodes"),
    ],
)
def test_pinned_hostile_files(name: str, tmp_path: Path, text: str) -> None:
    check(READERS[name], tmp_path, text)


@pytest.mark.parametrize(
    ("cluster", "workload", "message"),
    [
        pytest.param(
            "nodePools: [{name: p, count: 1000000000}]\n",
            "",
            "more than the 100000 a simulation builds",
            id="1e9-nodes",
        ),
        pytest.param("a: " + "[" * 1000, "", "nested deeper than", id="deep-cluster"),
        pytest.param(
            "",
            "kind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1e12}\n",
            "spec.replicas",
            id="1e12-replicas",
        ),
        pytest.param(
            "",
            "kind: Job\nmetadata: {name: j}\nspec: {parallelism: 2000000}\n",
            "spec.parallelism",
            id="2e6-parallelism",
        ),
        pytest.param("", "- a list\n", "not an object", id="list-document"),
        pytest.param("", _alias_bomb(9, 9), "aliases are expanded", id="billion-laughs"),
    ],
)
def test_koordctl_simulate_says_what_is_wrong_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cluster: str, workload: str, message: str
) -> None:
    (tmp_path / "cluster.yaml").write_text(cluster)
    (tmp_path / "workload.yaml").write_text(workload)
    code = koordctl(
        [
            "simulate",
            "--cluster",
            str(tmp_path / "cluster.yaml"),
            "--workload",
            str(tmp_path / "workload.yaml"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("error: ")
    assert message in err


def test_a_hostile_scheduler_configuration_is_a_config_error_in_koordctl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cluster.yaml").write_text("nodePools: [{name: p, count: 1}]\n")
    (tmp_path / "workload.yaml").write_text("")
    (tmp_path / "config.yaml").write_text("a: " + "[" * 10_000 + "\n")
    code = koordctl(
        [
            "simulate",
            "--cluster",
            str(tmp_path / "cluster.yaml"),
            "--workload",
            str(tmp_path / "workload.yaml"),
            "--config",
            str(tmp_path / "config.yaml"),
        ]
    )
    assert code == 1
    assert "nested deeper than 100 levels" in capsys.readouterr().err


def test_the_bounded_loaders_read_what_plain_yaml_reads() -> None:
    text = "a: &x [1, 2]\nb: *x\n---\n---\nc: {d: [e]}\n"
    assert load_yaml_documents(text, "t") == [d for d in yaml.safe_load_all(text) if d is not None]
