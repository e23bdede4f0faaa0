"""The real node's host-independent parts (e2e/realnode): the preflight names everything a host
lacks, at once and before anything starts; the generated daemon configurations say what the
docs promise (state under the cluster dir, NRI on, cgroupfs on both sides, the pinned pause image).
The node itself runs in e2e/scenarios/test_real_node.py."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
import yaml

from e2e.realnode import PAUSE_IMAGE, RealNodeConfig, host, preflight, render
from e2e.realnode.node import start


def config(tmp_path: Path) -> RealNodeConfig:
    return RealNodeConfig(cluster="t", repo=tmp_path)


def test_preflight_lists_every_missing_piece_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host without the built tools, where no cgroup can be created and no bridge either."""
    read_only = tmp_path / "cgroup"
    read_only.mkdir()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(host, "cgroup_hierarchies", lambda: [read_only / "absent"])
    monkeypatch.setattr(host, "is_cgroup2_root", lambda: True)
    monkeypatch.setattr(host, "sh_ok", lambda *argv: argv[:2] != ("ip", "link") and argv[0] != "unshare")
    problems = preflight.problems(config(tmp_path))
    text = "\n".join(problems)
    assert "make real-node-tools" in text
    assert ".bin/kubelet" in text
    assert ".bin/containerd" in text
    assert "cannot create a cgroup" in text
    assert "cannot create a bridge" in text
    assert "network namespace" in text


def test_preflight_wants_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert preflight.problems(config(tmp_path)) == [
        "the real node must run as root (kubelet, containerd, cgroups, netns)"
    ]


def test_start_stops_before_anything_on_a_host_that_cannot_run_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preflight, "problems", lambda c: ["no bridge", "no cgroup write"])
    with pytest.raises(preflight.PreflightError, match="no bridge\n  - no cgroup write"):
        start(object(), config(tmp_path))  # type: ignore[arg-type]
    assert not (tmp_path / ".cluster").exists()


def test_containerd_config_keeps_state_under_the_cluster_and_turns_nri_on(tmp_path: Path) -> None:
    c = config(tmp_path)
    conf = tomllib.loads(render.containerd_toml(c, runc="/usr/sbin/runc"))
    assert conf["version"] == 3
    assert conf["root"].startswith(str(c.state_dir))
    assert conf["state"].startswith(str(c.state_dir))
    assert conf["grpc"]["address"] == str(c.containerd_socket)
    plugins = conf["plugins"]
    assert plugins["io.containerd.nri.v1.nri"] == {
        "disable": False,
        "socket_path": str(c.nri_socket),
        "plugin_path": str(c.state_dir / "nri" / "plugins"),
        "plugin_config_path": str(c.state_dir / "nri" / "conf.d"),
    }
    assert plugins["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] == PAUSE_IMAGE
    runtime = plugins["io.containerd.cri.v1.runtime"]
    assert runtime["netns_mounts_under_state_dir"] is True
    assert runtime["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    assert runtime["cni"]["conf_dir"] == str(c.cni_conf_dir)


def test_kubelet_uses_cgroupfs_under_its_own_root_and_our_containerd(tmp_path: Path) -> None:
    c = config(tmp_path)
    conf = yaml.safe_load(render.kubelet_yaml(c, client_ca=tmp_path / "ca.crt"))
    assert conf["cgroupDriver"] == "cgroupfs"
    assert conf["cgroupRoot"] == c.cgroup_root
    assert conf["failCgroupV1"] is False
    assert conf["containerRuntimeEndpoint"] == f"unix://{c.containerd_socket}"
    assert conf["authentication"]["anonymous"]["enabled"] is False
    assert c.pod_resources_socket == c.kubelet_root / "pod-resources" / "kubelet.sock"
    assert c.pod_resources_proxy_dir.is_relative_to(c.state_dir)
    proxy = yaml.safe_load(render.kube_proxy_yaml(c))
    assert proxy["mode"] == "iptables"
    assert proxy["hostnameOverride"] == c.node_name
