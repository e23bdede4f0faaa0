"""The chart's koord-scheduler RBAC is generated from the rules declared next to the code, and
every resource a plugin watches is covered by the rules it declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler import rbacgen
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.handle import Handle, Informers
from scheduler.framework.registry import PluginSpec
from scheduler.plugins import DEFAULT_REGISTRY


def test_checked_in_chart_rbac_matches_the_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert rbacgen.main(["--check"]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("spec", DEFAULT_REGISTRY.specs(), ids=lambda s: s.name)
def test_every_watched_resource_is_granted_to_the_plugin(spec: PluginSpec) -> None:
    informers = Informers()
    cache = Cache()
    handle = Handle(backend=MemoryBackend(), snapshot=lambda: Snapshot(cache), informers=informers)
    spec.factory(spec.args_model() if spec.args_model else None, handle)
    granted = [*rbacgen.CORE_RULES, *spec.rbac]
    for resource in informers.resources():
        for verb in ("list", "watch"):
            assert any(rule.grants(resource.group, resource.plural, verb) for rule in granted), (
                f"{spec.name} watches {resource.plural} but declares no {verb} rule for it"
            )


def test_a_missing_rule_fails_the_check(tmp_path: Path) -> None:
    """The check is not vacuous: a chart that lost a plugin's rule differs from the code."""
    stale = rbacgen.render().replace("  resources: [podgroups]\n", "  resources: [podgroupz]\n")
    path = tmp_path / "rbac.yaml"
    path.write_text(stale)
    assert rbacgen.main(["--check", "--output", str(path)]) == 1
