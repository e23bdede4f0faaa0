"""What makes a Reservation invalid at admission: pure functions, no Kopf, no I/O.

The CRD schema already requires ``spec.template`` and a non-empty ``spec.owners`` of non-empty
items, and the model (``operators.logic.admission`` validates it first) checks the same and
``spec.ttl``'s Go duration grammar. ``validate`` adds what neither can express, each message
naming the field:

- the template is schemaless as in Koordinator (``x-kubernetes-preserve-unknown-fields``): it is
  refused only where Koordinator's typed client could not decode it (a field of the wrong type, a
  quantity that is none) or a request is negative (the scheduler would count it as free room);
  containers without names, no containers and no requests are accepted as Koordinator accepts them;
- an owner's ``object`` must name the pod by ``name`` or ``uid``; a ``controller`` needs non-empty
  ``apiVersion``, ``kind``, ``name`` and ``uid`` (it is matched by uid); a ``labelSelector`` must
  be one ``metav1.LabelSelectorAsSelector`` accepts (messages as ``ValidateLabelSelector``'s);
- ``ttl`` and ``expires`` are mutually exclusive, and ``ttl`` may not be negative. The CRD
  defaults ``ttl`` to 24h, so the API server has already written that value into any reservation
  that sets only ``expires``: a ttl of exactly 24h next to ``expires`` cannot be told apart from
  the default and is accepted (``expires`` then decides, see ``reservation_expiry``).

``validate_update`` holds Koordinator's rule for a bound reservation: once ``status.nodeName`` is
set, ``spec.template`` and ``spec.owners`` may no longer change (the scheduler placed it, and
matched owners, by them).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from apis.core import PodSpec
from apis.duration import parse_go_duration_ns
from apis.meta import LabelSelector
from apis.scheduling.reservation import Reservation, ReservationOwner, template_pod_spec

__all__ = ["DEFAULT_TTL", "validate", "validate_update"]

DEFAULT_TTL = "24h"
"""The CRD's default for ``spec.ttl``."""
_SET_OPERATORS = ("In", "NotIn")
_EXIST_OPERATORS = ("Exists", "DoesNotExist")
_CONTAINERS = "spec.template.spec.containers"
_VALUES_FORBIDDEN = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"


def _loc(parts: tuple[int | str, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _template_problems(template: dict[str, Any] | None) -> list[str]:
    """What Koordinator refuses in a template: none at all, or one its typed client could not
    decode (a field of the wrong type, a quantity that is no quantity). The template is otherwise
    schemaless: containers without names (the scheduler names them, ``template_pod_spec``), no
    containers, or no requests are all accepted, as Koordinator accepts them."""
    if not template:
        return ["spec.template: Required value: a pod template giving the resources to reserve"]
    raw_spec = template.get("spec")
    if raw_spec is None:
        return []
    if not isinstance(raw_spec, dict):
        return [f"spec.template.spec: Invalid value: {type(raw_spec).__name__}: must be an object"]
    try:
        spec = PodSpec.model_validate(template_pod_spec(template))
    except ValidationError as exc:
        return [f"spec.template.spec{_loc(tuple(e['loc']))}: {e['msg']}" for e in exc.errors()]
    problems: list[str] = []
    for field, containers in (
        ("containers", spec.containers),
        ("initContainers", spec.init_containers or []),
    ):
        for i, container in enumerate(containers):
            requests = (container.resources.requests if container.resources else None) or {}
            for name, quantity in sorted(requests.items()):
                if quantity.sign() < 0:
                    path = f"spec.template.spec.{field}[{i}].resources.requests[{name}]"
                    problems.append(
                        f"{path}: Invalid value: {str(quantity)!r}: must be greater than or equal to 0"
                    )
    return problems


def label_selector_problems(selector: LabelSelector, path: str) -> list[str]:
    """What ``metav1.ValidateLabelSelector`` rejects in ``selector``."""
    problems: list[str] = []
    for i, expression in enumerate(selector.match_expressions or []):
        where = f"{path}.matchExpressions[{i}]"
        if expression.operator in _SET_OPERATORS:
            if not expression.values:
                problems.append(
                    f"{where}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
                )
        elif expression.operator in _EXIST_OPERATORS:
            if expression.values:
                problems.append(f"{where}.values: Forbidden: {_VALUES_FORBIDDEN}")
        else:
            problems.append(
                f"{where}.operator: Invalid value: {expression.operator!r}: not a valid selector operator"
            )
    return problems


def _owner_problems(i: int, owner: ReservationOwner) -> list[str]:
    path = f"spec.owners[{i}]"
    problems: list[str] = []
    if owner.object is not None and not owner.object.name and not owner.object.uid:
        problems.append(f"{path}.object: Required value: name or uid of the owner pod")
    if owner.controller is not None:
        controller = owner.controller
        for field, value in (
            ("apiVersion", controller.api_version),
            ("kind", controller.kind),
            ("name", controller.name),
            ("uid", controller.uid),
        ):
            if not value:
                problems.append(
                    f"{path}.controller.{field}: Required value: a controller owner needs apiVersion, kind, "
                    "name and uid (it is matched by uid)"
                )
    if owner.label_selector is not None:
        problems += label_selector_problems(owner.label_selector, f"{path}.labelSelector")
    return problems


def validate(reservation: Reservation) -> list[str]:
    """Every reason to reject ``reservation`` at CREATE or UPDATE (see the module docstring)."""
    spec = reservation.spec
    if spec is None:
        return ["spec: Required value"]
    problems = _template_problems(spec.template)
    for i, owner in enumerate(spec.owners):
        problems += _owner_problems(i, owner)
    if parse_go_duration_ns(spec.ttl) < 0:
        problems.append(f"spec.ttl: Invalid value: {spec.ttl!r}: must not be negative ('0s' disables expiry)")
    if spec.expires is not None and spec.ttl != DEFAULT_TTL:
        problems.append(
            f"spec.ttl: Forbidden: ttl {spec.ttl!r} and spec.expires are mutually exclusive; set only one"
        )
    return problems


def validate_update(new: Reservation, old: Reservation) -> list[str]:
    """Fields a reservation bound to a node may no longer change."""
    node = old.status.node_name if old.status is not None else None
    if not node or new.spec is None or old.spec is None:
        return []
    problems: list[str] = []
    if new.spec.template != old.spec.template:
        problems.append(
            f"spec.template: Forbidden: may not change once the reservation is bound to node {node}"
        )
    if new.spec.owners != old.spec.owners:
        problems.append(
            f"spec.owners: Forbidden: may not change once the reservation is bound to node {node}"
        )
    return problems
