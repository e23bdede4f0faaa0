"""Scalar wire types shared by the API models, each carrying the OpenAPI schema its CRD needs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, Field, WithJsonSchema

from apis.cpulist import MAX_CPUS, parse_cpus
from apis.duration import parse_go_duration_ns

__all__ = [
    "CPUID",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "CPUList",
    "GoDuration",
    "Int32",
    "Int64",
    "IntOrString",
    "NonNegativeInt32",
    "NonNegativeInt64",
    "Percent",
    "PreserveUnknownObject",
    "Time",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX, json_schema_extra={"format": "int32"})]
"""A Go int32. The range is checked in Python; ``apis.crdgen`` drops the range bounds (Koordinator's
schemas only say ``format: int32``) but keeps any tighter bound a field adds (``Field(ge=0)``)."""

Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX, json_schema_extra={"format": "int64"})]

NonNegativeInt32 = Annotated[Int32, Field(ge=0)]
"""A Go int32 that is an id or a count: a NUMA node, a socket, a core, a device minor."""

NonNegativeInt64 = Annotated[Int64, Field(ge=0)]

Percent = Annotated[Int64, Field(ge=0, le=100)]
"""A percentage of a whole (a usage threshold, a bandwidth share): 0 to 100, so -50 or 1000 is refused."""

CPUID = Annotated[int, Field(ge=0, lt=MAX_CPUS, json_schema_extra={"format": "int32"})]
"""A logical CPU id, below :data:`apis.cpulist.MAX_CPUS` as in a CPU list."""


def _check_duration(value: str) -> str:
    parse_go_duration_ns(value)
    return value


GoDuration = Annotated[str, AfterValidator(_check_duration), WithJsonSchema({"type": "string"})]
"""A Go duration string (``"24h"``, ``"90s"``); kept verbatim, validated by Go's grammar."""


def _check_cpu_list(value: str) -> str:
    parse_cpus(value)
    return value


CPUList = Annotated[str, AfterValidator(_check_cpu_list), WithJsonSchema({"type": "string"})]
"""A Linux CPU list (``"0-3,8"``), kept verbatim; checked by :func:`apis.cpulist.parse_cpus` (ASCII
ids below ``MAX_CPUS``, at most ``MAX_CPUS`` ids in all), so ``"banana"`` is refused where it is read."""

Time = Annotated[datetime, WithJsonSchema({"type": "string", "format": "date-time"})]

IntOrString = Annotated[
    int | str,
    WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}),
]

PreserveUnknownObject = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]
"""An object the schema stores without validation (a PodTemplateSpec, a strategic-merge patch)."""
