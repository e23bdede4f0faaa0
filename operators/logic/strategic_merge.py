"""A strategic merge patch on a Pod, as ``kubectl patch --type=strategic`` applies one: the subset
of apimachinery's ``strategicpatch`` that a ClusterColocationProfile's ``spec.patch`` needs.

Supported, with Kubernetes' semantics:

1. maps merge key by key, recursively; a ``null`` value deletes the key;
2. the Pod's keyed lists merge by their ``patchMergeKey`` (``POD_MERGE_KEYS``: containers and
   initContainers by ``name``, their ``env`` by ``name``, ``ports`` by ``containerPort``,
   ``volumeMounts`` by ``mountPath``, ``volumes`` by ``name``, and the others listed): an item
   whose key matches an existing item is merged into it, a new key is appended, and an item
   ``{"$patch": "delete", <key>: ...}`` removes the existing one;
3. ``finalizers`` (a list of strings with ``patchStrategy: merge``) gains the new strings;
4. ``{"$patch": "replace", ...}`` inside a map replaces the whole map with the rest of it;
5. every other list (tolerations, args, command, ...) is replaced, as Kubernetes replaces a
   list without a merge strategy.

Not supported, and refused by :func:`problems` (so a profile using them is rejected at
admission rather than half applied): ``$retainKeys``, ``$setElementOrder``,
``$deleteFromPrimitiveList`` and ``$patch`` values other than ``replace``/``delete``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["POD_MERGE_KEYS", "PatchError", "apply", "problems"]

POD_MERGE_KEYS: Mapping[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "volumes": "name",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "ownerReferences": "uid",
    "readinessGates": "conditionType",
}
"""A Pod's lists with ``patchStrategy: merge``, by field name, and their ``patchMergeKey``."""

_MERGED_PRIMITIVE_LISTS = frozenset({"finalizers"})
_DIRECTIVE = "$patch"
_UNSUPPORTED = ("$retainKeys", "$setElementOrder", "$deleteFromPrimitiveList")


class PatchError(ValueError):
    """A patch that cannot be applied to the object; the message names the path."""


def problems(patch: Mapping[str, Any], path: str = "spec.patch") -> list[str]:
    """What keeps ``patch`` from being applied by :func:`apply` (an empty list: none)."""
    found: list[str] = []
    for key, value in patch.items():
        here = f"{path}.{key}"
        if key.startswith(_UNSUPPORTED):
            found.append(f"{here}: the {key.split('/')[0]} directive is not supported")
        elif key == _DIRECTIVE and value not in ("replace", "delete"):
            found.append(f"{here}: must be 'replace' or 'delete' (got {value!r})")
        elif isinstance(value, Mapping):
            found.extend(problems(value, here))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, Mapping):
                    found.extend(problems(item, f"{here}[{i}]"))
    return found


def apply(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``target`` with ``patch`` applied (both left unchanged). Raises PatchError when the patch's
    shape does not fit the object (a map where the object has a list, a keyed item without its key)."""
    found = problems(patch)
    if found:
        raise PatchError("; ".join(found))
    return _merge_map(dict(copy.deepcopy(target)), patch, "")


def _merge_map(target: dict[str, Any], patch: Mapping[str, Any], path: str) -> dict[str, Any]:
    if patch.get(_DIRECTIVE) == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != _DIRECTIVE}
    for key, value in patch.items():
        if key == _DIRECTIVE:
            continue
        here = f"{path}.{key}" if path else key
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping):
            current = target.get(key)
            if current is not None and not isinstance(current, dict):
                found = type(current).__name__
                raise PatchError(f"{here}: the patch has an object where the pod has {found}")
            target[key] = _merge_map(dict(current or {}), value, here)
        elif isinstance(value, list) and key in POD_MERGE_KEYS:
            target[key] = _merge_keyed(target.get(key), value, POD_MERGE_KEYS[key], here)
        elif isinstance(value, list) and key in _MERGED_PRIMITIVE_LISTS:
            current_list = list(target.get(key) or [])
            target[key] = current_list + [v for v in value if v not in current_list]
        else:
            target[key] = copy.deepcopy(value)
    return target


def _merge_keyed(current: Any, items: list[Any], merge_key: str, path: str) -> list[Any]:
    if current is not None and not isinstance(current, list):
        raise PatchError(f"{path}: the patch has a list where the pod has {type(current).__name__}")
    merged: list[Any] = [copy.deepcopy(item) for item in current or []]
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or merge_key not in item:
            raise PatchError(f"{path}[{i}]: an item of this list needs its merge key {merge_key!r}")
        key = item[merge_key]
        same = (j for j, old in enumerate(merged) if isinstance(old, dict) and old.get(merge_key) == key)
        at = next(same, None)
        if item.get(_DIRECTIVE) == "delete":
            if at is not None:
                del merged[at]
        elif at is None:
            merged.append(_merge_map({}, item, f"{path}[{i}]"))
        else:
            merged[at] = _merge_map(merged[at], item, f"{path}[{i}]")
    return merged
