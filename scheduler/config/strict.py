"""Unknown keys in plugin args, also inside the API types some args embed.

Plugin args models forbid unknown fields, but some embed types from ``apis`` (``NodeAffinityArgs``'
``addedAffinity`` is a core/v1 NodeAffinity), and those ignore unknown fields because they read
what the API server sends. kube-scheduler decodes its configuration strictly all the way down,
and a typo there would silently drop a constraint, so ``unknown_fields`` finds them. Models that
forbid unknown fields themselves are left to pydantic, which reports them already.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

__all__ = ["UnknownField", "unknown_fields", "wire_names"]


@dataclass(frozen=True)
class UnknownField:
    loc: tuple[int | str, ...]
    """Where the mapping holding the key is."""
    key: str
    known: tuple[str, ...]
    """The wire names that mapping accepts (for a suggestion)."""


def wire_names(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def unknown_fields(model: type[BaseModel], data: Any) -> list[UnknownField]:
    """Keys of ``data`` that no field of ``model`` (or of the models nested in it) reads, where the
    model at that place ignores unknown fields."""
    found: list[UnknownField] = []
    _walk(model, data, (), found)
    return found


def _walk(annotation: Any, data: Any, loc: tuple[int | str, ...], found: list[UnknownField]) -> None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if isinstance(data, Mapping):
            _walk_model(annotation, data, loc, found)
        return
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        _walk(args[0], data, loc, found)
    elif origin in (typing.Union, types.UnionType):
        for arg in args:
            if arg is not type(None):
                _walk(arg, data, loc, found)
                return
    elif origin in (list, tuple, Sequence) and isinstance(data, list) and args:
        for i, item in enumerate(data):
            _walk(args[0], item, (*loc, i), found)
    elif origin in (dict, Mapping) and isinstance(data, Mapping) and len(args) == 2:
        for key, value in data.items():
            _walk(args[1], value, (*loc, str(key)), found)


def _walk_model(
    model: type[BaseModel], data: Mapping[Any, Any], loc: tuple[int | str, ...], found: list[UnknownField]
) -> None:
    by_name = bool(model.model_config.get("populate_by_name") or model.model_config.get("validate_by_name"))
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        fields[info.alias or name] = info.annotation
        if by_name:
            fields.setdefault(name, info.annotation)
    lenient = model.model_config.get("extra") != "forbid"
    for key, value in data.items():
        if key in fields:
            _walk(fields[key], value, (*loc, key), found)
        elif lenient:
            found.append(UnknownField(loc, str(key), tuple(wire_names(model))))
