"""ElasticQuota admission: the tree rules and the defaults, against an in-memory index of quotas.

Kopf indexes every ElasticQuota by name (one watch) and every node's allocatable; the admission
handlers read the quota index, the quota-total timers (``builtin_quotas``, ``elasticquotaprofile``)
the node index. The rules live in ``operators.logic.quota_tree`` and ``quota_defaults``.

The index trails the API server by one watch event. A parent written a moment ago (a parent and
its child in one ``kubectl apply``) may not be in it yet, so a parent the index lacks is read from
the API server before the child is judged. Siblings written within the same moment can still
escape the min-sum check, as in Koordinator, whose webhook also judges from an informer cache.

Every replica serves admission, but only the peering leader's indexes follow the watch: a
standby replica judges from what it saw before it was paused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from apis.core import Node
from apis.errors import echo, summary
from apis.extension import quota as keys
from apis.features import FeatureGates
from apis.scheduling.elasticquota import ElasticQuota
from operators.clients import PodClient, QuotaClient
from operators.handlers import errors
from operators.handlers.admission import plain
from operators.logic import quota_defaults, quota_tree
from operators.logic.quota_totals import NodeCapacity

__all__ = ["NodeIndex", "QuotaIndex", "indexed_quotas", "register"]

QuotaIndex = kopf.Index[str, ElasticQuota]
NodeIndex = kopf.Index[str, NodeCapacity]
_EQ = ElasticQuota.crd


def _quota(body: Mapping[str, Any] | None) -> ElasticQuota | None:
    """The model, or None for a body the schema webhook (``admission``) rejects anyway."""
    if body is None:
        return None
    try:
        return ElasticQuota.model_validate(plain(body))
    except ValidationError:
        return None


def elastic_quotas(name: str, body: kopf.Body, **_: Any) -> dict[str, ElasticQuota]:
    """Index: quota name -> the quota (one per name unless two namespaces reuse a name)."""
    quota = _quota(body)
    return {name: quota} if quota is not None else {}


def node_capacity(name: str, body: kopf.Body, **_: Any) -> dict[str, NodeCapacity]:
    """Index: node name -> its labels, allocatable and schedulability."""
    return {name: NodeCapacity.from_node(Node.model_validate(plain(body)))}


def indexed_quotas(index: QuotaIndex) -> list[ElasticQuota]:
    return [quota for store in index.values() for quota in store]


class QuotaAdmission:
    """The validating and mutating handlers, sharing a client for the index's blind spot, and a
    pod client for the rules about a quota's pods (read at admission, as Koordinator's webhook)."""

    def __init__(self, quotas: QuotaClient, pods: PodClient, features: FeatureGates | None = None) -> None:
        self._client = quotas
        self._pods = pods
        self._features = features or FeatureGates()

    async def _labelled_pods(self, name: str) -> list[str]:
        with errors.admission_api_errors(f"list the pods of quota {name!r}"):
            return await self._pods.labelled(keys.LABEL_QUOTA_NAME, name)

    async def _has_pods(self, quota: ElasticQuota) -> bool:
        """Koordinator's ``hasQuotaBoundedPods``: pods labelled with the quota, or in the namespace
        named like it, or in a namespace its ``namespaces`` annotation lists."""
        name = quota.metadata.name or ""
        if await self._labelled_pods(name):
            return True
        try:
            namespaces = keys.get_quota_namespaces(quota.metadata.annotations) or []
        except ValueError:
            namespaces = []  # a malformed annotation: the schema checks reject it
        with errors.admission_api_errors(f"list the pods of quota {name!r}"):
            for namespace in dict.fromkeys([name, *namespaces]):
                if await self._pods.any_in(namespace):
                    return True
        return False

    async def _known_quotas(self, candidate: ElasticQuota, index: QuotaIndex) -> list[ElasticQuota]:
        known = indexed_quotas(index)
        parent = keys.parent_quota_name(candidate.metadata.name or "", candidate.metadata.labels)
        if parent and parent != keys.ROOT_QUOTA_NAME and parent not in index:
            with errors.admission_api_errors(f"read the parent quota {parent!r}"):
                found = await self._client.find(parent)
            if found is not None:
                known.append(found)
        return known

    async def validate(
        self,
        body: kopf.Body,
        old: kopf.Body | None,
        operation: str,
        elastic_quotas: QuotaIndex,
        **_: Any,
    ) -> None:
        candidate = _quota(body)
        if candidate is None:
            return
        name = candidate.metadata.name or ""
        if operation == "DELETE":
            problems = quota_tree.validate_delete(candidate, indexed_quotas(elastic_quotas))
            if not problems and name not in quota_tree.BUILT_IN_QUOTAS:
                problems = quota_tree.validate_delete(
                    candidate, indexed_quotas(elastic_quotas), await self._labelled_pods(name)
                )
            if problems:
                raise kopf.AdmissionError(
                    f"ElasticQuota {echo(name)} cannot be deleted: {summary(problems)}", code=422
                )
            return
        known = await self._known_quotas(candidate, elastic_quotas)
        previous = _quota(old) if operation == "UPDATE" else None
        problems = quota_tree.validate(candidate, previous, known)
        if self._features.elastic_quota_guarantee_usage:
            problems += quota_tree.guarantee_for_min(candidate, known)
        if previous is not None and quota_tree.is_parent_with_pods(candidate, previous, has_pods=True):
            # the pods are only looked up when the quota is about to become a parent
            problems += quota_tree.is_parent_with_pods(candidate, previous, await self._has_pods(previous))
        if problems:
            raise kopf.AdmissionError(f"ElasticQuota {echo(name)} is invalid: {summary(problems)}", code=422)

    async def mutate(
        self,
        body: kopf.Body,
        old: kopf.Body | None,
        operation: str,
        patch: kopf.Patch,
        elastic_quotas: QuotaIndex,
        **_: Any,
    ) -> None:
        candidate = _quota(body)
        if candidate is None:
            return
        known = await self._known_quotas(candidate, elastic_quotas)
        changes = quota_defaults.defaults(candidate, _quota(old) if operation == "UPDATE" else None, known)
        for key, value in changes["labels"].items():
            patch.metadata.labels[key] = value
        for key, value in changes["annotations"].items():
            patch.metadata.annotations[key] = value


def register(
    registry: kopf.OperatorRegistry,
    quotas: QuotaClient,
    pods: PodClient,
    features: FeatureGates | None = None,
) -> None:
    """Index quotas and nodes; validate and default ElasticQuotas at admission."""
    kopf.index(_EQ.group, _EQ.version, _EQ.plural, id="elastic_quotas", registry=registry)(elastic_quotas)
    kopf.index("", "v1", "nodes", id="node_capacity", registry=registry)(node_capacity)
    admission = QuotaAdmission(quotas, pods, features)
    validate: Any = admission.validate  # Kopf's WebhookFn protocol does not list index kwargs
    mutate: Any = admission.mutate
    kopf.on.validate(
        _EQ.group,
        _EQ.version,
        _EQ.plural,
        id="validate-elasticquota-tree",
        operations=["CREATE", "UPDATE", "DELETE"],
        registry=registry,
    )(validate)
    kopf.on.mutate(
        _EQ.group,
        _EQ.version,
        _EQ.plural,
        id="default-elasticquotas",
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )(mutate)
