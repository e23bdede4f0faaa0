"""The what-if request: the job's manifests (or a pending pod or gang by name) and the bounds.

A malformed request is refused with the field that is wrong (``RequestError``: HTTP 400/422)."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "MAX_MEMBERS",
    "MAX_OBJECTS",
    "MAX_REQUEST_BYTES",
    "MAX_TIME_LIMIT_SECONDS",
    "RequestError",
    "WhatIfRequest",
    "parse_request",
]

MAX_REQUEST_BYTES = 1024 * 1024
"""aiohttp's own default body limit."""
MAX_MEMBERS = 4096
"""The most pods a what-if's job may expand to."""
MAX_OBJECTS = MAX_MEMBERS + 16
"""A pod per member, and a few more (a PodGroup, Lists)."""
MAX_TIME_LIMIT_SECONDS = 10.0


class RequestError(ValueError):
    """A what-if request that cannot be answered as asked: ``field`` names what is wrong."""

    def __init__(self, field: str, message: str, *, status: int = 422) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.status = status


class WhatIfRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    objects: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_OBJECTS)
    """Manifests: Pods, a PodGroup, Deployments/ReplicaSets/StatefulSets/Jobs (their template
    expanded to ``replicas``/``parallelism`` pods), or Lists of them."""
    pod: str | None = None
    """A pending pod's name (its whole gang when it is a gang member)."""
    gang: str | None = None
    """A pending gang's name (``namespace/name`` or a name in ``namespace``)."""
    namespace: str = Field(default="default", min_length=1)
    scheduler_name: str | None = Field(default=None, alias="schedulerName")
    """The profile to ask (the pods' own schedulerName, else the first profile)."""
    time_limit_seconds: float = Field(default=2.0, gt=0, le=MAX_TIME_LIMIT_SECONDS, alias="timeLimitSeconds")
    """The whole what-if's budget; each solve gets at most the scheduler's own time limit."""
    suggest: bool = True
    """Search for the smallest change when the job does not fit now."""

    @model_validator(mode="after")
    def _one_subject(self) -> Self:
        given = [
            name
            for name, value in (("objects", self.objects), ("pod", self.pod), ("gang", self.gang))
            if value
        ]
        if len(given) != 1:
            raise ValueError(f"give exactly one of objects, pod, gang (got {', '.join(given) or 'none'})")
        return self


def parse_request(body: bytes) -> WhatIfRequest:
    """The request in ``body`` (JSON), or a ``RequestError`` naming the first wrong field."""
    if len(body) > MAX_REQUEST_BYTES:
        raise RequestError("body", f"larger than {MAX_REQUEST_BYTES} bytes", status=413)
    try:
        return WhatIfRequest.model_validate_json(body or b"{}")
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "body"
        raise RequestError(
            where, error["msg"], status=400 if error["type"] == "json_invalid" else 422
        ) from exc
