"""roofline: roofline analysis and GPU performance diagnosis."""

__version__ = "0.1.0"

# Notebook API, imported on first use so that `import roofline` (and the CLI's start-up) stays light.
_LAZY = {
    "load_report": "roofline.api",
    "points_frame": "roofline.api",
    "roofline_figure": "roofline.api",
    "chart_spec": "roofline.api",
    "profile": "roofline.api",
    "Diagnosis": "roofline.api",
    "ProfiledRun": "roofline.api",
    "diagnose": "roofline.diagnose",  # the package, callable: roofline.diagnose(model, inputs) (roofline.api.diagnose)
}


def __getattr__(name: str):  # PEP 562
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'roofline' has no attribute {name!r}")
    import importlib

    imported = importlib.import_module(module)
    value = imported if module == f"roofline.{name}" else getattr(imported, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
