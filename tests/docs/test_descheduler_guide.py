"""docs/descheduler.md's YAML is what koord-descheduler and the API accept."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from apis.scheduling.podmigrationjob import PodMigrationJob
from operators.descheduler.config import MigrationControllerArgs, load, resolve
from operators.descheduler.registry import args_models

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "descheduler.md"


def _blocks(section: str = "") -> list[str]:
    """The YAML blocks of the guide, or of one of its ``## `` sections."""
    text = GUIDE.read_text()
    if section:
        text = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```yaml\n(.*?)```", text, flags=re.S)


def test_the_configuration_loads_with_every_documented_argument() -> None:
    [config_text] = [b for b in _blocks("Configuration") if "DeschedulerConfiguration" in b]
    config = load(config_text)
    args = resolve(config, args_models())[0].args["MigrationController"]
    assert isinstance(args, MigrationControllerArgs)
    assert args.max_migrating_globally == 20
    assert args.object_limiters["namespace"].max_migrating == 3


def test_the_migration_jobs_are_valid_in_both_modes() -> None:
    [jobs_text] = [b for b in _blocks() if "PodMigrationJob" in b]
    jobs = [PodMigrationJob.model_validate(doc) for doc in yaml.safe_load_all(jobs_text)]
    assert [j.spec.mode for j in jobs if j.spec] == ["ReservationFirst", "EvictDirectly"]
