"""The import rules of the layout, read from the source with ast (nothing is imported):

1. layer: a module imports its own layer and lower ones only (LAYERS, low -> high); bench and diagnose, the two
   runs, never import each other (APART);
2. private: no module imports a private name (a ``_name`` module, or a ``_name`` in a module) of another package,
   by ``from roofline.x import _y``, ``import roofline.x._y`` or ``module._y`` on an imported module;
3. cli-private: a cli module never imports another cli module's private names;
4. heavy: torch, pandas, matplotlib, pyarrow and pynvml are imported when a module is imported only in the measuring
   code (HEAVY_OK); everywhere else inside the function that needs them, so ``roofline --help`` stays instant.

Every import statement counts for rules 1-3: at module level, inside a function, and under ``if TYPE_CHECKING:``.
Rule 4 is about what runs at import time, so it leaves out imports inside functions and under TYPE_CHECKING.
A package's ``roofline.x`` is the package ``roofline/x/`` (or the module ``roofline/x.py``); the root modules
(``roofline.units``...) are each a package of their own.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The layers, low -> high. An entry names a module ('roofline.units') or a package and everything in it
# ('roofline.specs.*'); the longest entry that matches a module decides its layer.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("roofline", "roofline.errors", "roofline.units", "roofline.dtypes", "roofline.properties",
              "roofline.fileio", "roofline.yamlio", "roofline.resources", "roofline.samples", "roofline.extras")),
    ("device", ("roofline.device",)),
    ("specs", ("roofline.specs.*",)),
    ("costs", ("roofline.costs.*",)),
    ("ironlaw", ("roofline.ironlaw",)),
    ("report", ("roofline.report.*",)),
    ("measure", ("roofline.measure.*",)),
    ("roofs", ("roofline.roofs",)),
    ("findings", ("roofline.findings.*",)),
    ("analysis", ("roofline.analysis", "roofline.predict")),
    ("runs", ("roofline.bench.*", "roofline.diagnose.*")),
    ("gate", ("roofline.gate.*",)),
    ("render", ("roofline.render.*",)),
    ("top", ("roofline.cli.*", "roofline.api", "roofline.pytest_plugin", "roofline.__main__")),
)  # fmt: skip

# Packages of one layer that never import each other.
APART: tuple[tuple[str, str], ...] = (("roofline.bench", "roofline.diagnose"),)

# Libraries too heavy (or optional: not in the base install) to import at start-up.
HEAVY = ("torch", "pandas", "matplotlib", "pyarrow", "pynvml")
# The measuring code: where a heavy library may be imported at module level.
HEAVY_OK: tuple[str, ...] = (
    "roofline.measure.*",
    "roofline.bench.runners",
    "roofline.diagnose.count",
    "roofline.diagnose.execute",
    "roofline.diagnose.loader",
    "roofline.diagnose.profile",
)

# Violations tolerated on purpose: none. A new entry needs a reason here and a plan to remove it.
ALLOWED: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, 'roofline.cli.gate'
    target: str  # the module imported, 'roofline.cli.bench' (or a library: 'torch.nn')
    names: tuple[str, ...]  # names taken from it: a from-import's, or a module._name read; () for a plain import
    at_start: bool  # runs when the module is imported: at module level, not in a function nor under TYPE_CHECKING
    line: int


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(module: str, root: Path = ROOT) -> bool:
    return (root / Path(*module.split(".")) / "__init__.py").is_file()


def exists(module: str, root: Path = ROOT) -> bool:
    path = root / Path(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, at_start: bool):
    """(import statement, whether it runs at import time) for every import under ``node``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, at_start
        deferred = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or _type_checking(child)
        yield from _walk(child, at_start and not deferred)


