"""A call through kubernetes-asyncio's typed APIs whose one expected refusal is an answer, not an
error: 404 on a read or a delete (there is none), 409 on a create (there is one already)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from kubernetes_asyncio import client

__all__ = ["unless_status", "went_through"]

_T = TypeVar("_T")


async def unless_status(status: int, call: Awaitable[_T]) -> _T | None:
    """What ``call`` returns, or None when the API server answers ``status`` (404: no such object)."""
    try:
        return await call
    except client.ApiException as exc:
        if exc.status == status:
            return None
        raise


async def went_through(call: Awaitable[Any], unless: int) -> bool:
    """True when ``call`` went through, False when the API server answered ``unless`` (409: the
    object exists already; 404: there was none to delete)."""
    try:
        await call
    except client.ApiException as exc:
        if exc.status == unless:
            return False
        raise
    return True
