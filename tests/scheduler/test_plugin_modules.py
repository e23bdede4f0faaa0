"""The registry is built from the plugin modules: each declares ``PLUGIN`` once, and
``PLUGIN_MODULES`` lists every module that does."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest

import scheduler.plugins
from scheduler.framework.registry import declared_plugin
from scheduler.plugins import DEFAULT_REGISTRY, PLUGIN_MODULES


def test_every_module_that_declares_a_plugin_is_in_the_module_list() -> None:
    declaring = {
        info.name
        for info in pkgutil.iter_modules(scheduler.plugins.__path__, "scheduler.plugins.")
        if hasattr(importlib.import_module(info.name), "PLUGIN")
    }
    assert declaring == {module.__name__ for module in PLUGIN_MODULES}


def test_the_registry_holds_one_plugin_per_listed_module() -> None:
    assert DEFAULT_REGISTRY.specs() == sorted(
        (declared_plugin(module) for module in PLUGIN_MODULES), key=lambda spec: spec.name
    )


def test_a_listed_module_that_declares_no_plugin_is_refused() -> None:
    with pytest.raises(TypeError, match="require_node_label declares no PLUGIN"):
        declared_plugin(ModuleType("require_node_label"))
