"""CPU normalization and resource amplification values on the Node (``apis/extension/cpu_normalization.go``,
``node_resource_amplification.go``); the keys themselves are in ``qosannotations``.

- ``node.koordinator.sh/cpu-normalization-ratio``: a float written with two decimals (``"1.29"``);
- ``node.koordinator.sh/resource-amplification-ratio``: ``{"cpu":1.29,"memory":1.50}``, resource name
  to ratio, each number written with two decimals, keys sorted (Go's ``json.Marshal`` of a map);
- ``node.koordinator.sh/raw-allocatable``: the ResourceList the node webhook amplified from.

Ratios are float64 in Koordinator, and the webhook multiplies in float64: they stay floats here so
that an amplified allocatable is the same number Koordinator writes.

A ratio is range-checked before any arithmetic: finite, above 0 and at most
:data:`MAX_AMPLIFICATION_RATIO` (Koordinator takes any float64, and ``{"cpu": 1e308}`` or
``Infinity`` overflowed the multiplication). A ratio of 1 or less is valid and amplifies nothing,
as in Koordinator.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Annotated

from pydantic import Field, TypeAdapter

from apis.errors import InvalidAnnotation, InvalidValue, echo
from apis.extension._annotation import ResourceList, lookup, parse_json, parse_resource_list
from apis.extension.qosannotations import (
    ANNOTATION_CPU_NORMALIZATION_RATIO,
    ANNOTATION_NODE_RAW_ALLOCATABLE,
    ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO,
)
from apis.gofloat import parse_go_float
from apis.quantity import Quantity
from apis.resources import format_resource_list

__all__ = [
    "MAX_AMPLIFICATION_RATIO",
    "AmplificationRatio",
    "format_amplification_ratios",
    "format_ratio",
    "format_raw_allocatable",
    "get_cpu_normalization_ratio",
    "get_raw_allocatable",
    "get_resource_amplification_ratios",
    "multiply_milli",
    "parse_cpu_normalization_ratio",
    "parse_raw_allocatable",
    "parse_resource_amplification_ratios",
]

MAX_AMPLIFICATION_RATIO = 1000.0
"""The largest amplification ratio read. Koordinator's examples use 1 to 3; a thousand-fold node
is already meaningless, and the cap keeps ``raw milli-value x ratio`` far inside int64 for any
allocatable the cache accepts."""

AmplificationRatio = Annotated[float, Field(gt=0, le=MAX_AMPLIFICATION_RATIO, allow_inf_nan=False)]
"""One ratio of ``resource-amplification-ratio``: finite, above 0, at most 1000."""

_RATIOS: TypeAdapter[dict[str, AmplificationRatio]] = TypeAdapter(dict[str, AmplificationRatio])


def format_ratio(ratio: float) -> str:
    """Two decimals, rounded as Go's ``strconv.FormatFloat(ratio, 'f', 2, 64)`` rounds (the exact
    binary value, half to even): ``1.005`` -> ``"1.00"``, ``3.1415926`` -> ``"3.14"``."""
    return f"{ratio:.2f}"


def parse_cpu_normalization_ratio(raw: str) -> float:
    """A positive float (Go's ``ParseFloat``; ``GetCPUNormalizationRatio`` refuses 0 and below)."""
    try:
        value = float(parse_go_float(raw))
    except InvalidValue as exc:
        raise InvalidAnnotation(ANNOTATION_CPU_NORMALIZATION_RATIO, str(exc)) from exc
    except OverflowError:
        value = math.inf
    if not math.isfinite(value) or value <= 0:
        raise InvalidAnnotation(ANNOTATION_CPU_NORMALIZATION_RATIO, f"{echo(raw)} is not a positive ratio")
    return value


def get_cpu_normalization_ratio(annotations: Mapping[str, str] | None) -> float | None:
    """None when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_CPU_NORMALIZATION_RATIO)
    return None if raw is None else parse_cpu_normalization_ratio(raw)


def parse_resource_amplification_ratios(raw: str) -> dict[str, float]:
    return parse_json(ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO, raw, _RATIOS)


def get_resource_amplification_ratios(annotations: Mapping[str, str] | None) -> dict[str, float] | None:
    """None when the annotation is absent or empty (the webhook's "feature off")."""
    raw = lookup(annotations, ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO)
    return parse_resource_amplification_ratios(raw) if raw else None


def format_amplification_ratios(ratios: Mapping[str, float]) -> str:
    """``{"cpu":1.20,"memory":1.50}``: Go's ``json.Marshal`` of ``map[ResourceName]Ratio``."""
    return "{" + ",".join(f"{json.dumps(k)}:{format_ratio(ratios[k])}" for k in sorted(ratios)) + "}"


def parse_raw_allocatable(raw: str) -> ResourceList:
    return parse_resource_list(ANNOTATION_NODE_RAW_ALLOCATABLE, raw)


def get_raw_allocatable(annotations: Mapping[str, str] | None) -> ResourceList | None:
    raw = lookup(annotations, ANNOTATION_NODE_RAW_ALLOCATABLE)
    return None if raw is None else parse_raw_allocatable(raw)


def format_raw_allocatable(resources: Mapping[str, Quantity]) -> str:
    """Go's ``json.Marshal`` of a ResourceList: canonical quantity strings, keys sorted, no spaces."""
    return json.dumps(format_resource_list(dict(sorted(resources.items()))), separators=(",", ":"))


_INT64_MAX = 2**63 - 1


def multiply_milli(quantity: Quantity, ratio: float) -> Quantity:
    """Koordinator's ``MultiplyMilliQuant``: ``int64(float64(q.MilliValue()) * ratio)`` milli-units,
    truncated toward zero, in ``quantity``'s format.

    Raises InvalidValue when the ratio is not finite or the product does not fit int64 milli-units
    (Go would wrap it), instead of an OverflowError."""
    product = float(quantity.milli_value()) * ratio
    if not math.isfinite(product) or abs(product) >= _INT64_MAX:
        raise InvalidValue(f"{quantity} x {echo(ratio)} is out of range for int64 milli-units")
    return Quantity.from_milli(int(product), quantity.format)
