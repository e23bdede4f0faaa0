"""Hostile objects at every admission webhook koord-manager serves: each handler answers (allowed,
or denied with a bounded message naming the field), never raises anything else.

Kopf turns any other exception into ``allowed: false`` with a message saying nothing useful, and
for the mutating webhooks on nodes and pods (failure policy Ignore) into an update that goes
through unmutated without a word: a crash in a handler is a defect whatever the input.

The objects are the examples of ``docs/examples``, one field or annotation at a time replaced by a
hostile value: text of every Unicode category (lone surrogates included), non-ASCII digits,
numbers at and past a float64's range (1e308, Infinity, NaN, 10**400 as an integer), nesting a few
hundred levels deep (Kopf's JSON decoder refuses deeper bodies before a handler runs; deeper
*text* goes into annotations: 10,000 levels of ``[`` or ``{``), and one element repeated
thousands of times. The work is bounded by what is counted: the message of a denial never grows
past a fixed size however many problems the object has.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from apis.config.clustercolocationprofile import ClusterColocationProfile
from apis.core import Pod
from apis.errors import MESSAGE_LIMIT
from apis.extension import qosannotations
from apis.features import FeatureGates
from apis.meta import LabelSelector
from apis.registry import ADMISSION_RESOURCES
from apis.scheduling.elasticquota import ElasticQuota
from apis.scheduling.reservation import Reservation
from operators.handlers import admission as admission_handlers
from operators.handlers import node_amplification
from operators.handlers.elasticquota import QuotaAdmission
from operators.handlers.reservation import Lifecycle
from operators.logic import colocation_profile, quota_tree_affinity
from operators.logic.reservation_admission import validate_update
from tests.apis.test_models import NODE_METRIC, NODE_SLO, POD_MIGRATION_JOB
from tests.examples import examples
from tests.fuzz.test_hostile_text import any_text, digits, numbers, texts
from tests.fuzz.test_parsers import MODULES, _keys

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"

DENIAL_LIMIT = 2 * MESSAGE_LIMIT
"""The longest denial a handler may give: its kind, the object's name and the problems."""


def _docs() -> list[dict[str, Any]]:
    return [
        doc
        for path in sorted(EXAMPLES.rglob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict) and "kind" in doc
    ]


DOCS = _docs()
SEEDS: dict[str, list[dict[str, Any]]] = {}
for _doc in DOCS + [yaml.safe_load(text) for text in (NODE_METRIC, NODE_SLO, POD_MIGRATION_JOB)]:
    SEEDS.setdefault(_doc["kind"], []).append(_doc)

ANNOTATION_KEYS = sorted({key for module in MODULES for key in _keys(module)})
"""Every label and annotation key ``apis.extension`` declares."""


def _nested(depth: int, dicts: bool) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value} if dicts else [value]
    return value


hostile_values: st.SearchStrategy[Any] = st.one_of(
    any_text,
    digits,
    numbers,
    numbers.map(float),
    st.sampled_from([10**400, -(10**400), 2**63, 2**64, -(2**63) - 1, -1, 0, True, None]),
    st.floats(),
    st.builds(_nested, st.integers(1, 900), st.booleans()),
    st.builds(lambda v, n: [v] * n, any_text | numbers, st.integers(1, 5000)),
    st.builds(lambda n: {f"k{i}": "v" for i in range(n)}, st.integers(1, 3000)),
    st.builds(lambda n: "9" * n, st.integers(300, 5000)),
    texts,
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*path, i))


