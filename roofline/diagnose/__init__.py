"""`roofline diagnose`: trace a PyTorch model, count, time, place on the roofline and diagnose.

The package is callable: ``roofline.diagnose(model, inputs, ...)`` is the in-process API (roofline.api.diagnose).
NB: ``roofline.diagnose`` names this package as soon as any of its modules is imported, so the call has to live
on the package itself. That makes this module (the package's __init__ alone, not its modules) a facade of the top
layer, beside roofline/__init__.py (tests/test_import_rules.py's LAYERS): no module imports it by name, and it
imports roofline.api only when called.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """roofline.api.diagnose(model, inputs, ...): see its docstring."""
        from roofline.api import diagnose

        return diagnose(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
