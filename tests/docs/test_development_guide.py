"""docs/development.md's "Add a scheduler plugin" works as written: its module is copied out of the
page, registered by its line in the module list, enabled by its YAML, and filters nodes."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import yaml

from scheduler.config import load_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.registry import PluginSpec, Registry, declared_plugin
from scheduler.framework.runtime import Framework
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from tests.scheduler.builders import make_node, make_pod, make_snapshot

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "development.md"
MODULE = "require_node_label"


def blocks(language: str) -> list[str]:
    section = GUIDE.read_text().split("## Add a scheduler plugin", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


@pytest.fixture
def example(tmp_path: Path) -> Iterator[ModuleType]:
    module_source = blocks("python")[0]
    path = tmp_path / f"{MODULE}.py"
    path.write_text(module_source)
    spec = importlib.util.spec_from_file_location(MODULE, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(MODULE, None)


def registration(example: ModuleType) -> PluginSpec:
    """The plugin the guide's module list block adds: the ``PLUGIN`` its module declares."""
    tree = ast.parse(blocks("python")[1])
    (listing,) = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id == "PLUGIN_MODULES"
    ]
    assert isinstance(listing, ast.Tuple)
    added = [element.id for element in listing.elts if isinstance(element, ast.Name)]
    assert added == [MODULE]
    return declared_plugin(example)


def test_the_guides_plugin_registers_configures_and_filters(example: ModuleType) -> None:
    registry = Registry([*DEFAULT_REGISTRY.specs(), registration(example)])
    (config_yaml,) = blocks("yaml")
    (profile,) = load_config(config_yaml, DEFAULT_PLUGINS, registry).profiles
    ready = make_node("ready").alloc(cpu="4", pods="10").label("example.com/ready", "yes").obj()
    snapshot = make_snapshot([ready, make_node("other").alloc(cpu="4", pods="10").obj()])
    handle = Handle(backend=None, snapshot=lambda: snapshot)  # type: ignore[arg-type]
    fwk = Framework(profile, registry, handle)
    pod = make_pod("web").req(cpu="1").info()
    diagnosis = Diagnosis(node_count=2)
    rows, status = fwk.run_filter(CycleState(), pod, snapshot, snapshot.candidate_rows(), diagnosis)
    assert status.ok
    assert [snapshot.table.names[int(r)] for r in np.asarray(rows)] == ["ready"]
    assert diagnosis.reason_counts == {"node(s) didn't have label example.com/ready": 1}


def test_a_typo_in_the_guides_plugin_args_is_refused_at_load(example: ModuleType) -> None:
    registry = Registry([*DEFAULT_REGISTRY.specs(), registration(example)])
    (config_yaml,) = blocks("yaml")
    config = yaml.safe_load(config_yaml)
    config["profiles"][0]["pluginConfig"][0]["args"] = {"lable": "x"}
    with pytest.raises(ValueError, match="lable"):
        load_config(config, DEFAULT_PLUGINS, registry)