def _replaced(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    result = copy.deepcopy(doc)
    target: Any = result
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return result


CORE_KINDS = {"Pod", "Node"}


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


@st.composite
def hostile_objects(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    """A seed of ``kind`` with one field replaced, or one annotation or label added, hostile."""
    seed = draw(st.sampled_from(SEEDS[kind]))
    if draw(st.booleans()):
        where = draw(st.sampled_from(["annotations", "labels"]))
        key = draw(st.sampled_from(ANNOTATION_KEYS))
        doc = copy.deepcopy(seed)
        doc.setdefault("metadata", {}).setdefault(where, {})[key] = draw(texts | any_text | digits)
        return doc
    paths = [p for p in _paths(seed) if len(p) >= 2 and p[0] in ("metadata", "spec", "status")]
    if kind in CORE_KINDS:
        # The API server decodes core kinds into Go structs before any webhook: only text is hostile.
        strings = [p for p in paths if isinstance(_at(seed, p), str)]
        return _replaced(seed, draw(st.sampled_from(strings)), draw(texts | any_text | digits))
    return _replaced(seed, draw(st.sampled_from(paths)), draw(hostile_values))


def _bounded(message: str) -> None:
    assert len(message) <= DENIAL_LIMIT, f"a denial of {len(message)} characters"


KINDS = [m for m in ADMISSION_RESOURCES if m.crd.kind in SEEDS]


def test_every_admission_kind_has_an_example_to_start_from() -> None:
    assert [m.crd.kind for m in KINDS] == [m.crd.kind for m in ADMISSION_RESOURCES]


@pytest.mark.parametrize("model", KINDS, ids=[m.crd.kind for m in KINDS])
@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_validating_webhook_of_every_kind_allows_or_denies_a_hostile_object(
    model: Any, data: st.DataObject
) -> None:
    body = data.draw(hostile_objects(model.crd.kind))
    warnings: list[str] = []
    validate = admission_handlers._validator(model)
    try:
        validate(body=body, warnings=warnings)
    except kopf.AdmissionError as denial:
        _bounded(str(denial))
    for warning in warnings:
        _bounded(warning)


def _model(model: Any, body: dict[str, Any]) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError:
        return None  # the generic webhook above denies it; the kind's own handler skips it


class _NoQuotas:
    async def find(self, name: str) -> None:
        return None


class _NoPods:
    async def labelled(self, key: str, value: str) -> list[str]:
        return []

    async def any_in(self, namespace: str) -> bool:
        return False


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_elastic_quota_webhooks_answer_a_hostile_quota(data: st.DataObject) -> None:
    known = [ElasticQuota.model_validate(doc) for doc in SEEDS["ElasticQuota"]]
    index = {quota.metadata.name or "": [quota] for quota in known}
    body = data.draw(hostile_objects("ElasticQuota"))
    operation = data.draw(st.sampled_from(["CREATE", "UPDATE", "DELETE"]))
    old = data.draw(st.sampled_from(SEEDS["ElasticQuota"])) if operation == "UPDATE" else None
    handlers = QuotaAdmission(_NoQuotas(), _NoPods(), FeatureGates(elastic_quota_guarantee_usage=True))  # type: ignore[arg-type]
    try:
        asyncio.run(handlers.validate(body=body, old=old, operation=operation, elastic_quotas=index))
    except kopf.AdmissionError as denial:
        _bounded(str(denial))
    if operation != "DELETE":
        patch = kopf.Patch()
        asyncio.run(
            handlers.mutate(body=body, old=old, operation=operation, patch=patch, elastic_quotas=index)
        )


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_reservation_update_webhook_answers_a_hostile_reservation(data: st.DataObject) -> None:
    old = data.draw(st.sampled_from(SEEDS["Reservation"]))
    body = data.draw(hostile_objects("Reservation"))
    lifecycle = object.__new__(Lifecycle)  # validate_update needs no client
    for new, previous in ((body, old), (old, body)):
        try:
            asyncio.run(lifecycle.validate_update(body=new, old=previous))
        except kopf.AdmissionError as denial:
            _bounded(str(denial))
    new_model, old_model = _model(Reservation, body), Reservation.model_validate(old)
    if new_model is not None:
        for problem in validate_update(new_model, old_model):
            _bounded(problem)


NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "node-a",
        "annotations": {
            qosannotations.ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO: '{"cpu": 1.5, "memory": 1.2}',
            qosannotations.ANNOTATION_NODE_RAW_ALLOCATABLE: '{"cpu": "8", "memory": "16Gi"}',
        },
    },
    "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
}
SEEDS["Node"] = [NODE, *SEEDS.get("Node", [])]


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_node_mutating_webhook_never_refuses_a_hostile_node_status(data: st.DataObject) -> None:
    body = data.draw(hostile_objects("Node"))
    old = data.draw(st.sampled_from([None, NODE, body]))
    warnings: list[str] = []
    node_amplification.mutate(body=body, old=old, patch=kopf.Patch(), warnings=warnings)
    for warning in warnings:
        _bounded(warning)
    assert not any("Error:" in w for w in warnings), warnings  # handled, not caught as a crash


PROFILES = [ClusterColocationProfile.model_validate(doc) for doc in SEEDS["ClusterColocationProfile"]]


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_pod_mutating_webhooks_answer_a_hostile_pod(data: st.DataObject) -> None:
    body = data.draw(hostile_objects("Pod"))
    meta = body.get("metadata") or {}
    matched = colocation_profile.matching(PROFILES, meta.get("labels") or {}, {})
    try:
        colocation_profile.mutate(body, colocation_profile.rolled(matched, lambda: 0), {})
    except (colocation_profile.MissingPriorityClass, colocation_profile.strategic_merge.PatchError) as exc:
        _bounded(str(exc))  # the handler denies with this message
    pod = _model(Pod, body)
    if pod is None:
        return
    quota_tree_affinity.quota_lookup(pod)
    quota_tree_affinity.with_tree_affinity(pod, LabelSelector(match_labels={"tree": "a"}))
