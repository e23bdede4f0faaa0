"""Taints and tolerations: kube's ``v1helper.TolerationsTolerateTaint`` and the taint effects."""

from __future__ import annotations

import re
from collections.abc import Sequence

from apis.meta import Taint, Toleration

__all__ = [
    "KNOWN_OPERATORS",
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "parse_decimal",
    "tolerates",
    "tolerations_tolerate",
]

NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"
KNOWN_OPERATORS = frozenset({"", "Equal", "Exists", "Gt", "Lt"})
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_decimal(value: str | None) -> int | None:
    """``value`` as an int64 in canonical decimal form ("0950" is not), else None."""
    if value is None or not _DECIMAL.fullmatch(value):
        return None
    number = int(value)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """core/v1 ``Toleration.ToleratesTaint``; a malformed toleration tolerates nothing."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    operator = toleration.operator or "Equal"
    if operator == "Equal":
        return (toleration.value or "") == (taint.value or "")
    if operator == "Exists":
        return True
    if operator in ("Gt", "Lt"):
        wanted, actual = parse_decimal(toleration.value), parse_decimal(taint.value)
        if wanted is None or actual is None:
            return False
        return actual > wanted if operator == "Gt" else actual < wanted
    return False


def tolerations_tolerate(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)
