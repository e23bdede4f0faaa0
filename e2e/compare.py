"""Compare what a user applied with what the API server returns."""

from __future__ import annotations

from typing import Any

from apis.quantity import Quantity

__all__ = ["differences"]


def differences(applied: Any, actual: Any, path: str = "") -> list[str]:
    """Where ``actual`` does not contain ``applied`` unchanged.

    Fields the server adds (defaults, uid, status written by controllers) are allowed; every
    applied field must come back with the same value. Quantities compare by value because the
    API server canonicalizes built-in resources (``cpu: 3`` comes back as ``"3"``).
    """
    if isinstance(applied, dict):
        if not isinstance(actual, dict):
            return [f"{path or '.'}: expected an object, got {actual!r}"]
        out: list[str] = []
        for key, value in applied.items():
            sub = f"{path}.{key}"
            if key not in actual:
                out.append(f"{sub}: dropped by the server")
            else:
                out.extend(differences(value, actual[key], sub))
        return out
    if isinstance(applied, list):
        if not isinstance(actual, list) or len(actual) != len(applied):
            return [f"{path}: expected {applied!r}, got {actual!r}"]
        return [
            d
            for i, (a, b) in enumerate(zip(applied, actual, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    if applied == actual or _same_quantity(applied, actual):
        return []
    return [f"{path}: applied {applied!r}, got back {actual!r}"]


def _same_quantity(a: Any, b: Any) -> bool:
    if (
        isinstance(a, bool)
        or isinstance(b, bool)
        or not isinstance(a, int | str)
        or not isinstance(b, int | str)
    ):
        return False
    try:
        return Quantity.parse(a) == Quantity.parse(b)
    except ValueError:
        return False
