"""Pod mutating webhook: ClusterColocationProfiles applied to new pods at CREATE
(``operators.logic.colocation_profile``, as Koordinator's ``clusterColocationProfileMutatingPod``).

Kopf indexes every ClusterColocationProfile and every namespace's labels (one watch each); a
namespace the index has not seen yet (created a moment before its first pod) is read from the API
server, and so is each PriorityClass a profile that applies names. A pod no profile applies to gets
no patch at all.

What a user can run into:

- a profile naming a PriorityClass that does not exist refuses the pod, naming both (the pod would
  otherwise run with a priority the profile did not mean), as does a ``patch`` that does not fit the
  pod, or a PriorityClass koord-manager cannot read;
- the failure policy is Ignore, as in Koordinator's chart (``webhookConfiguration.failurePolicy.pods``):
  while koord-manager is down, pods are created unmutated;
- a profile whose selector cannot be evaluated matches no pod, and gets a Warning event (the
  validating webhook refuses such a profile, so only one created while koord-manager was down can
  have it);
- the indexes trail the API server by one watch event: a pod created the same moment as its profile
  may be admitted before the profile is seen. Every replica serves admission, but only the peering
  leader's indexes follow the watch: a standby replica judges from what it saw before it was paused.
"""

from __future__ import annotations

import copy
import functools
import logging
import random
from collections.abc import Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from apis.config.clustercolocationprofile import ClusterColocationProfile
from apis.core import PriorityClass
from apis.errors import summary
from operators.clients import ColocationClient
from operators.handlers import errors
from operators.handlers.admission import plain
from operators.logic import colocation_profile, strategic_merge

__all__ = ["NamespaceIndex", "ProfileIndex", "register"]

log = logging.getLogger(__name__)

ProfileIndex = kopf.Index[str, ClusterColocationProfile]
NamespaceIndex = kopf.Index[str, dict[str, str]]
_CCP = ClusterColocationProfile.crd


def colocation_profiles(name: str, body: kopf.Body, **_: Any) -> dict[str, ClusterColocationProfile]:
    """Index: profile name -> the profile (a body its model rejects is left out, with an event)."""
    try:
        profile = ClusterColocationProfile.model_validate(plain(body))
    except ValidationError as exc:
        kopf.warn(body, reason="InvalidProfile", message=str(errors.invalid_object(_CCP.kind, exc)))
        return {}
    problems = colocation_profile.validate(profile)
    if problems:
        message = f"matches no pod until fixed: {summary(problems)}"
        log.warning("ClusterColocationProfile %s %s", name, message)
        kopf.warn(body, reason="InvalidProfile", message=message)
    return {name: profile}


def colocation_namespaces(name: str, body: kopf.Body, **_: Any) -> dict[str, dict[str, str]]:
    """Index: namespace name -> its labels."""
    return {name: dict(body.get("metadata", {}).get("labels") or {})}


def _replace(mutated: dict[str, Any], body: dict[str, Any]) -> None:
    """Kopf diffs the body after its patch functions into the JSON patch of the response."""
    body.clear()
    body.update(copy.deepcopy(mutated))


class ColocationProfileWebhook:
    def __init__(self, client: ColocationClient, dice: colocation_profile.Dice) -> None:
        self._client = client
        self._dice = dice

    async def _namespace_labels(self, namespace: str | None, index: NamespaceIndex) -> dict[str, str] | None:
        if not namespace:
            return None
        store = index.get(namespace)
        if store:
            return next(iter(store))
        try:
            return await self._client.namespace_labels(namespace)
        except errors.API_ERRORS as exc:
            log.warning("namespace %s unreadable (%s): namespaceSelectors match nothing", namespace, exc)
            return None

    async def _priority_classes(self, names: set[str]) -> dict[str, PriorityClass]:
        found: dict[str, PriorityClass] = {}
        for name in sorted(names):
            with errors.admission_api_errors(f"read the PriorityClass {name!r}"):
                klass = await self._client.priority_class(name)
            if klass is not None:
                found[name] = klass
        return found

    async def mutate(
        self,
        body: kopf.Body,
        patch: kopf.Patch,
        colocation_profiles: ProfileIndex,
        colocation_namespaces: NamespaceIndex,
        **_: Any,
    ) -> None:
        profiles = [profile for store in colocation_profiles.values() for profile in store]
        if not profiles:
            return
        pod: dict[str, Any] = plain(body)
        meta: Mapping[str, Any] = pod.get("metadata") or {}
        needs_namespace = any(p.spec and p.spec.namespace_selector for p in profiles)
        namespace_labels: dict[str, str] | None = {}
        if needs_namespace:
            namespace_labels = await self._namespace_labels(meta.get("namespace"), colocation_namespaces)
        matched = colocation_profile.matching(profiles, meta.get("labels") or {}, namespace_labels)
        applied = colocation_profile.rolled(matched, self._dice)
        if not applied:
            return
        names = {p.spec.priority_class_name for p in applied if p.spec and p.spec.priority_class_name}
        classes = await self._priority_classes(names)
        try:
            mutated = colocation_profile.mutate(pod, applied, classes)
        except (colocation_profile.MissingPriorityClass, strategic_merge.PatchError) as exc:
            raise kopf.AdmissionError(str(exc), code=400) from None
        log.info(
            "pod %s/%s: ClusterColocationProfiles %s applied",
            meta.get("namespace"),
            meta.get("name") or meta.get("generateName"),
            ", ".join(p.metadata.name or "" for p in applied),
        )
        if mutated != pod:
            patch.fns.append(functools.partial(_replace, mutated))


def register(
    registry: kopf.OperatorRegistry, client: ColocationClient, dice: colocation_profile.Dice | None = None
) -> None:
    """Index profiles and namespaces; the pod mutating webhook (CREATE; failures ignored)."""
    kopf.index(_CCP.group, _CCP.version, _CCP.plural, id="colocation_profiles", registry=registry)(
        colocation_profiles
    )
    kopf.index("", "v1", "namespaces", id="colocation_namespaces", registry=registry)(colocation_namespaces)
    roll = dice or functools.partial(random.Random().randrange, 100)
    mutate: Any = ColocationProfileWebhook(client, roll).mutate  # Kopf's protocol lists no index kwargs
    kopf.on.mutate(
        "",
        "v1",
        "pods",
        id="colocation-profile",
        operations=["CREATE"],
        ignore_failures=True,
        registry=registry,
    )(mutate)
