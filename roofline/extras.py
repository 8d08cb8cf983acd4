"""Dependencies by use: which extra of ``pip install 'roofline[EXTRA]'`` brings which optional module.

The base install (typer, rich, pydantic, pyyaml; tomli before Python 3.11) runs ``specs``, ``analyze``,
``report --format markdown`` and ``gate`` on existing reports. The rest needs an extra (pyproject.toml):

    measure   torch, nvidia-ml-py (pynvml)   calibrate, bench, diagnose, gate when it measures
    plot      matplotlib                     plot, report --format html, analyze --plot
    data      pandas, pyarrow                report --format parquet (``parquet``: an alias; CSV needs neither)
    hf        transformers (and measure)     diagnose --hf (a Hugging Face model built from its config)
    fast      orjson                         large reports read faster (roofline.yamlio; never required)
    all       every extra above

These modules are imported lazily, where they are used; the CLI turns roofline's own failed import of one of
them into one line naming the extra (:func:`missing_extra`, used by ``roofline.cli.main``).
"""

from __future__ import annotations

import os
from types import TracebackType

EXTRAS: dict[str, str] = {
    "torch": "measure",
    "pynvml": "measure",  # from the nvidia-ml-py distribution
    "matplotlib": "plot",
    "pandas": "data",
    "pyarrow": "data",
    "transformers": "hf",
}

_PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))


def install_hint(extra: str) -> str:
    """``pip install 'roofline[measure]'``."""
    return f"pip install 'roofline[{extra}]'"


def missing_extra(exc: ModuleNotFoundError) -> tuple[str, str] | None:
    """(module, extra) when ``exc`` is roofline's own import of an optional module that is not installed.

    None for anything else: another module, a submodule of an installed package (``torch.utils.x``: an old or
    broken install, whose traceback says more), or an import made outside roofline (the user's model file or a
    third-party package), so that its traceback is shown."""
    extra = EXTRAS.get(exc.name or "")
    if extra is None or not _raised_by_roofline(exc.__traceback__):
        return None
    return str(exc.name), extra


def _raised_by_roofline(tb: TracebackType | None) -> bool:
    """Whether the innermost frame that is not importlib's machinery is a module of this package."""
    filenames = []
    while tb is not None:
        filenames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    while filenames and _is_importlib(filenames[-1]):
        filenames.pop()
    if not filenames:
        return False
    try:
        path = os.path.realpath(filenames[-1])
    except (OSError, ValueError):
        return False
    return path.startswith(_PACKAGE_DIR + os.sep)


def _is_importlib(filename: str) -> bool:
    name = filename.replace("\\", "/")
    return name.startswith("<frozen importlib") or name.endswith("/importlib/__init__.py")


__all__ = ["EXTRAS", "install_hint", "missing_extra"]
