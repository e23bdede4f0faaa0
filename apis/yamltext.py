"""YAML files a person writes (``koordctl simulate`` load files, koordlet's devices and device
description files, the kubelet configuration, the descheduler configuration), read with bounded
work.

``yaml.safe_load`` alone is not: its composer recurses once per nesting level (10,000 levels of
``[`` raise RecursionError), its aliases are shared references that a model then walks once per
reference (nine aliases of nine aliases ... of a list: a "billion laughs" of work from a few
hundred bytes), and its syntax errors are ``yaml.YAMLError``, which callers that catch ValueError
for a bad file let through. :func:`load_yaml` raises :class:`InvalidValue` (a ValueError) for all
of them, with a bounded message:

- nesting deeper than :data:`MAX_DEPTH` levels is refused while it is read;
- a document whose values, each alias counted as many times as it is used, number more than
  :data:`MAX_NODES` is refused before anything walks them (counted once per distinct node);
- text that is no YAML, or that no UTF-8 can hold (a lone surrogate), is refused.
"""

from __future__ import annotations

from typing import Any

import yaml

from apis.errors import InvalidValue

__all__ = ["MAX_DEPTH", "MAX_NODES", "BoundedLoader", "load_yaml", "load_yaml_documents"]

MAX_DEPTH = 100
"""The deepest nesting of sequences and mappings read (configurations nest a dozen levels)."""

MAX_NODES = 1_000_000
"""The most values a document may hold, aliases expanded."""


class _TooDeep(Exception):
    pass


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses nesting deeper than :data:`MAX_DEPTH`; subclass it to add
    constructors (the scheduler configuration's duplicate-key check)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _TooDeep
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """How many values ``root`` holds with every alias expanded (each distinct node visited once,
    children before parents); stops counting past ``limit``."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        sizes[id(node)] = min(limit + 1, 1 + sum(sizes.get(id(child), 0) for child in children))
    return sizes[id(root)]


def load_yaml(text: str, source: str) -> Any:
    """The one YAML document of ``text`` (None when empty); ``source`` names it in errors."""
    docs = _load(text, source, BoundedLoader, single=True)
    return docs[0] if docs else None


def load_yaml_documents(text: str, source: str, loader: type[BoundedLoader] = BoundedLoader) -> list[Any]:
    """Every document of a ``---``-separated stream, empty ones left out; the alias-expanded size
    of all of them together is bounded by :data:`MAX_NODES`."""
    return [doc for doc in _load(text, source, loader, single=False) if doc is not None]


def _load(text: str, source: str, loader_type: type[BoundedLoader], *, single: bool) -> list[Any]:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidValue(f"{source}: not UTF-8 text ({exc.reason} at character {exc.start})") from None
    try:
        loader = loader_type(text)  # reads the first characters: a control character raises here
        try:
            if single:
                node = loader.get_single_node()
                nodes = [] if node is None else [node]
            else:
                nodes = []
                while loader.check_node():
                    node = loader.get_node()
                    if node is not None:
                        nodes.append(node)
            budget = MAX_NODES
            for node in nodes:
                budget -= _expanded_size(node, budget)
                if budget < 0:
                    raise InvalidValue(
                        f"{source}: more than {MAX_NODES} values once its aliases are expanded"
                    )
            return [loader.construct_document(node) for node in nodes]
        finally:
            loader.dispose()
    except _TooDeep:
        raise InvalidValue(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as exc:
        raise InvalidValue(f"{source}: not valid YAML: {exc}") from None
