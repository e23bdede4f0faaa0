"""The throughput bench's ``identical`` workload: every pod a replica of one Deployment template
(same controller, ``pod-template-hash``, labels and requests), on nodes sized for issue 32's 20,000
pods at 1,000 nodes, and a cluster whose garbage collector does not delete them for their absent
owner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from apis.core import Pod
from e2e.bench.scheduler_throughput import parse_args
from e2e.bench.throughput_model import Options
from e2e.bench.throughput_workload import check_fits, controller_manager_args, workload
from e2e.cluster.controlplane import TOOLS, ControlPlane


def _template(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod but for its name: what a Deployment's replicas share."""
    return {**pod, "metadata": {k: v for k, v in pod["metadata"].items() if k != "name"}}


def test_identical_pods_are_replicas_of_one_template_with_one_controller() -> None:
    pods = workload("ns", "koord-scheduler", 50, kind="identical")

    assert len({p["metadata"]["name"] for p in pods}) == 50
    assert all(_template(p) == _template(pods[0]) for p in pods)
    models = [Pod.model_validate(p) for p in pods]
    owners = {
        (o.kind, o.name, o.uid, o.controller) for m in models for o in m.metadata.owner_references or ()
    }
    assert len(owners) == 1
    kind, name, uid, controller = owners.pop()
    assert (kind, controller) == ("ReplicaSet", True)
    assert uid
    template_hash = models[0].metadata.labels["pod-template-hash"]
    assert name.endswith(f"-{template_hash}")
    assert {m.metadata.labels["app"] for m in models} == {"identical"}
    requests = {
        (str(c.resources.requests["cpu"]), str(c.resources.requests["memory"]))
        for m in models
        for c in m.spec.containers
        if c.resources is not None and c.resources.requests is not None
    }
    assert requests == {("500m", "512Mi")}
    assert all(m.spec.scheduler_name == "koord-scheduler" for m in models)


def test_the_mixed_workload_is_still_the_default_and_not_one_template() -> None:
    pods = workload("ns", "koord-scheduler", 20)

    assert len({str(_template(p)) for p in pods}) > 1
    assert all("ownerReferences" not in p["metadata"] for p in pods)
    assert parse_args([])[0].workload == "mixed"


def test_twenty_thousand_identical_pods_per_scheduler_fit_a_thousand_default_nodes() -> None:
    opts, _ = parse_args(["--nodes", "1000", "--pods", "20000", "--workload", "identical"])

    check_fits(opts, 2)  # both schedulers' workloads on the cluster at once


def test_owner_share_is_refused_with_the_identical_workload() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--workload", "identical", "--reservations", "4", "--owner-share", "0.5"])


def test_only_the_identical_workloads_cluster_runs_without_the_garbage_collector(tmp_path: Path) -> None:
    (tmp_path / ".bin").mkdir()
    for tool in TOOLS:
        (tmp_path / ".bin" / tool).touch()
    identical = controller_manager_args(Options(workload="identical"))
    assert controller_manager_args(Options()) == ()

    config = ControlPlane(name="x", root=tmp_path, controller_manager_args=identical)._write_config()

    manager = config.read_text().split("- name: kube-controller-manager\n", 1)[1]
    assert '- key: controllers\n    value: "*,-garbage-collector-controller"\n' in manager
