"""Events and log lines that list an object's problems stay bounded however many it has: each site
lists what fits in ``apis.errors.MESSAGE_LIMIT`` characters and counts the rest (``summary``), so a
profile, a node or a config with 100,000 problems costs the API server one short event."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from apis.errors import MESSAGE_LIMIT
from apis.meta import LabelSelector
from operators.handlers.colocation_profile import colocation_profiles
from operators.handlers.cpu_normalization import CPUNormalization
from operators.handlers.noderesource import NodeResourceController
from operators.logic import nodeslo

PROFILE = (
    Path(__file__).resolve().parents[2] / "docs" / "examples" / "colocation" / "batch-colocation-profile.yaml"
)
MANY = 100_000
BOUND = MESSAGE_LIMIT + 200
"""The problems and the words around them (the object's name, what is left as it is)."""


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    posted: list[str] = []

    def warn(obj: Any, *, reason: str, message: str = "") -> None:
        posted.append(message)

    monkeypatch.setattr(kopf, "warn", warn)
    return posted


def _profile() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(PROFILE.read_text())
    return body


def test_a_profile_with_100000_bad_selector_labels_gets_a_bounded_event(
    events: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    body = _profile()
    body["spec"]["selector"] = {"matchLabels": {f"k{i}": "!bad!" for i in range(MANY)}}
    assert colocation_profiles(name="p", body=kopf.Body(body)) != {}  # type: ignore[arg-type]
    [message] = events
    assert len(message) <= BOUND
    assert message.endswith(" more problems")
    assert all(len(record.getMessage()) <= BOUND for record in caplog.records)


def test_a_profile_its_model_refuses_100000_times_gets_a_bounded_event(events: list[str]) -> None:
    body = _profile()
    body["metadata"]["labels"] = {f"k{i}": i for i in range(MANY)}  # label values must be strings
    assert colocation_profiles(name="p", body=kopf.Body(body)) == {}  # type: ignore[arg-type]
    [message] = events
    assert len(message) <= BOUND
    assert message.endswith(" more problems")


def test_cpu_normalization_reports_100000_node_problems_in_a_bounded_event(events: list[str]) -> None:
    handlers = CPUNormalization(None)  # type: ignore[arg-type]
    body = {"metadata": {"name": "n1"}}
    handlers._report("n1", kopf.Body(body), [f"problem {i}" for i in range(MANY)])  # type: ignore[arg-type]
    [message] = events
    assert len(message) <= BOUND
    assert len(handlers.reported["n1"]) <= BOUND


def test_noderesource_reports_100000_node_problems_in_a_bounded_event(
    events: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    controller = NodeResourceController(None)  # type: ignore[arg-type]
    controller.bodies["n1"] = kopf.Body({"metadata": {"name": "n1"}})  # type: ignore[arg-type]
    logger = logging.getLogger("test_bounded_messages")
    with caplog.at_level(logging.WARNING):
        controller._report("n1", [f"problem {i}" for i in range(MANY)], logger)  # type: ignore[arg-type]
    [message] = events
    assert len(message) <= BOUND
    assert [len(r.getMessage()) <= BOUND for r in caplog.records] == [True]


def test_a_nodeslo_selector_with_100000_problems_is_described_in_bounded_text() -> None:
    expressions = [{"key": "k", "operator": "In", "values": []}] * MANY  # In needs values
    selector = LabelSelector.model_validate({"matchExpressions": expressions})
    problem = nodeslo._selector_problem(selector)
    assert problem is not None
    assert len(problem) <= BOUND
