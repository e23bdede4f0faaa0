"""Pod mutating webhook: the pods of a profile's quota tree get the profile's nodeSelector as
required node affinity at CREATE (``operators.logic.quota_tree_affinity``, as Koordinator's
``addNodeAffinityForMultiQuotaTree``).

The quota and the profile are read from the API server at admission, as Koordinator's webhook
reads them from its client. Every pod of the cluster passes through this webhook, so it never
refuses one: its failure policy is Ignore, and a quota or profile it cannot read admits the pod
unchanged (logged). Such a pod is still kept on its tree's nodes by koord-scheduler's
ElasticQuota PreFilter.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
from pydantic import ValidationError

from apis.core import Pod
from operators.clients import QuotaClient
from operators.handlers import errors
from operators.handlers.admission import plain
from operators.logic import quota_tree_affinity

__all__ = ["register"]

log = logging.getLogger(__name__)


class TreeAffinity:
    def __init__(self, quotas: QuotaClient) -> None:
        self._client = quotas

    async def mutate(self, body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
        try:
            pod = Pod.model_validate(plain(body))
        except ValidationError:
            return  # the API server's own validation answers for a malformed pod
        namespace, name = quota_tree_affinity.quota_lookup(pod)
        try:
            quota = await (
                self._client.find(name) if namespace is None else self._client.get(namespace, name)
            )
            tree = quota_tree_affinity.tree_id(quota)
            if not tree:
                return
            profiles = await self._client.profiles_of_tree(tree)
        except errors.API_ERRORS as exc:
            log.warning(
                "pod admitted without its quota tree's node affinity: reading quota %r: %s", name, exc
            )
            return
        selector = profiles[0].spec.node_selector if profiles and profiles[0].spec else None
        if selector is None:
            return
        required = quota_tree_affinity.with_tree_affinity(pod, selector)
        if required is not None:
            patch.spec["affinity"] = {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required.to_wire()}
            }


def register(registry: kopf.OperatorRegistry, quotas: QuotaClient) -> None:
    """The pod mutating webhook (CREATE; failures ignored, see the module docstring)."""
    mutate: Any = TreeAffinity(quotas).mutate
    kopf.on.mutate(
        "",
        "v1",
        "pods",
        id="quota-tree-affinity",
        operations=["CREATE"],
        ignore_failures=True,
        registry=registry,
    )(mutate)
