"""How handlers turn failures into Kopf's outcomes, instead of logging them away.

- "Not yet" (the API server unreachable or overloaded, a namespace or object the handler needs not
  there yet, a write conflict): ``kopf.TemporaryError`` with a delay, so Kopf retries the handler
  (a timer: after the delay instead of its interval).
- "Never, as it stands" (an object that does not parse, a spec the rules reject, a write the API
  server refuses as invalid or forbidden): ``kopf.PermanentError`` naming the field or the missing
  permission, so the user knows what to change. Kopf logs it and, with ``settings.posting``, puts it
  on the object as a Warning event.

A timer meets the same permanent problem every interval until the object changes; ``raise_once``
raises it the first time only, so the object gets one event per distinct problem, not one per tick.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import aiohttp
import kopf
from kubernetes_asyncio import client
from pydantic import ValidationError

from apis.errors import summary

__all__ = [
    "API_ERRORS",
    "RETRY_DELAY_SECONDS",
    "admission_api_errors",
    "api_errors",
    "invalid_object",
    "raise_once",
]

RETRY_DELAY_SECONDS = 5.0
"""How long a handler waits before trying again when the API server cannot serve it yet, in seconds:
long enough not to hammer a restarting API server, short enough to catch up within a few intervals."""

# Statuses that say "try again later": not found (a namespace or object not created yet), conflict
# (someone wrote first), too many requests, and the server-side errors.
_TRANSIENT_STATUSES = frozenset({404, 409, 429, 500, 502, 503, 504})
_MEMO_KEY = "reported_problems"


def _api_message(exc: client.ApiException) -> str:
    """The Status message the API server sent, else its HTTP reason."""
    try:
        body = json.loads(exc.body) if exc.body else {}
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return str(message or exc.reason or "no reason given")


API_ERRORS = (client.ApiException, TimeoutError, aiohttp.ClientError, OSError)
"""What a call to the API server may raise."""


def _describe(exc: BaseException) -> tuple[bool, str]:
    """(whether it may pass by itself, what went wrong) for an exception of ``API_ERRORS``."""
    if isinstance(exc, client.ApiException):
        hint = " (koord-manager's ClusterRole lacks this permission)" if exc.status == 403 else ""
        return exc.status in _TRANSIENT_STATUSES, f"HTTP {exc.status}: {_api_message(exc)}{hint}"
    return True, f"the API server is unreachable ({exc!r})"


@contextmanager
def api_errors(action: str, *, delay: float = RETRY_DELAY_SECONDS) -> Iterator[None]:
    """Turn the API errors of the calls inside into Kopf's outcomes; ``action`` says what was tried
    ("create the tree root quota team/a")."""
    try:
        yield
    except API_ERRORS as exc:
        transient, reason = _describe(exc)
        if transient:
            raise kopf.TemporaryError(
                f"cannot {action} yet ({reason}); retrying in {delay:g}s", delay=delay
            ) from exc
        raise kopf.PermanentError(f"cannot {action}: {reason}") from exc


@contextmanager
def admission_api_errors(action: str) -> Iterator[None]:
    """The same for admission handlers, where nothing retries: the request is refused with the
    reason (503 when it may pass, so the client knows to try again)."""
    try:
        yield
    except API_ERRORS as exc:
        transient, reason = _describe(exc)
        retry = "; try again" if transient else ""
        raise kopf.AdmissionError(
            f"koord-manager cannot {action} to judge this request: {reason}{retry}",
            code=503 if transient else 500,
        ) from exc


def invalid_object(kind: str, exc: ValidationError) -> kopf.PermanentError:
    """The error for an object its model rejects, naming each bad field."""
    problems = summary(
        [f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()]
    )
    return kopf.PermanentError(f"{kind} is invalid: {problems}")


def raise_once(memo: MutableMapping[str, Any], key: str, error: kopf.PermanentError | None) -> None:
    """Raise ``error`` unless the same problem (by ``key`` and message) was raised for this object
    before; ``None`` clears the record, so a problem that comes back is reported again."""
    reported: dict[str, str] = memo.setdefault(_MEMO_KEY, {})
    if error is None:
        reported.pop(key, None)
        return
    if reported.get(key) == str(error):
        return
    reported[key] = str(error)
    raise error
