"""docs/descheduler.md's Gang defragmentation section works as written: its configuration's args
load, and every default in its table is the model's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from operators.descheduler.defrag import GangDefragmentationArgs

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "descheduler.md"


def _section() -> str:
    return GUIDE.read_text().split("## Gang defragmentation", 1)[1].split("\n## ", 1)[0]


def _args() -> dict[str, Any]:
    (block,) = re.findall(r"```yaml\n(.*?)```", _section(), flags=re.DOTALL)
    (profile,) = yaml.safe_load(block)["profiles"]
    assert profile["plugins"]["balance"]["enabled"] == [{"name": "GangDefragmentation"}]
    (entry,) = [c for c in profile["pluginConfig"] if c["name"] == "GangDefragmentation"]
    args: dict[str, Any] = entry["args"]
    return args


def test_the_documented_args_load() -> None:
    args = GangDefragmentationArgs.model_validate(_args())
    assert (args.wait_threshold_seconds, args.max_pods_to_move, args.plan_timeout_seconds) == (60.0, 4, 600.0)
    with pytest.raises(ValidationError):
        GangDefragmentationArgs.model_validate({**_args(), "kind": "LowNodeLoadArgs"})


def test_the_table_gives_the_defaults() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", _section(), flags=re.MULTILINE))
    defaults = GangDefragmentationArgs()
    assert rows["waitThreshold"].strip() == defaults.wait_threshold
    assert rows["maxPodsToMove"].strip() == str(defaults.max_pods_to_move)
    assert rows["planTimeout"].strip() == defaults.plan_timeout
    assert rows["dryRun"].strip() == str(defaults.dry_run).lower()
    assert rows["evictBarePods"].strip() == str(defaults.evict_bare_pods).lower()
    assert rows["evictSystemCriticalPods"].strip() == str(defaults.evict_system_critical_pods).lower()
    assert float(rows["solverTimeLimitSeconds"]) == defaults.solver_time_limit_seconds
