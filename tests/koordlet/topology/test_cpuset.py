"""Which cpuset each pod gets (Koordinator's CPUSetAllocator rules) and its writes into cgroups:
fake v1 and v2 trees for both drivers, and a scratch cgroup of this machine's kernel."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from apis.cpulist import format_cpus
from apis.errors import InvalidAnnotation
from koordlet.fs import HostFS
from koordlet.qos.host_apps import HostApp
from koordlet.qos.layout import CgroupLayout
from koordlet.qos.writer import CgroupWriter
from koordlet.topology.cpuset_apply import CPUSetApplier
from koordlet.topology.cpuset_rule import CPUSetRule, host_app_cpuset, pod_cpuset
from tests.koordlet.qos.cgroupfs import CgroupTree
from tests.koordlet.topology.builders import pod

LS_POOLS = [{"socket": 0, "node": 0, "cpuset": "4-7"}, {"socket": 1, "node": 1, "cpuset": "12-15"}]
BE_POOLS = [{"socket": 0, "node": 0, "cpuset": "2-7"}, {"socket": 1, "node": 1, "cpuset": "10-15"}]


def _rule(policy: str = "none", system: str | None = None) -> CPUSetRule:
    annotations = {
        "node.koordinator.sh/cpu-shared-pools": json.dumps(LS_POOLS),
        "node.koordinator.sh/be-cpu-shared-pools": json.dumps(BE_POOLS),
        "kubelet.koordinator.sh/cpu-manager-policy": json.dumps({"policy": policy}),
    }
    if system is not None:
        annotations["node.koordinator.sh/system-qos-resource"] = json.dumps({"cpuset": system})
    return CPUSetRule.from_annotations(annotations)


NUMA1_CPU = [{"node": 1, "resources": {"cpu": "2"}}]
NUMA1_BATCH = [{"node": 1, "resources": {"kubernetes.io/batch-cpu": "2000"}}]


@pytest.mark.parametrize(
    ("the_pod", "rule", "be_cpu_manager", "expected"),
    [
        (pod("lse", qos="LSE", cpuset="0-1", kube_qos="Guaranteed"), _rule(), False, "0-1"),
        (pod("lsr", qos="LSR", cpuset="3,2", kube_qos="Guaranteed"), _rule("static"), False, "2-3"),
        (pod("ls-numa", qos="LS", numa=NUMA1_CPU), _rule(), False, "12-15"),
        (pod("none-numa", numa=NUMA1_CPU), _rule("static"), False, "12-15"),
        (pod("be-numa", qos="BE", numa=NUMA1_BATCH, kube_qos="BestEffort"), _rule(), True, "10-15"),
        (pod("be-numa-no-gate", qos="BE", numa=NUMA1_BATCH, kube_qos="BestEffort"), _rule(), False, ""),
        (
            pod("numa-zero", qos="LS", numa=[{"node": 1, "resources": {"cpu": "0"}}]),
            _rule(),
            False,
            "4-7,12-15",
        ),
        (pod("system", qos="SYSTEM"), _rule(system="0"), False, "0"),
        (pod("system-no-cpuset", qos="SYSTEM"), _rule(), False, "4-7,12-15"),
        (pod("ls", qos="LS"), _rule("static"), False, "4-7,12-15"),
        (pod("be", qos="BE", kube_qos="BestEffort"), _rule(), False, ""),
        (pod("besteffort", kube_qos="BestEffort"), _rule("static"), False, ""),
        (pod("guaranteed-static", kube_qos="Guaranteed"), _rule("static"), False, None),
        (pod("lsr-not-yet-bound", qos="LSR", kube_qos="Guaranteed"), _rule("static"), False, None),
        (pod("burstable-none", kube_qos="Burstable"), _rule("none"), False, "4-7,12-15"),
    ],
    ids=lambda value: value.metadata.name if hasattr(value, "metadata") else None,
)
def test_the_first_matching_rule_gives_the_cpuset(
    the_pod: object, rule: CPUSetRule, be_cpu_manager: bool, expected: str | None
) -> None:
    assert pod_cpuset(the_pod, rule, be_cpu_manager=be_cpu_manager) == expected  # type: ignore[arg-type]


def test_a_malformed_resource_status_names_the_annotation() -> None:
    with pytest.raises(InvalidAnnotation, match="resource-status"):
        pod_cpuset(pod("bad", raw_status='{"cpuset": 3}'), _rule())


def _container(index: int) -> str:
    return f"{index:064x}"


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"])
def test_pods_cpusets_and_quota_are_written_to_pod_and_container_cgroups(
    tmp_path: Path, version: Literal[1, 2], driver: Literal["cgroupfs", "systemd"]
) -> None:
    tree = CgroupTree(tmp_path, version)
    layout = CgroupLayout(driver)
    pods = {
        "lse": pod("lse", qos="LSE", cpuset="0-1", kube_qos="Guaranteed"),
        "ls": pod("ls", qos="LS"),
        "be": pod("be", qos="BE", kube_qos="BestEffort"),
        "kubelet": pod("kubelet", kube_qos="Guaranteed"),
    }
    dirs = {}
    for name, p in pods.items():
        pod_dir = layout.pod_dir(p.status.qos_class, p.metadata.uid or "")  # type: ignore[arg-type]
        dirs[name] = pod_dir
        for cgroup in (pod_dir, f"{pod_dir}/{_container(1)}", f"{pod_dir}/{_container(2)}"):
            tree.add(cgroup)
    applier = CPUSetApplier(CgroupWriter(HostFS(tmp_path), version), layout)
    applied = applier.apply(list(pods.values()), _rule("static"))

    def cpus(cgroup: str) -> str:
        return tree.read(cgroup, "cpuset.cpus", "cpuset")

    for cgroup in (dirs["lse"], f"{dirs['lse']}/{_container(1)}", f"{dirs['lse']}/{_container(2)}"):
        assert cpus(cgroup) == "0-1"
        assert tree.read(cgroup, "cpu.max" if version == 2 else "cpu.cfs_quota_us") == (
            "max 100000" if version == 2 else "-1"
        )
    for cgroup in (dirs["ls"], f"{dirs['ls']}/{_container(2)}"):
        assert cpus(cgroup) == "4-7,12-15"
    assert tree.read(dirs["ls"], "cpu.cfs_quota_us" if version == 1 else "cpu.max") == (
        "-1" if version == 1 else "max 100000"
    )  # untouched: the default
    default = "0-7" if version == 1 else ""
    assert cpus(f"{dirs['kubelet']}/{_container(1)}") == default  # the kubelet's (static policy)
    assert cpus(f"{dirs['be']}/{_container(1)}") == default  # v2: "" (the parent's); v1: left alone
    assert {a.uid: a.cpuset for a in applied} == {"u-lse": "0-1", "u-ls": "4-7,12-15"} | (
        {"u-be": ""} if version == 2 else {}
    )

    # a pool change reaches the cgroups on the next round; a missing pod cgroup is no error
    narrower = CPUSetRule.from_annotations(
        {"node.koordinator.sh/cpu-shared-pools": json.dumps([{"socket": 0, "node": 0, "cpuset": "5"}])}
    )
    shutil.rmtree(tmp_path / ("sys/fs/cgroup" if version == 2 else "sys/fs/cgroup/cpuset") / dirs["lse"])
    applier.apply([pods["ls"], pods["lse"]], narrower)
    assert cpus(dirs["ls"]) == "5"
    assert cpus(f"{dirs['ls']}/{_container(1)}") == "5"


def test_only_an_ls_host_application_has_a_cpuset_every_ls_pool() -> None:
    assert host_app_cpuset("nginx", "LS", _rule()) == "4-7,12-15"
    with pytest.raises(
        ValueError, match=r"hostApplications\[batch-agent\]: cpuset is only managed for qos LS"
    ):
        host_app_cpuset("batch-agent", "BE", _rule())


@pytest.mark.parametrize("version", [1, 2])
def test_an_ls_host_applications_cgroup_gets_the_ls_pools(
    tmp_path: Path, version: Literal[1, 2], caplog: pytest.LogCaptureFixture
) -> None:
    """The v1.4 notes: koordlet sets every CPU of the share pool for an LS host application."""
    tree = CgroupTree(tmp_path, version)
    for cgroup in (
        "host-latency-sensitive",
        "host-latency-sensitive/nginx",
        "host-latency-sensitive/nginx/w",
    ):
        tree.add(cgroup)
    tree.add("host-best-effort/agent")
    before = tree.read("host-best-effort/agent", "cpuset.cpus", "cpuset")
    apps = [
        HostApp("nginx", "LS", "host-latency-sensitive/nginx", False),
        HostApp("agent", "BE", "host-best-effort/agent", False),
        HostApp("not-started", "LS", "host-latency-sensitive/not-started", False),
    ]
    applier = CPUSetApplier(CgroupWriter(HostFS(tmp_path), version), CgroupLayout("cgroupfs"))
    for _ in range(2):
        assert applier.apply_host_apps(apps, _rule()) == {"nginx": "4-7,12-15"}
    for cgroup in ("host-latency-sensitive/nginx", "host-latency-sensitive/nginx/w"):
        assert tree.read(cgroup, "cpuset.cpus", "cpuset") == "4-7,12-15"
    assert tree.read("host-best-effort/agent", "cpuset.cpus", "cpuset") == before
    assert not (tmp_path / "sys/fs/cgroup/host-latency-sensitive/not-started").exists()
    assert not (tmp_path / "sys/fs/cgroup/cpuset/host-latency-sensitive/not-started").exists()
    assert sum("host application agent: cpuset not applied" in r.getMessage() for r in caplog.records) == 1


CPUSET = Path("/sys/fs/cgroup/cpuset")


@pytest.fixture
def scratch_root() -> Iterator[str]:
    """A scratch kubelet --cgroup-root in this machine's v1 cpuset hierarchy."""
    if not (CPUSET / "cpuset.cpus").exists():
        pytest.skip(f"no v1 cpuset hierarchy at {CPUSET}")
    name = f"koordpy-test-{uuid.uuid4().hex[:8]}"
    try:
        (CPUSET / name).mkdir()
    except OSError as exc:
        pytest.skip(f"cannot create a cgroup under {CPUSET}: {exc}")
    try:
        yield name
    finally:
        for directory in sorted((CPUSET / name).rglob("*"), key=lambda p: -len(p.parts)):
            if directory.is_dir():
                directory.rmdir()
        (CPUSET / name).rmdir()


