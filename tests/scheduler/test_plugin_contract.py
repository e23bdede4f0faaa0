""".importlinter's plugins-independent contract is generated from the plugin module list: a plugin
added to ``PLUGIN_MODULES`` is held independent of the others by ``make lint``."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from scheduler import plugincontract
from scheduler.plugins import PLUGIN_MODULES


def test_checked_in_contract_matches_the_module_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert plugincontract.main(["--check"]) == 0, capsys.readouterr().out


def test_the_contract_names_every_plugin_module() -> None:
    config = configparser.ConfigParser()
    config.read_string(plugincontract.render())
    contract = config["importlinter:contract:plugins-independent"]
    assert contract["type"] == "independence"
    assert contract["modules"].split() == sorted(module.__name__ for module in PLUGIN_MODULES)


def test_a_contract_without_a_plugin_fails_the_check(tmp_path: Path) -> None:
    """The check is not vacuous: a contract that lost a plugin differs from the module list."""
    stale = plugincontract.render().replace("    scheduler.plugins.device_share\n", "")
    path = tmp_path / ".importlinter"
    path.write_text(stale)
    assert plugincontract.main(["--check", "--output", str(path)]) == 1


def test_only_the_plugins_contract_is_rewritten() -> None:
    config = (
        "[a]\nmodules =\n    x\n\n"
        + plugincontract.SECTION
        + "\ntype = independence\nmodules =\n    old\n\n[b]\n"
    )
    assert plugincontract.with_modules(config, ["p", "q"]) == (
        "[a]\nmodules =\n    x\n\n"
        + plugincontract.SECTION
        + "\ntype = independence\nmodules =\n    p\n    q\n\n[b]\n"
    )


def test_a_file_without_the_contract_is_refused() -> None:
    with pytest.raises(ValueError, match="no \\[importlinter:contract:plugins-independent\\] section"):
        plugincontract.with_modules("[importlinter]\nroot_packages = scheduler\n", ["p"])
