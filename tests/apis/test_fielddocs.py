"""apis.fielddocs finds a field's docstring where pydantic's use_attribute_docstrings found it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from apis.base import KoordModel
from apis.fielddocs import field_docstrings


class _Plain(BaseModel):
    kept: int = 0
    """Not read: this class is not a KoordModel."""


class _Parent(KoordModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    inherited: int = 0
    """From the parent."""
    redefined: int = 0
    """The parent's."""
    undocumented_again: int = 0
    """Documented here only."""
    bare: int = 0


class _Child(_Parent, _Plain):
    redefined: int = 1
    """The child's:

        indented lines are cleaned."""
    undocumented_again: int = 1
    own: str = ""
    """The child's own."""

    def method(self) -> None:
        local: int = 0
        """A docstring in a function is no field's."""
        del local


def _pydantic_descriptions(cls: type[BaseModel]) -> dict[str, str]:
    return {name: f.description for name, f in cls.model_fields.items() if f.description is not None}


def test_docstrings_come_from_the_class_that_annotated_the_field_last() -> None:
    assert field_docstrings(_Child, KoordModel) == {
        "inherited": "From the parent.",
        "redefined": "The child's:\n\nindented lines are cleaned.",
        "own": "The child's own.",
    }


def test_same_as_pydantic_reads_them() -> None:
    assert field_docstrings(_Parent, KoordModel) == _pydantic_descriptions(_Parent)
    assert field_docstrings(_Child, KoordModel) == _pydantic_descriptions(_Child)


def test_only_subclasses_of_the_documented_base_give_docstrings() -> None:
    assert field_docstrings(_Plain, KoordModel) == {}
    assert field_docstrings(_Plain, BaseModel) == {"kept": "Not read: this class is not a KoordModel."}
