"""One key of ``slo-controller-config`` as a koord-manager controller holds it.

A key that is missing (or a ConfigMap that is gone) means the defaults; a key that does not parse
keeps the last good value in force and reports why, naming the key (Koordinator keeps the previous
config on a JSON error, algorithms.md 10.5). Each controller owns the keys it reads, as each of
Koordinator's controllers has its own ConfigMap event handler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import ValidationError

from apis.errors import MESSAGE_LIMIT

__all__ = ["KeyOutcome", "LastGoodKey"]

T = TypeVar("T")


@dataclass(frozen=True)
class KeyOutcome:
    changed: bool
    """The value in force differs from the one before."""
    error: str | None = None
    """Why the key was refused (the last good value stays); names the key."""


def echo_message(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "..."


class LastGoodKey(Generic[T]):
    """The value in force for ``key``: ``parse(text)``, or ``parse(None)`` for the defaults."""

    def __init__(
        self, key: str, parse: Callable[[str | None], T], *, defaults_on_first_error: bool = True
    ) -> None:
        self.key = key
        self._parse = parse
        self._defaults_on_first_error = defaults_on_first_error
        """A key refused before any good value: the defaults are in force (NodeSLO's keys), or
        nothing is (colocation: the nodes keep what a previous koord-manager wrote)."""
        self.value: T | None = None
        """None until a value is in force: controllers wait for it."""
        self.error: str | None = None

    @property
    def loaded(self) -> bool:
        return self.value is not None

    def apply(self, data: Mapping[str, str] | None) -> KeyOutcome:
        """Take the ConfigMap's ``data`` (None when the ConfigMap does not exist)."""
        text = (data or {}).get(self.key)
        try:
            value = self._parse(text if text and text.strip() else None)
        except (ValueError, ValidationError) as exc:
            # pydantic's ValidationError is a ValueError; both name the field that failed.
            self.error = f"{self.key}: {echo_message(exc)}"
            if self.value is None and self._defaults_on_first_error:
                self.value = self._parse(None)
                return KeyOutcome(changed=True, error=self.error)
            return KeyOutcome(changed=False, error=self.error)
        self.error = None
        changed = value != self.value
        self.value = value
        return KeyOutcome(changed=changed)
