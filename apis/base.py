"""The base model every Koordinator API object derives from.

Python code uses snake_case attribute names; the wire (YAML, JSON, the API server) uses
Koordinator's camelCase JSON names. The alias generator covers the regular cases; fields whose
JSON name is not the camelCase of the Python name (``moduleID``, ``busID``, ``cpuQOS`` ...) carry an
explicit ``Field(alias=...)``.

Conventions that ``apis.crdgen`` relies on:

- an optional field defaults to ``None`` unless Koordinator's CRD schema itself defaults it, in
  which case the Python default equals the schema default and is emitted into the CRD;
- a field without a default is required in the CRD schema;
- a field's docstring becomes its ``description`` (``kubectl explain`` shows it): ``apis.crdgen``
  reads it from the source (``apis.fielddocs``), the models do not when they are imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic_core import CoreSchema

__all__ = ["CRDInfo", "KoordModel", "PrinterColumn", "ResourceInfo", "go_json_keys", "resource_info"]


class KoordModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown wire fields are ignored as Go does."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        validate_assignment=False,
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as the API server expects it: camelCase keys, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    @classmethod
    def from_wire(cls, data: Any) -> Any:
        return cls.model_validate(data)


class PrinterColumn(BaseModel):
    """One ``additionalPrinterColumns`` entry of a CRD version."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: str
    json_path: str
    description: str | None = None
    priority: int | None = None
    format: str | None = None


class ResourceInfo(BaseModel):
    """Where a kind is served: group (empty for core/v1), version, kind, plural and scope.

    Every root model carries one (``KoordResource.crd``, the core kinds' ``api``), so code that
    lists or watches a kind reads it from the model instead of spelling it again.
    """

    model_config = ConfigDict(frozen=True)

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    scope: str  # "Namespaced" | "Cluster"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def namespaced(self) -> bool:
        return self.scope == "Namespaced"


def resource_info(model: type[BaseModel]) -> ResourceInfo:
    """The ResourceInfo a root model declares: ``crd`` on a custom resource, ``api`` on a core kind."""
    info = getattr(model, "crd", None) or getattr(model, "api", None)
    if not isinstance(info, ResourceInfo):
        raise TypeError(f"{model.__name__} declares no ResourceInfo (a crd or api class attribute)")
    return info


class CRDInfo(ResourceInfo):
    """What a root API type needs besides its schema to render its CustomResourceDefinition."""

    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ("koordinator",)
    status_subresource: bool = False
    printer_columns: tuple[PrinterColumn, ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    extra_versions: tuple[str, ...] = ()
    """Further versions served with the same schema (clients of this package use ``version``)."""
    storage_version: str | None = None
    """The version etcd stores; ``version`` when unset."""

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"


# Go's encoding/json matches an object key to a struct field by its exact JSON name first, then
# case-insensitively (bytes.EqualFold). For the ASCII field names Koordinator uses, the only
# non-ASCII letters in those fold classes are the Kelvin sign (lower() gives "k") and the long s.
_GO_FOLD = str.maketrans({"\u017f": "s"})
_MAX_DEPTH = 64
"""Nesting followed when renaming keys; deeper values are left as written (pydantic still validates them)."""


def _fold(name: str) -> str:
    return name.translate(_GO_FOLD).lower()


_NAMES: dict[int, tuple[Mapping[str, Any], set[str], dict[str, str], dict[str, Any]]] = {}
"""``_field_names`` per model-fields schema (keyed by id; the schema is kept so the id stays its own)."""


def _field_names(fields: Mapping[str, Any]) -> tuple[set[str], dict[str, str], dict[str, Any]]:
    """Exact names (aliases and, with populate-by-name, Python names), fold -> alias, alias -> schema."""
    cached = _NAMES.get(id(fields))
    if cached is not None and cached[0] is fields:
        return cached[1], cached[2], cached[3]
    exact: set[str] = set()
    folded: dict[str, str] = {}
    schemas: dict[str, Any] = {}
    for name, field in fields.items():
        alias = field.get("validation_alias")
        wire = alias if isinstance(alias, str) else name
        exact.update((name, wire))
        folded.setdefault(_fold(wire), wire)
        schemas[wire] = schemas[name] = field["schema"]
    _NAMES[id(fields)] = (fields, exact, folded, schemas)
    return exact, folded, schemas


def go_json_keys(schema: CoreSchema, data: Any) -> Any:
    """``data`` (parsed JSON) with object keys renamed to the field names Go's decoder would match.

    ``{"GatherStrategy": [...]}`` becomes ``{"gatherStrategy": [...]}``; keys of maps (a
    ResourceList's resource names) are data and stay as written. When two keys land on one field the
    later wins, as it overwrites the earlier in Go. Returns ``data`` itself when nothing is renamed.

    Only annotation payloads are decoded this way (``apis.extension._annotation.parse_json``): the
    API server stores custom resources with their exact field names already.
    """
    return _walk(schema, data, {}, 0)


def _walk(schema: Any, data: Any, refs: dict[str, Any], depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return data
    kind = schema.get("type")
    if kind == "definitions":
        refs = {**refs, **{d["ref"]: d for d in schema["definitions"] if "ref" in d}}
        return _walk(schema["schema"], data, refs, depth)
    if kind == "definition-ref":
        target = refs.get(schema["schema_ref"])
        return data if target is None else _walk(target, data, refs, depth + 1)
    if kind == "model-fields":
        return _rename(schema["fields"], data, refs, depth)
    if kind in ("list", "set", "frozenset") and isinstance(data, list):
        items = schema.get("items_schema")
        return data if items is None else _each(items, data, refs, depth)
    if kind == "tuple" and isinstance(data, list):
        items = schema.get("items_schema", [])
        if len(items) == 1 and schema.get("variadic_item_index") == 0:
            return _each(items[0], data, refs, depth)
        return data
    if kind == "dict" and isinstance(data, dict):
        values = schema.get("values_schema")
        if values is None:
            return data
        out = {k: _walk(values, v, refs, depth + 1) for k, v in data.items()}
        return data if all(out[k] is data[k] for k in data) else out
    if kind in ("union", "tagged-union"):
        choices = schema["choices"]
        for choice in choices.values() if isinstance(choices, dict) else choices:
            renamed = _walk(choice[0] if isinstance(choice, tuple) else choice, data, refs, depth + 1)
            if renamed is not data:
                return renamed
        return data
    inner = schema.get("schema")
    if isinstance(inner, dict):  # model, nullable, default, function-*, ...
        return _walk(inner, data, refs, depth + 1)
    return data


def _each(items: Any, data: list[Any], refs: dict[str, Any], depth: int) -> Any:
    out = [_walk(items, v, refs, depth + 1) for v in data]
    return data if all(a is b for a, b in zip(out, data, strict=True)) else out


def _rename(fields: Mapping[str, Any], data: Any, refs: dict[str, Any], depth: int) -> Any:
    if not isinstance(data, dict):
        return data
    exact, folded, schemas = _field_names(fields)
    out: dict[str, Any] = {}
    changed = False
    for key, value in data.items():
        name = str(key)
        wire = name if name in exact else folded.get(_fold(name), name)
        field = schemas.get(wire)
        new = value if field is None else _walk(field, value, refs, depth + 1)
        changed = changed or wire != key or new is not value
        out.pop(wire, None)  # a later key for the same field replaces the earlier one, as in Go
        out[wire] = new
    return out if changed else data
