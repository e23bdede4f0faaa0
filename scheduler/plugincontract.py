"""Write .importlinter's plugins-independent contract from the plugin module list; never hand-edited.

``python -m scheduler.plugincontract`` (``make import-contracts``) rewrites the ``modules`` of the
``plugins-independent`` contract with every module of ``scheduler.plugins.PLUGIN_MODULES``, so
that a plugin added to the list is held independent of the others by ``make lint``. ``--check``
fails when the checked-in file differs (``tests/scheduler/test_plugin_contract.py``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

from apis.client.rbacchart import generate
from scheduler.plugins import PLUGIN_MODULES

__all__ = ["SECTION", "main", "render", "with_modules"]

OUTPUT = Path(__file__).resolve().parents[1] / ".importlinter"

SECTION = "[importlinter:contract:plugins-independent]"

_MODULES = re.compile(r"^modules =\n(?:[ \t]+\S.*\n)*", flags=re.MULTILINE)


def with_modules(config: str, modules: Sequence[str]) -> str:
    """``config`` (an .importlinter) with the plugins-independent contract listing ``modules``."""
    start = config.find(SECTION)
    if start < 0:
        raise ValueError(f"no {SECTION} section")
    end = config.find("\n[", start)
    end = len(config) if end < 0 else end + 1
    listing = "modules =\n" + "".join(f"    {module}\n" for module in modules)
    section, count = _MODULES.subn(listing, config[start:end])
    if count != 1:
        raise ValueError(f"{SECTION} has no 'modules =' list")
    return config[:start] + section + config[end:]


def render() -> str:
    return with_modules(OUTPUT.read_text(), sorted(module.__name__ for module in PLUGIN_MODULES))


def main(argv: list[str] | None = None) -> int:
    return generate(
        "python -m scheduler.plugincontract",
        __doc__.splitlines()[0],
        OUTPUT,
        render,
        argv,
        remedy="make import-contracts",
    )


if __name__ == "__main__":
    sys.exit(main())
