"""The chart's koord-descheduler RBAC is generated from the rules declared in code, and covers
every resource the descheduler watches."""

from __future__ import annotations

from pathlib import Path

import kopf
import pytest

from operators.descheduler import handlers, rbacgen
from operators.descheduler.app import Descheduler
from operators.descheduler.config import DeschedulerConfiguration


def test_checked_in_chart_rbac_matches_the_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert rbacgen.main(["--check"]) == 0, capsys.readouterr().out


def test_a_missing_rule_fails_the_check(tmp_path: Path) -> None:
    stale = rbacgen.render().replace(
        "  resources: [podmigrationjobs/status]\n", "  resources: [podmigrationjobz/status]\n"
    )
    path = tmp_path / "rbac.yaml"
    path.write_text(stale)
    assert rbacgen.main(["--check", "--output", str(path)]) == 1


def test_every_watched_resource_is_granted() -> None:
    registry = kopf.OperatorRegistry()
    app = Descheduler(DeschedulerConfiguration(), kubeconfig=None, leader_elect=False, initial_delay=0)
    handlers.register(registry, app)
    watched: set[tuple[str, str]] = set()
    for handler in registry._watching.get_all_handlers():
        selector = handler.selector
        assert selector is not None
        watched.add((str(selector.group or ""), str(selector.plural or selector.any_name)))
    assert ("", "pods") in watched
    for group, plural in watched:
        for verb in ("list", "watch"):
            assert any(rule.grants(group, plural, verb) for rule in rbacgen.CORE_RULES), (group, plural, verb)
