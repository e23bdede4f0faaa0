"""What each release-note example shows on a running cluster: the closing text of `make up`.

For every file of ``docs/examples/v*/`` it names the release note's section (the file's
``# Source:`` line) and where each pod the file makes stands: bound to a node, or Pending with the
reason a user would find (the latest FailedScheduling event, else koord-scheduler's own
explanation, else the scheduler it waits for). A pod is the file's when the file creates it, or
when a workload of the file owns it (a DaemonSet's or Deployment's pods, by owner references).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.cluster.controlplane import ControlPlane, repo_root

__all__ = ["PodState", "example_states", "pods_named", "render", "section_of"]

_SOURCE = re.compile(r'^# Source: Koordinator (v[\d.]+) release notes, "([^"]+)"')
_WORKLOADS = {"Deployment", "DaemonSet", "Job", "StatefulSet", "ReplicaSet"}


@dataclass(frozen=True)
class PodState:
    namespace: str
    name: str
    node: str | None
    reason: str
    """Where it stands in words: ``bound to gpu-0``, or why it is Pending."""


def section_of(path: Path) -> str:
    """``v1.6 "5. Fine-Grained Resource Reservation"`` from the file's ``# Source:`` line."""
    for line in path.read_text().splitlines()[:3]:
        found = _SOURCE.match(line)
        if found:
            return f'{found.group(1)} "{found.group(2)}"'
    return path.parent.name


def pods_named(docs: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """(namespace, name) of the Pods among ``docs``."""
    return {
        (d["metadata"].get("namespace") or "default", d["metadata"]["name"])
        for d in docs
        if d["kind"] == "Pod"
    }


def _owned_by(pod: dict[str, Any], uids: set[str], replica_sets: dict[str, str]) -> bool:
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref["uid"] in uids or replica_sets.get(ref["uid"]) in uids:
            return True
    return False


def _pending_reason(cp: ControlPlane, pod: dict[str, Any], scheduler_url: str | None) -> str:
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    events = cp.get_json(
        f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name={name},reason=FailedScheduling"
    )["items"]
    if events:
        latest = max(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
        return f"Pending: {latest['message']}"
    scheduler = pod["spec"].get("schedulerName") or "default-scheduler"
    if scheduler == "koord-scheduler" and scheduler_url:
        url = f"{scheduler_url.rstrip('/')}/debug/pods/{namespace}/{name}/explanation"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                message = json.load(response).get("message")
        except (urllib.error.URLError, OSError, ValueError):
            message = None
        if message:
            return f"Pending: {message}"
        return "Pending: koord-scheduler has not tried it yet"
    return f"Pending: waits for {scheduler}, which this cluster does not run"


def example_states(
    cp: ControlPlane, files: Iterable[Path], scheduler_url: str | None
) -> list[tuple[Path, list[PodState]]]:
    """Each file with the states of its pods (an empty list for a file that makes no pod)."""
    pods = cp.get_json("/api/v1/pods")["items"]
    replica_sets = {
        rs["metadata"]["uid"]: ref["uid"]
        for rs in cp.get_json("/apis/apps/v1/replicasets")["items"]
        for ref in rs["metadata"].get("ownerReferences") or ()
    }
    found: list[tuple[Path, list[PodState]]] = []
    for path in files:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        named = pods_named(docs)
        workloads = [d for d in docs if d["kind"] in _WORKLOADS]
        uids: set[str] = set()
        for workload in workloads:
            applied = cp.read(
                workload["kind"].lower(),
                workload["metadata"]["name"],
                namespace=workload["metadata"].get("namespace") or "default",
            )
            if applied is not None:
                uids.add(applied["metadata"]["uid"])
        states = []
        for pod in pods:
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            if key not in named and not _owned_by(pod, uids, replica_sets):
                continue
            node = pod["spec"].get("nodeName")
            reason = f"bound to {node}" if node else _pending_reason(cp, pod, scheduler_url)
            if not node and reason.startswith("Pending: bound to "):
                # koord-scheduler writes its explanation after the bind: the pod we listed was older.
                node = cp.get_json(f"/api/v1/namespaces/{key[0]}/pods/{key[1]}")["spec"].get("nodeName")
                reason = f"bound to {node}" if node else reason
            states.append(PodState(key[0], key[1], node, reason))
        found.append((path, sorted(states, key=lambda s: (s.namespace, s.name))))
    return found


def render(states: list[tuple[Path, list[PodState]]]) -> str:
    """One line per file, then one per pod (a workload's pods in the same state folded into one)."""
    root = repo_root() / "docs" / "examples"
    lines: list[str] = []
    for path, pods in states:
        lines.append(f"  {path.relative_to(root)}  ({section_of(path)})")
        folded: dict[str, list[PodState]] = {}
        for pod in pods:
            folded.setdefault(pod.reason if not pod.node else f"bound to {pod.node}", []).append(pod)
        for reason, group in folded.items():
            who = group[0].name if len(group) == 1 else f"{len(group)} pods ({group[0].name}, ...)"
            lines.append(f"      pod {who}: {reason}")
    return "\n".join(lines)
