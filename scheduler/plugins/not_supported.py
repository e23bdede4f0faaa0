"""Koordinator plugin arguments that koord-scheduler knows but does not implement yet.

A user copying Koordinator's YAML deserves to hear that a setting is known but unsupported,
rather than have it silently accepted (it would do nothing) or called unknown (a typo it is not).
An args model keeps such a field with Koordinator's default and checks it with ``only_default``:
the default, which describes what koord-scheduler does anyway, is accepted; any other value is
an error that says so.
"""

from __future__ import annotations

import json
from typing import TypeVar

__all__ = ["NOT_SUPPORTED_YET", "only_default"]

NOT_SUPPORTED_YET = "not supported yet by koord-scheduler"

T = TypeVar("T")


def only_default(value: T, default: T, why: str) -> T:
    """``value`` if it equals Koordinator's ``default``, else a ValueError naming both and ``why``."""
    if value != default:
        raise ValueError(
            f"{NOT_SUPPORTED_YET}: only {json.dumps(default)} (Koordinator's default) is accepted; {why}"
        )
    return value
