"""roofline: roofline analysis and GPU performance diagnosis.

The package itself is the notebook facade (the top layer, docs/architecture.md): its names are roofline.api's,
imported on first use so that `import roofline` (and the CLI's start-up) stays light. No module of the package
imports it; they read the version from roofline.version.
"""

from roofline.version import __version__ as __version__

# Notebook API, imported on first use (PEP 562).
_API = (
    "diagnose_hf",
    "load_report",
    "points_frame",
    "roofline_figure",
    "chart_spec",
    "profile",
    "Diagnosis",
    "ProfiledRun",
    "register_cost",
)
_LAZY = (*_API, "diagnose")  # diagnose: the package, callable: roofline.diagnose(model, inputs) (roofline.api.diagnose)


def __getattr__(name: str) -> object:  # PEP 562
    if name == "diagnose":
        import roofline.diagnose as value
    elif name in _API:
        import roofline.api as api

        value = getattr(api, name)
    else:
        raise AttributeError(f"module 'roofline' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
