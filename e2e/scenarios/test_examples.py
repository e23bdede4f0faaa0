"""Every YAML example of the release notes applies unchanged to the real API server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.compare import differences
from e2e.example_report import PodState, example_states, pods_named, render
from e2e.samples import example_files
from e2e.scheduler_process import Scheduler
from e2e.workloads import pods, wait_for

EXAMPLES = example_files()


@pytest.fixture(scope="module", autouse=True)
def _delete_the_quota_profiles(control_plane: ControlPlane) -> Iterator[None]:
    """The examples stay applied, but their ElasticQuotaProfiles go at the end of this file: they
    select every amd64 node, so their trees would take the whole cluster from the default quota
    tree for the files run after this one on the same cluster (under xdist, not in alphabetical
    order: test_colocation_profile's batch quota got runtime 0)."""
    yield
    profiles = [
        d
        for p in EXAMPLES
        for d in yaml.safe_load_all(p.read_text())
        if d and d["kind"] == "ElasticQuotaProfile"
    ]
    control_plane.run_kubectl("delete", "-f", "-", "--ignore-not-found", input=yaml.safe_dump_all(profiles))


def test_release_note_examples_exist() -> None:
    releases = {p.parent.name for p in EXAMPLES}
    assert {"v0.7", "v1.4", "v1.6", "v1.7"} <= releases


@pytest.mark.parametrize(
    "path", EXAMPLES, ids=[str(p.relative_to(repo_root() / "docs" / "examples")) for p in EXAMPLES]
)
def test_example_applies_and_reads_back_unchanged(control_plane: ControlPlane, path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    # Examples stay applied: later files use earlier ones (the PriorityClasses of the v1.7 job).
    control_plane.apply_file(path)
    returned = json.loads(control_plane.kubectl("get", "-f", str(path), "-o", "json"))
    items = returned["items"] if returned.get("kind") == "List" else [returned]
    assert len(items) == len(docs)
    for applied, actual in zip(docs, items, strict=True):
        applied = {k: v for k, v in applied.items() if k != "status"}
        assert differences(applied, actual) == [], f"{applied['kind']}/{applied['metadata']['name']}"


def test_the_closing_report_says_where_every_example_pod_stands(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    """`make up`'s closing text (``e2e.samples next-steps``): every pod an example makes is listed
    under its file, bound ones with the node the API server has, Pending ones with a reason."""
    cp = control_plane
    made_by = {path: pods_named(d for d in yaml.safe_load_all(path.read_text()) if d) for path in EXAMPLES}
    there = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods(cp)}
    if not set().union(*made_by.values()) <= there:  # run alone (-k): apply what the tests above do
        for path in EXAMPLES:
            cp.apply_file(path)

    def settled() -> list[tuple[Path, list[PodState]]] | None:
        states = example_states(cp, EXAMPLES, scheduler.url)
        pending = [s for _, pods in states for s in pods if not s.node]
        return None if any("has not tried it yet" in s.reason for s in pending) else states

    states = wait_for(settled, timeout=60, what="koord-scheduler tried every example pod")
    by_file = {path: pods for path, pods in states}
    api = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods(cp)}
    for path in EXAMPLES:
        assert made_by[path] <= {(s.namespace, s.name) for s in by_file[path]}, path
    daemon_set = next(p for p in EXAMPLES if p.name == "07-hami-core-daemonset.yaml")
    assert by_file[daemon_set], "the DaemonSet's pods are the file's (owner references)"
    for state in (s for listed in by_file.values() for s in listed):
        node = api[(state.namespace, state.name)]["spec"].get("nodeName")
        assert state.node == node
        assert state.reason == f"bound to {node}" if node else state.reason.startswith("Pending: ")
    text = render(states)
    assert 'v1.7/05-hp-training-job.yaml  (v1.7 "2. Job-Level Preemption")' in text