def _dotted(node: ast.AST) -> str | None:
    """'a.b.c' of an attribute chain on a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def imports_of(path: Path, root: Path = ROOT) -> list[Import]:
    """Every import in ``path``, and every ``module._name`` read through a name that an import bound to one of our
    modules (``from roofline.bench import run as bench_run; bench_run._helper()``)."""
    module = module_name(path, root)
    package = module if is_package(module, root) else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[Import] = []
    bound: dict[str, str] = {}  # local name -> the module of ours it names
    for node, at_start in _walk(tree, True):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append(Import(module, alias.name, (), at_start, node.lineno))
                if alias.name.startswith("roofline"):
                    bound[alias.asname or "roofline"] = alias.name if alias.asname else "roofline"
            continue
        if node.level:  # relative: from . import x, from ..a import b
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join([*base, node.module] if node.module else base)
        else:
            target = node.module or ""
        names = tuple(alias.name for alias in node.names)
        if target.startswith("roofline"):
            # `from roofline.a import b`: b is a module when roofline/a/b.py exists, else a name in roofline.a
            for alias in node.names:
                if exists(f"{target}.{alias.name}", root):
                    out.append(Import(module, f"{target}.{alias.name}", (), at_start, node.lineno))
                    bound[alias.asname or alias.name] = f"{target}.{alias.name}"
            names = tuple(n for n in names if not exists(f"{target}.{n}", root))
            if not names:
                continue
        out.append(Import(module, target, names, at_start, node.lineno))
    for node in ast.walk(tree):
        dotted = _dotted(node) if isinstance(node, ast.Attribute) else None
        if dotted is None or dotted.split(".")[0] not in bound:
            continue
        head, _, rest = dotted.partition(".")
        parts = [*bound[head].split("."), *rest.split(".")]
        for i in range(len(parts) - 1, 0, -1):  # the longest prefix that is a module; the next part is a name in it
            if exists(".".join(parts[:i]), root):
                if _private(parts[i]):
                    out.append(Import(module, ".".join(parts[:i]), (parts[i],), False, node.lineno))
                break
    return out


def all_imports(root: Path = ROOT) -> list[Import]:
    return [imp for path in sorted((root / "roofline").rglob("*.py")) for imp in imports_of(path, root)]


def _matches(module: str, pattern: str) -> bool:
    if pattern.endswith(".*"):
        prefix = pattern[:-2]
        return module == prefix or module.startswith(prefix + ".")
    return module == pattern


def layer_of(module: str) -> int:
    best: tuple[int, int] | None = None  # (length of the entry, layer)
    for rank, (_, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            if _matches(module, pattern) and (best is None or len(pattern) > best[0]):
                best = (len(pattern), rank)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/test_import_rules.py")
    return best[1]


def package_of(module: str) -> str:
    """'roofline.cli.gate' -> 'roofline.cli'; a root module ('roofline.units') is a package of its own."""
    return ".".join(module.split(".")[:2])


def violations(imports: list[Import]) -> list[str]:
    """Every broken rule as 'module -> imported (rule: why)', sorted, each once."""
    found: set[str] = set()
    for imp in imports:
        if imp.target != "roofline" and not imp.target.startswith("roofline."):
            heavy = imp.target.split(".")[0] in HEAVY
            if heavy and imp.at_start and not any(_matches(imp.module, p) for p in HEAVY_OK):
                found.add(f"{imp.module} -> {imp.target} (heavy: imported at module level)")
            continue
        mine, theirs = layer_of(imp.module), layer_of(imp.target)
        if theirs > mine:
            found.add(f"{imp.module} -> {imp.target} (layer: {LAYERS[mine][0]} imports {LAYERS[theirs][0]})")
        for a, b in (*APART, *((b, a) for a, b in APART)):
            if _matches(imp.module, a + ".*") and _matches(imp.target, b + ".*"):
                found.add(f"{imp.module} -> {imp.target} (apart: {a} imports {b})")
        privates = [n for n in imp.names if _private(n)]
        if package_of(imp.module) != package_of(imp.target):
            for part in imp.target.split("."):
                if _private(part):
                    found.add(f"{imp.module} -> {imp.target} (private: module {part} of another package)")
            for name in privates:
                found.add(f"{imp.module} -> {imp.target}.{name} (private: another package's name)")
        elif package_of(imp.module) == "roofline.cli" and imp.target != imp.module:
            for name in privates:
                found.add(f"{imp.module} -> {imp.target}.{name} (cli-private: another command's name)")
    return sorted(found)


# ------------------------------------------------------------------------------------------------ the rules


def test_every_module_has_a_layer():
    for path in (ROOT / "roofline").rglob("*.py"):
        layer_of(module_name(path))


def test_import_rules():
    broken = [v for v in violations(all_imports()) if v not in ALLOWED]
    assert not broken, "import rules broken (see tests/test_import_rules.py):\n" + "\n".join(broken)


def test_allowed_lists_only_live_violations():
    stale = sorted(ALLOWED - set(violations(all_imports())))
    assert not stale, "ALLOWED lists violations that are gone: remove them\n" + "\n".join(stale)


# ------------------------------------------------------------------------------------ the checker itself


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_checker_finds_each_kind_of_violation(tmp_path):
    root = _tree(
        tmp_path,
        {
            "roofline/__init__.py": "",
            "roofline/units.py": "def _helper(): ...\n",
            "roofline/device.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from roofline.specs import schema\n"
            ),
            "roofline/specs/__init__.py": "",
            "roofline/specs/schema.py": "",
            "roofline/specs/_private.py": "",
            "roofline/costs/__init__.py": "",
            "roofline/costs/base.py": (
                "import torch\n"
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    import pandas\n"
                "def f():\n    import matplotlib\n    from roofline.report import schema\n"
                "from roofline.units import _helper\n"
                "from roofline.specs import _private\n"
                "from . import base as me\n"
            ),
            "roofline/report/__init__.py": "",
            "roofline/report/schema.py": "",
            "roofline/measure/__init__.py": "",
            "roofline/measure/engine.py": "import torch\n",
            "roofline/bench/__init__.py": "",
            "roofline/bench/run.py": "def _nvml_index(): ...\n",
            "roofline/diagnose/__init__.py": "",
            "roofline/diagnose/pipeline.py": "from roofline.bench import run as bench_run\nbench_run._nvml_index()\n",
            "roofline/cli/__init__.py": "",
            "roofline/cli/bench.py": "def _progress(): ...\n",
            "roofline/cli/gate.py": "from roofline.cli.bench import _progress\nfrom .bench import main\n",
        },
    )
    assert violations(all_imports(root)) == [
        "roofline.cli.gate -> roofline.cli.bench._progress (cli-private: another command's name)",
        "roofline.costs.base -> roofline.report.schema (layer: costs imports report)",
        "roofline.costs.base -> roofline.specs._private (private: module _private of another package)",
        "roofline.costs.base -> roofline.units._helper (private: another package's name)",
        "roofline.costs.base -> torch (heavy: imported at module level)",
        "roofline.device -> roofline.specs.schema (layer: device imports specs)",
        "roofline.diagnose.pipeline -> roofline.bench.run (apart: roofline.diagnose imports roofline.bench)",
        "roofline.diagnose.pipeline -> roofline.bench.run._nvml_index (private: another package's name)",
    ]