def test_cpusets_move_between_cpus_on_the_real_kernel(scratch_root: str) -> None:
    """v1 refuses a parent cpuset that drops CPUs a child still has: the pod cgroup is widened,
    the children moved, then the pod narrowed, so moving from one CPU to another succeeds."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    root = CPUSET / scratch_root
    mems = (CPUSET / "cpuset.mems").read_text().strip()
    all_cpus = format_cpus(cpus)
    for level in ("", "kubepods", "kubepods/burstable"):
        (root / level).mkdir(exist_ok=True)
        (root / level / "cpuset.cpus").write_text(all_cpus)
        (root / level / "cpuset.mems").write_text(mems)
    the_pod = pod("real", qos="LS")
    pod_dir = root / f"kubepods/burstable/pod{the_pod.metadata.uid}"
    (pod_dir / _container(1)).mkdir(parents=True)
    writer = CgroupWriter(HostFS("/"), 1)
    applier = CPUSetApplier(writer, CgroupLayout("cgroupfs", cgroup_root=scratch_root))
    for target in (cpus[0], cpus[1], cpus[0]):
        pools = [{"socket": 0, "node": 0, "cpuset": str(target)}]
        rule = CPUSetRule.from_annotations({"node.koordinator.sh/cpu-shared-pools": json.dumps(pools)})
        assert [a.cpuset for a in applier.apply([the_pod], rule)] == [str(target)]
        assert (pod_dir / "cpuset.cpus").read_text().strip() == str(target)
        assert (pod_dir / _container(1) / "cpuset.cpus").read_text().strip() == str(target)
        assert (pod_dir / _container(1) / "cpuset.effective_cpus").read_text().strip() == str(target)
    assert writer.failures == []
