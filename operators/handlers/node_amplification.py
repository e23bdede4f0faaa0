"""The Node mutating webhook (feature gate ``NodeMutatingWebhook``, off by default as in Koordinator):
UPDATEs of ``nodes/status`` get their cpu and memory allocatable amplified by the node's
``resource-amplification-ratio``, the un-amplified values kept in ``raw-allocatable``
(``operators.logic.node_amplification``).

Every kubelet status update passes through it, so it never refuses one: its failure policy is
Ignore, and what it cannot read (a malformed annotation or quantity) is left unamplified, with an
admission warning and a log line.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from apis.errors import echo
from operators.handlers.admission import plain
from operators.logic.node_amplification import amplify_status

__all__ = ["WEBHOOK_ID", "mutate", "register"]

WEBHOOK_ID = "node-resource-amplification"

log = logging.getLogger(__name__)


def mutate(body: kopf.Body, old: kopf.Body | None, patch: kopf.Patch, warnings: list[str], **_: Any) -> None:
    node = plain(body)
    before = plain(old) if old is not None else {}
    name = (node.get("metadata") or {}).get("name")
    try:
        mutation = amplify_status(
            (node.get("metadata") or {}).get("annotations"),
            (node.get("status") or {}).get("allocatable"),
            (before.get("status") or {}).get("allocatable"),
        )
    except Exception as exc:  # Kopf would answer allowed: false and refuse kubelet's status
        log.exception("node %s: allocatable not amplified", name)
        warnings.append(f"allocatable not amplified: {type(exc).__name__}: {echo(str(exc))}")
        return
    for key, value in mutation.annotations.items():
        patch.metadata.annotations[key] = value
    if mutation.allocatable:
        patch.status["allocatable"] = mutation.allocatable
    for warning in mutation.warnings:
        log.warning("node %s: %s", name, warning)
        warnings.append(warning)


def register(registry: kopf.OperatorRegistry) -> None:
    handler: Any = mutate
    kopf.on.mutate(
        "",
        "v1",
        "nodes",
        id=WEBHOOK_ID,
        operations=["UPDATE"],
        subresource="status",
        ignore_failures=True,
        registry=registry,
    )(handler)
