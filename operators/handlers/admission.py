"""Kopf validating-admission handlers: one per Koordinator kind, each delegating to logic.admission."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from apis.errors import echo
from apis.meta import KoordResource
from apis.registry import ADMISSION_RESOURCES
from operators.logic import admission

__all__ = ["plain", "register"]


def plain(value: Any) -> Any:
    """Kopf hands bodies over as mapping views; pydantic and the parsers want plain JSON values."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _validator(model: type[KoordResource]) -> Any:
    kind = model.crd.kind

    def validate(body: kopf.Body, warnings: list[str], **_: Any) -> None:
        result = admission.review(model, plain(body))
        warnings.extend(result.warnings)
        if not result.allowed:
            meta = body.get("metadata")
            name = meta.get("name", "") if isinstance(meta, Mapping) else ""
            raise kopf.AdmissionError(f"{kind} {echo(name)} is invalid: {result.message()}", code=422)

    validate.__name__ = f"validate_{model.crd.singular}"
    return validate


def register(registry: kopf.OperatorRegistry) -> None:
    """Register a validating webhook for every kind (CREATE and UPDATE of the main resource)."""
    for model in ADMISSION_RESOURCES:
        info = model.crd
        kopf.on.validate(
            info.group,
            info.version,
            info.plural,
            id=f"validate-{info.plural}",
            operations=["CREATE", "UPDATE"],
            registry=registry,
        )(_validator(model))
