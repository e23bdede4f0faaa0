"""docs/load-aware.md's configuration loads with the real registry, is the one the e2e test runs,
and its profile places by usage through the real Framework (filter reason and preference)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import yaml

from apis.client.backend import EventType, WatchEvent
from e2e.scenarios import test_load_aware as e2e_scenario
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.config import load_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.runtime import Framework
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.load_aware.plugin import NODEMETRICS
from tests.scheduler.builders import make_cache, make_node
from tests.scheduler.plugins.load_aware_helpers import node_metric, pod

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "load-aware.md"


def guide_config() -> str:
    blocks: list[str] = re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(), flags=re.DOTALL)
    (config,) = [block for block in blocks if "KubeSchedulerConfiguration" in block]
    return config


def test_the_e2e_runs_the_guides_configuration() -> None:
    guide = yaml.safe_load(guide_config())
    e2e = yaml.safe_load(e2e_scenario.CONFIG)
    e2e.pop("clientConnection")
    assert e2e == guide


def test_the_guides_profile_filters_and_prefers_by_usage() -> None:
    (profile,) = load_config(guide_config(), DEFAULT_PLUGINS, DEFAULT_REGISTRY).profiles
    assert profile.plugin_args["LoadAwareScheduling"]["enableScheduleWhenNodeMetricsExpired"] is False
    nodes = [make_node(n).alloc(cpu="4", memory="16Gi", pods="110").obj() for n in ("hot", "cool", "warm")]
    snapshot = Snapshot(make_cache(nodes))
    handle = Handle(backend=None, snapshot=lambda: snapshot)  # type: ignore[arg-type]
    fwk = Framework(profile, DEFAULT_REGISTRY, handle)
    for name, cpu in (("hot", "3200m"), ("cool", "400m"), ("warm", "1600m")):  # the e2e's usage
        metric = node_metric(name, {"cpu": cpu, "memory": "1Gi"}, updated=time.time())
        for listener in handle.informers.listeners(NODEMETRICS):
            listener(WatchEvent(EventType.ADDED, metric))
    p = PodInfo.of(pod("p", {"cpu": "500m"}))
    state = CycleState()
    diagnosis = Diagnosis(node_count=3)
    status, _ = fwk.run_pre_filter(state, p, snapshot)
    assert status.ok
    rows, status = fwk.run_filter(state, p, snapshot, snapshot.candidate_rows(), diagnosis)
    assert status.ok
    assert diagnosis.reason_counts == {"node(s) cpu usage exceed threshold": 1}
    assert fwk.run_pre_score(state, p, snapshot, rows).ok
    totals, _, status = fwk.run_score(state, p, snapshot, rows)
    assert status.ok
    by_node = {
        snapshot.table.names[int(r)]: int(t)
        for r, t in zip(np.asarray(rows), np.asarray(totals), strict=True)
    }
    assert max(by_node, key=lambda n: by_node[n]) == "cool"
