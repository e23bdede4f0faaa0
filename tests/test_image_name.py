"""The image `make image` builds and the chart's defaults name the same thing: one repository
(e2e/image/name.py) for the four components, the tag left to appVersion, which is the project's
version. (e2e/scenarios/test_helm_chart.py renders the chart with helm and checks the same.)"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from e2e.image import inputs, name

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "koordinator-py"


def _pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def test_reference_is_repository_and_project_version() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    assert name.version() == project["version"]
    assert name.reference() == f"localhost/koordinator-py:{project['version']}"


def test_chart_app_version_is_the_project_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == name.version()


@pytest.mark.parametrize("component", name.CHART_COMPONENTS)
def test_chart_defaults_to_the_image_make_image_builds(component: str) -> None:
    image = yaml.safe_load((CHART / "values.yaml").read_text())[component]["image"]
    # An empty tag renders as appVersion (templates/_helpers.tpl, koordinator-py.image).
    assert image == {"repository": name.REPOSITORY, "tag": "", "pullPolicy": "IfNotPresent"}


def test_main_prints_each_part(capsys: pytest.CaptureFixture[str]) -> None:
    assert name.main([]) == 0
    assert name.main(["repository"]) == 0
    assert name.main(["tag"]) == 0
    assert capsys.readouterr().out.split() == [name.reference(), name.REPOSITORY, name.version()]
    assert name.main(["nonsense"]) == 2


def test_lock_pins_every_runtime_dependency_exactly() -> None:
    """The lock the image installs from pins each of [project.dependencies] at a version it allows
    (everything they require is checked inside the image: build.sh runs `pip check` there)."""
    pins: dict[str, str] = {}
    for line in inputs.LOCK.read_text().splitlines():
        if line and not line.startswith("#"):
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", line
            pins[canonicalize_name(req.name)] = spec.version
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    for dependency in project["dependencies"]:
        req = Requirement(dependency)
        pinned = pins.get(canonicalize_name(req.name))
        assert pinned is not None, f"{req.name} is not in {inputs.LOCK.name}: run `make image-lock`"
        assert req.specifier.contains(pinned), f"{req.name}=={pinned} does not satisfy {req}"
