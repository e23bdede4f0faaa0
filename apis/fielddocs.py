"""The docstrings written under model fields, read from the source when a schema is generated.

pydantic's ``use_attribute_docstrings`` reads them for every model as its class is created, which
cost a process that imports the models about a fifth of its start-up (on Python 3.11 each class
looks its module up in every loaded one); only ``apis.crdgen`` needs them, as the CRDs'
``description``. Here each module's source is parsed once and a field's docstring is found as
pydantic would have found it: the string statement right after the field's annotated assignment in
the body of the class that last annotated it.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import sys
from typing import Any

__all__ = ["field_docstrings"]


def field_docstrings(cls: type[Any], documented: type[Any]) -> dict[str, str]:
    """{field name: its docstring} for every annotated attribute of ``cls`` or a base that has one,
    each from the class that annotated it last (a redefinition without a docstring has none); only
    subclasses of ``documented`` (those whose models had ``use_attribute_docstrings``) give one."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        annotated = inspect.get_annotations(klass)
        if not annotated:
            continue
        own = _class_docstrings(klass.__module__, klass.__qualname__) if issubclass(klass, documented) else {}
        for name in annotated:
            if name in own:
                docs[name] = own[name]
            else:
                docs.pop(name, None)
    return docs


def _class_docstrings(module: str, qualname: str) -> dict[str, str]:
    return _module_docstrings(module).get(qualname, {})


@functools.cache
def _module_docstrings(module: str) -> dict[str, dict[str, str]]:
    """{class qualname: {attribute: docstring}} of every class in ``module``'s source."""
    try:
        source = inspect.getsource(sys.modules[module])
    except (KeyError, OSError, TypeError):
        return {}
    found: dict[str, dict[str, str]] = {}
    _collect(ast.parse(source).body, "", found)
    return found


def _collect(body: list[ast.stmt], prefix: str, found: dict[str, dict[str, str]]) -> None:
    for node in body:
        if isinstance(node, ast.ClassDef):
            qualname = f"{prefix}{node.name}"
            found[qualname] = _attribute_docstrings(node.body)
            _collect(node.body, f"{qualname}.", found)


def _attribute_docstrings(body: list[ast.stmt]) -> dict[str, str]:
    docs: dict[str, str] = {}
    for before, node in itertools.pairwise(body):
        if (
            isinstance(before, ast.AnnAssign)
            and isinstance(before.target, ast.Name)
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docs[before.target.id] = inspect.cleandoc(node.value.value)
    return docs
