"""Shallow copies of our pydantic models with some fields replaced, as ``model_copy(update=...)``
makes them, for the few places that make one per pod (a bind's new pod version, a Scheduled
event): pydantic's generic copy costs about 2.5 times this."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["updated"]

M = TypeVar("M", bound=BaseModel)

_set = object.__setattr__


def updated(model: M, changes: dict[str, Any]) -> M:
    """``model.model_copy(update=changes)`` for fields the model has: a shallow copy with the same
    ``__dict__`` and fields set. Models keeping extra or private attributes (ours ignore extra
    fields and have none) take pydantic's own path."""
    if model.__pydantic_extra__ is not None or model.__pydantic_private__ is not None:
        return model.model_copy(update=changes)
    cls = type(model)
    copied = cls.__new__(cls)
    _set(copied, "__dict__", {**model.__dict__, **changes})
    _set(copied, "__pydantic_extra__", None)
    _set(copied, "__pydantic_fields_set__", model.__pydantic_fields_set__ | changes.keys())
    _set(copied, "__pydantic_private__", None)
    return copied
