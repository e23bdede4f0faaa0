"""ElasticQuotaProfile: one quota tree per profile (Koordinator's MultiQuotaTree, algorithms 4.8).

A timer on each profile, every ``ManagerConfig.resync_seconds``:

1. picks the tree id: that of an existing quota named ``spec.quotaName`` (tree ids are immutable
   at admission), else the profile's ``tree-id`` label, else FNV-64a of ``namespace/name`` as
   Koordinator; and stamps it on the profile;
2. creates or updates that tree root ElasticQuota in the profile's namespace from the node index
   (``operators.logic.quota_totals.profile_tree_root``), writing only when it changed.

A node added, removed, relabelled or resized shows in the tree's ``total-resource`` within one
interval. Deleting a profile leaves its quota (as Koordinator). A write the API server cannot
take yet is retried after a few seconds (``kopf.TemporaryError``); one it refuses (the quota
admission, RBAC) is reported once as a permanent error on the profile.
"""

from __future__ import annotations

from typing import Any

import kopf
from pydantic import ValidationError

from apis.extension import quota as keys
from apis.quota.elasticquotaprofile import ElasticQuotaProfile
from operators.clients import QuotaClient
from operators.config import ManagerConfig
from operators.handlers import errors, timers
from operators.handlers.elasticquota import NodeIndex, QuotaIndex
from operators.logic import quota_totals

__all__ = ["register"]


class ProfileTrees:
    def __init__(self, quotas: QuotaClient) -> None:
        self._client = quotas

    async def sync(
        self,
        body: kopf.Body,
        namespace: str,
        name: str,
        patch: kopf.Patch,
        memo: Any,
        logger: kopf.Logger,
        node_capacity: NodeIndex,
        elastic_quotas: QuotaIndex,
        **_: Any,
    ) -> None:
        try:
            profile = ElasticQuotaProfile.model_validate(dict(body))
        except ValidationError as exc:
            errors.raise_once(memo, "spec", errors.invalid_object("ElasticQuotaProfile", exc))
            return
        errors.raise_once(memo, "spec", None)
        if profile.spec is None:
            return
        quota_name = profile.spec.quota_name
        current = next(
            (q for q in elastic_quotas.get(quota_name, []) if q.metadata.namespace == namespace), None
        )
        if current is None:
            with errors.api_errors(f"read the tree root quota {namespace}/{quota_name}"):
                current = await self._client.get(namespace, quota_name)
        # A quota that exists already keeps its tree id (tree ids are immutable at admission).
        stamped = (profile.metadata.labels or {}).get(keys.LABEL_QUOTA_TREE_ID)
        existing = (current.metadata.labels or {}).get(keys.LABEL_QUOTA_TREE_ID) if current else None
        tree_id = existing or stamped or quota_totals.profile_tree_id(namespace, name)
        if stamped != tree_id:
            patch.metadata.labels[keys.LABEL_QUOTA_TREE_ID] = tree_id
        nodes = [node for store in node_capacity.values() for node in store]
        desired = quota_totals.profile_tree_root(profile, tree_id, nodes)
        try:
            if current is None:
                with errors.api_errors(f"create the tree root quota {namespace}/{quota_name}"):
                    await self._client.create(desired.new_quota(quota_name, namespace))
                logger.info(f"created the tree root quota {namespace}/{quota_name}")
            elif desired.differs_from(current):
                with errors.api_errors(f"update the tree root quota {namespace}/{quota_name}"):
                    await self._client.patch(namespace, quota_name, desired.merge_patch(current))
        except kopf.PermanentError as exc:  # e.g. the quota admission refuses the root: say it once
            errors.raise_once(memo, "write", exc)
            return
        errors.raise_once(memo, "write", None)


def register(registry: kopf.OperatorRegistry, config: ManagerConfig, quotas: QuotaClient) -> None:
    """Keep each profile's tree root quota (needs the indexes of ``elasticquota``)."""
    info = ElasticQuotaProfile.crd
    sync: Any = ProfileTrees(quotas).sync  # Kopf's TimerFn protocol does not list index kwargs
    timers.resync_timer(
        info.group,
        info.version,
        info.plural,
        id="elasticquotaprofile_tree_root",
        interval=config.resync_seconds,
        registry=registry,
    )(sync)
