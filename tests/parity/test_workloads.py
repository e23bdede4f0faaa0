"""The parity harness's data: the built-in node set and workloads load, a held-out file in the
same shape plugs in, and a misspelt field is an error rather than a constraint silently lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from e2e.parity.workloads import VOLUMES_ENV, WORKLOADS_ENV, load_nodes, load_workloads

HELD_OUT = """
- name: held-out-anti-affinity
  plugins: [InterPodAffinity]
  steps:
  - pods:
    - name: api
      replicas: 2
      labels: {app: api}
      cpu: 250m
      ports: [{containerPort: 80, hostPort: 80}]
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: api}}
            topologyKey: kubernetes.io/hostname
"""


def test_the_built_in_workloads_and_node_set_load() -> None:
    workloads = load_workloads()
    nodes = load_nodes().nodes()

    assert {"anti-affinity-hostname", "spread-min-domains", "host-ports"} <= {w.name for w in workloads}
    assert all(w.pods() > 0 for w in workloads)
    zones = {n["metadata"]["labels"].get("topology.kubernetes.io/zone") for n in nodes}
    assert zones == {"zone-a", "zone-b", "zone-c", None}
    assert any(n["status"].get("images") for n in nodes)


def test_a_held_out_file_replaces_the_workloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "held-out.yaml"
    path.write_text(HELD_OUT)
    monkeypatch.setenv(WORKLOADS_ENV, str(path))

    (workload,) = load_workloads()
    manifests = workload.steps[0].pods[0].manifests("ns-x", "kube-parity")

    assert [m["metadata"]["name"] for m in manifests] == ["api-0", "api-1"]
    spec = manifests[0]["spec"]
    assert spec["schedulerName"] == "kube-parity"
    assert manifests[0]["metadata"]["namespace"] == "ns-x"
    assert spec["containers"][0]["ports"] == [{"containerPort": 80, "hostPort": 80}]
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "250m", "memory": "128Mi"}
    term = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term == {"labelSelector": {"matchLabels": {"app": "api"}}, "topologyKey": "kubernetes.io/hostname"}


def test_a_misspelt_pod_set_field_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(HELD_OUT.replace("affinity:", "afinity:"))

    with pytest.raises(ValidationError, match="afinity"):
        load_workloads(path)


def test_workload_names_must_be_unique(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text(HELD_OUT + HELD_OUT.replace("\n- name", "\n- name", 1))

    with pytest.raises(ValueError, match="repeated: held-out-anti-affinity"):
        load_workloads(path)


def test_volume_workloads_run_unless_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VOLUMES_ENV, "0")
    (volumes,) = [w for w in load_workloads() if w.needs == "volumes"]
    assert not volumes.enabled()

    monkeypatch.delenv(VOLUMES_ENV)
    assert volumes.enabled()
    objects = volumes.steps[0].manifests_of_objects("kube-local-volumes")
    assert {o["kind"] for o in objects} == {"StorageClass", "PersistentVolume", "PersistentVolumeClaim"}
    assert "kube-local-volumes-local" in {o["metadata"]["name"] for o in objects}


def test_a_step_creates_only_the_kinds_the_harness_knows(tmp_path: Path) -> None:
    path = tmp_path / "secret.yaml"
    path.write_text(
        HELD_OUT.replace("  - pods:", "  - objects: [{kind: Secret, metadata: {name: s}}]\n    pods:")
    )

    with pytest.raises(ValidationError, match="kind 'Secret' is not one of StorageClass"):
        load_workloads(path)
