"""kubernetes_asyncio's package namespaces filled on first use, not at import.

Importing any part of kubernetes_asyncio runs its package ``__init__``, which imports every
generated API class and model (about 900 modules), and ``ApiClient``'s module imports the models
package too. What this repository's Kubernetes access uses of it is the ``Configuration``, the
``ApiClient``'s session and authentication, and the kubeconfig and in-cluster loaders: a small
part, and a fifth of koord-scheduler's imports went to the rest.

``defer_generated_namespaces`` puts the three namespace packages (``kubernetes_asyncio``, its
``client`` and ``client.models``) in ``sys.modules`` unexecuted, each a module whose missing
attribute runs the package's real ``__init__`` once, in that module, and is then read. A name one of
the small submodules defines (``ApiClient``, ``Configuration``, ``ApiException``, ...) or a
submodule's own name is imported alone instead. Every name reads as the same object as with the
eager package: only when the generated modules are imported changes (the descheduler's and
koordlet's typed API calls import them at their first use).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any, Final

__all__ = ["defer_generated_namespaces"]

_ROOT: Final = "kubernetes_asyncio"
_PACKAGES: Final = (_ROOT, f"{_ROOT}.client", f"{_ROOT}.client.models")
_LIGHT: Final = {
    f"{_ROOT}.client": {
        "ApiClient": "api_client",
        "Configuration": "configuration",
        "ApiException": "exceptions",
        "ApiValueError": "exceptions",
        "ApiTypeError": "exceptions",
        "ApiKeyError": "exceptions",
        "ApiAttributeError": "exceptions",
        "OpenApiException": "exceptions",
    },
}
"""Names a package ``__init__`` re-exports from one of its small submodules."""


class _DeferredPackage(types.ModuleType):
    """A package whose ``__init__`` runs when a name it would define is first read."""

    def __getattr__(self, name: str) -> Any:
        light = _LIGHT.get(self.__name__, {}).get(name)
        if light is not None:
            return getattr(importlib.import_module(f"{self.__name__}.{light}"), name)
        if not name.startswith("__") and importlib.util.find_spec(f"{self.__name__}.{name}") is not None:
            return importlib.import_module(f"{self.__name__}.{name}")  # sets it on this package
        module: types.ModuleType = self
        module.__class__ = types.ModuleType  # from here on a plain module: its real namespace
        spec = self.__spec__
        assert spec is not None
        assert spec.loader is not None
        spec.loader.exec_module(self)
        return getattr(self, name)  # AttributeError as the eager package's when it has none


def defer_generated_namespaces() -> None:
    """Defer the packages' ``__init__`` (module docstring), unless kubernetes_asyncio was imported
    already (then it is whole, and stays so)."""
    if _ROOT in sys.modules:
        return
    parent: types.ModuleType | None = None
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return  # not installed: the first import says so
        module = importlib.util.module_from_spec(spec)
        module.__class__ = _DeferredPackage
        sys.modules[name] = module
        if parent is not None:
            setattr(parent, name.rsplit(".", 1)[1], module)
        parent = module
