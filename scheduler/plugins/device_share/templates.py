"""GPU shared-resource templates (Koordinator v1.7): the vNPU shapes each NPU model can be cut into.

The ConfigMap named in the args' ``gpuSharedResourceTemplatesConfig`` (default
``koordinator-system/gpu-shared-resource-templates``) holds, under ``data.yaml``, the templates per
``<vendor>-<model>`` (the node's ``gpu-vendor`` and ``gpu-model``)::

    huawei-Ascend-910B3:
      vir05_1c_16g: {huawei.com/npu-core: "5", huawei.com/npu-cpu: "1", koordinator.sh/gpu-memory: 16Gi}

A shared request naming one of the ``matchedResources`` (default ``huawei.com/npu-core``) must equal
a template exactly (the same resource names and amounts per card). On a node whose model has
exactly one such template the allocation is tagged with its name (``gpuSharedResourceTemplate``);
a node whose model has none cannot hold the pod.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from pydantic import TypeAdapter, ValidationError

from apis.client.backend import ResourceType, WatchEvent
from apis.core import ConfigMap
from apis.errors import InvalidValue
from apis.extension._annotation import ResourceList
from apis.extension.device import RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY, RESOURCE_GPU_MEMORY_RATIO
from apis.resources import to_int_units
from apis.yamltext import load_yaml
from scheduler.plugins.device_share.args import GPUSharedResourceTemplatesConfig
from scheduler.plugins.device_share.request import GPURequest

__all__ = [
    "CONFIGMAPS",
    "DATA_KEY",
    "ERR_NO_MATCHED_TEMPLATE",
    "TemplateCache",
    "parse_templates",
    "per_card_resources",
    "template_key",
]

log = logging.getLogger(__name__)

CONFIGMAPS = ResourceType.of(ConfigMap)
DATA_KEY = "data.yaml"
ERR_NO_MATCHED_TEMPLATE = "no matched GPU shared resource template"

Templates = dict[str, dict[str, dict[str, int]]]
"""``<vendor>-<model>`` -> template name -> resource -> amount (integer units)."""

_WIRE: TypeAdapter[dict[str, dict[str, ResourceList]]] = TypeAdapter(dict[str, dict[str, ResourceList]])


def parse_templates(text: str) -> Templates:
    """``data.yaml`` of the templates ConfigMap; ValueError when it is not that shape."""
    raw = load_yaml(text, DATA_KEY) or {}  # InvalidValue (a ValueError) for text that is no YAML
    try:
        wire = _WIRE.validate_python(raw)
    except ValidationError as exc:
        raise InvalidValue(f"{DATA_KEY}: {exc}") from None
    return {
        key: {name: {r: to_int_units(r, q) for r, q in res.items()} for name, res in templates.items()}
        for key, templates in wire.items()
    }


class TemplateCache:
    """The templates of the configured ConfigMap, kept current by the ConfigMap informer."""

    def __init__(self, config: GPUSharedResourceTemplatesConfig) -> None:
        self.config = config
        self.templates: Templates = {}

    def on_event(self, event: WatchEvent[ConfigMap]) -> None:
        event.dispatch(self._replace, self._upsert, self._delete)

    def _ours(self, cm: ConfigMap) -> bool:
        meta = cm.metadata
        return meta.namespace == self.config.config_map_namespace and meta.name == self.config.config_map_name

    def _replace(self, cms: Sequence[ConfigMap]) -> None:
        self.templates = {}
        for cm in cms:
            self._upsert(cm)

    def _upsert(self, cm: ConfigMap) -> None:
        if not self._ours(cm):
            return
        try:
            self.templates = parse_templates((cm.data or {}).get(DATA_KEY, ""))
        except ValueError as exc:
            # Koordinator keeps the last good templates when an update does not parse.
            log.warning("ConfigMap %s/%s: %s", cm.metadata.namespace, cm.metadata.name, exc)

    def _delete(self, cm: ConfigMap) -> None:
        if self._ours(cm):
            self.templates = {}

    def enforced(self, asked: Sequence[tuple[str, int]], shared: bool) -> bool:
        """Whether a request must match a template: shared and naming a matched resource."""
        names = {name for name, _ in asked}
        return shared and bool(names & set(self.config.matched_resources))

    def matched(self, asked: Sequence[tuple[str, int]]) -> dict[str, list[str]]:
        """``<vendor>-<model>`` -> the names of its templates that equal the per-card request."""
        wanted: Mapping[str, int] = dict(asked)
        result: dict[str, list[str]] = {}
        for key, templates in self.templates.items():
            names = sorted(name for name, res in templates.items() if res == wanted)
            if names:
                result[key] = names
        return result


def per_card_resources(request: GPURequest) -> tuple[tuple[str, int], ...]:
    """The per-card request as Koordinator's requestsPerGPU names it (what a template must equal)."""
    if request.asked:
        return request.asked
    resources = {RESOURCE_GPU_CORE: request.core} if request.core else {}
    if request.ratio is not None:
        resources[RESOURCE_GPU_MEMORY_RATIO] = request.ratio
    elif request.memory is not None:
        resources[RESOURCE_GPU_MEMORY] = request.memory
    return tuple(sorted(resources.items()))


def template_key(vendor: str | None, model: str | None) -> str:
    return f"{vendor or ''}-{model or ''}"
