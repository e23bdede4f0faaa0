"""ConfigError, and pydantic's validation errors rewritten as ``field.path: what is wrong``."""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from scheduler.config.catalog import did_you_mean
from scheduler.config.strict import UnknownField, wire_names

__all__ = ["ConfigError", "field_path", "pydantic_problems", "unknown_field_problem"]


class ConfigError(ValueError):
    """The configuration is invalid; ``problems`` lists each one as ``field.path: what is wrong``."""

    def __init__(self, problems: Sequence[str], source: str = "") -> None:
        self.problems = list(problems)
        where = f" in {source}" if source else ""
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid KubeSchedulerConfiguration{where}:\n{lines}")


def field_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


def pydantic_problems(
    exc: ValidationError, *, model: type[BaseModel] | None = None, prefix: str = ""
) -> list[str]:
    """One line per error. ``prefix`` is the path of what ``model`` validated; with ``model``, an
    unknown field gets the closest known field name as a suggestion."""
    problems = []
    for err in exc.errors():
        loc = err["loc"]
        where = field_path([prefix, *loc] if prefix else loc)
        if err["type"] == "extra_forbidden":
            at = _model_at(model, loc[:-1]) if model is not None else None
            known = wire_names(at) if at is not None else []
            problems.append(f'unknown field "{where}"{did_you_mean(str(loc[-1]), known)}')
        elif err["type"] == "missing":
            problems.append(f"{where}: required field is missing")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{where}: {msg} (got {err.get('input')!r})" if loc else f"{where}: {msg}")
    return problems


def unknown_field_problem(unknown: UnknownField, prefix: str = "") -> str:
    where = field_path([prefix, *unknown.loc, unknown.key] if prefix else [*unknown.loc, unknown.key])
    return f'unknown field "{where}"{did_you_mean(unknown.key, unknown.known)}'


def _model_at(model: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model class at ``loc`` inside ``model`` (through fields, lists, dicts, optionals)."""
    current: Any = model
    for part in loc:
        current = _step(current, part)
        if current is None:
            return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _step(annotation: Any, part: int | str) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if not isinstance(part, str):
            return None
        for name, info in annotation.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _step(args[0], part)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            found = _step(arg, part)
            if found is not None:
                return found
        return None
    if origin is list and isinstance(part, int):
        return args[0]
    if origin is dict and isinstance(part, str):
        return args[1]
    return None
