"""Reading a KubeSchedulerConfiguration: YAML (duplicate keys rejected), then the wire model, then
``scheduler.config.resolve``."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from apis.errors import InvalidValue
from apis.yamltext import BoundedLoader, load_yaml_documents
from scheduler.config.catalog import Implements, PluginCatalog
from scheduler.config.errors import ConfigError, pydantic_problems
from scheduler.config.models import API_GROUP, KubeSchedulerConfiguration
from scheduler.config.resolve import SchedulerConfig, resolve
from scheduler.framework.profile import ExtensionPoint, PluginRef

__all__ = ["load_config"]

log = logging.getLogger(__name__)

_V1BETA2_IGNORED = ("healthzBindAddress", "metricsBindAddress")


class _StrictLoader(BoundedLoader):
    """Rejects a key given twice in one mapping, as kube's strict decoder does (and, as every
    loader of a file a person writes, nesting and aliases past :mod:`apis.yamltext`'s bounds)."""


class _DuplicateField(yaml.YAMLError):
    pass


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise _DuplicateField(f"duplicate field {key!r} (line {key_node.start_mark.line + 1})")
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read(path_or_text: str | os.PathLike[str] | Mapping[str, Any]) -> tuple[Any, str]:
    if isinstance(path_or_text, Mapping):
        return dict(path_or_text), ""
    if isinstance(path_or_text, os.PathLike) or not (
        not path_or_text.strip() or "\n" in path_or_text or path_or_text.lstrip().startswith("{")
    ):
        path = Path(path_or_text)
        text, source = path.read_text(encoding="utf-8"), str(path)
    else:
        text, source = path_or_text, ""
    try:
        docs = load_yaml_documents(text, source or "configuration", _StrictLoader)
    except InvalidValue as exc:
        raise ConfigError([str(exc)], source) from None
    if len(docs) != 1:
        raise ConfigError([f"expected exactly one YAML document, found {len(docs)}"], source)
    return docs[0], source


def load_config(
    path_or_text: str | os.PathLike[str] | Mapping[str, Any],
    default_plugins: Mapping[ExtensionPoint, Sequence[PluginRef]],
    plugins: PluginCatalog | Implements,
) -> SchedulerConfig:
    """Read, validate and resolve a KubeSchedulerConfiguration.

    Args:
        path_or_text: a file path (``str`` without a newline, or ``PathLike``), YAML/JSON text, or an
            already-parsed mapping.
        default_plugins: the default plugin set per extension point, in order, with Score weights.
        plugins: the plugin registry: which plugins exist, the extension points each implements
            (to expand ``multiPoint`` and to check that an enabled plugin can run where it is
            enabled) and each one's args model (to check ``pluginConfig`` args). A bare
            ``implements(name)`` callable (KeyError if unknown) checks names but not args.

    Returns:
        The process settings and one ``ResolvedProfile`` per profile.

    Raises:
        ConfigError: listing every problem found, each prefixed with its field path.
        OSError: the file cannot be read.
    """
    raw, source = _read(path_or_text)
    if not isinstance(raw, dict):
        raise ConfigError([f"expected a mapping at the top level, got {type(raw).__name__}"], source)
    if raw.get("apiVersion") == f"{API_GROUP}/v1beta2":
        for key in _V1BETA2_IGNORED:
            if key in raw:
                log.warning("%s is ignored: koord-scheduler's HTTP address comes from its flags", key)
                raw.pop(key)
    try:
        cfg = KubeSchedulerConfiguration.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(pydantic_problems(exc, model=KubeSchedulerConfiguration), source) from None
    try:
        return resolve(cfg, default_plugins, plugins)
    except ConfigError as exc:
        raise ConfigError(exc.problems, source) from None
