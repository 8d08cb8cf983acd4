"""`roofline diagnose`: trace a PyTorch model, count, time, place on the roofline and diagnose.

The package is callable: ``roofline.diagnose(model, inputs, ...)`` is the in-process API (roofline.api.diagnose).
NB: ``roofline.diagnose`` names this package as soon as any of its modules is imported, so the call has to live
on the package itself; it reaches the facade by name (importlib), as roofline/__init__.py's lazy names do, so
this layer imports nothing of the top one.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """roofline.api.diagnose(model, inputs, ...): see its docstring."""
        return importlib.import_module("roofline.api").diagnose(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
