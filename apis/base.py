"""The base model every Koordinator API object derives from.

Python code uses snake_case attribute names; the wire (YAML, JSON, the API server) uses
Koordinator's camelCase JSON names. The alias generator covers the regular cases; fields whose
JSON name is not the camelCase of the Python name (``moduleID``, ``busID``, ``cpuQOS`` ...) carry an
explicit ``Field(alias=...)``.

Conventions that ``apis.crdgen`` relies on:

- an optional field defaults to ``None`` unless Koordinator's CRD schema itself defaults it, in
  which case the Python default equals the schema default and is emitted into the CRD;
- a field without a default is required in the CRD schema;
- a field's docstring becomes its ``description`` (``kubectl explain`` shows it).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["CRDInfo", "KoordModel", "PrinterColumn"]


class KoordModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown wire fields are ignored as Go does."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
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


class CRDInfo(BaseModel):
    """What a root API type needs besides its schema to render its CustomResourceDefinition."""

    model_config = ConfigDict(frozen=True)

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    scope: str  # "Namespaced" | "Cluster"
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ("koordinator",)
    status_subresource: bool = False
    printer_columns: tuple[PrinterColumn, ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"
