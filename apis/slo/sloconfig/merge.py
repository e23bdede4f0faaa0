"""Koordinator's ``MergeCfg``: marshal the override to JSON and unmarshal it on top of the base.

Fields present in the override win, nested objects merge field by field, maps merge by key, lists
are replaced. "Present" is what the wire form carries: a field the override left unset (None)
does not erase the base's value, as Go's ``omitempty`` pointers do not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from apis.base import KoordModel

__all__ = ["merge_cfg", "merge_wire"]

M = TypeVar("M", bound=KoordModel)


def merge_wire(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` laid over ``base``: objects merge recursively, anything else is replaced."""
    merged = dict(base)
    for key, value in override.items():
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_wire(old, value)
        else:
            merged[key] = value
    return merged


def merge_cfg(base: M, override: KoordModel | Mapping[str, Any] | None) -> M:
    """``base`` with ``override``'s present fields laid on top, validated as ``base``'s type.

    ``override`` may be another model (its wire form is used, so unset fields do not count) or a
    wire mapping such as a ConfigMap's parsed JSON or a node annotation.
    """
    if override is None:
        return base.model_copy(deep=True)
    wire = override.to_wire() if isinstance(override, KoordModel) else override
    return type(base).model_validate(merge_wire(base.to_wire(), wire))
