"""The import rules of the layout, read from the source with ast (nothing is imported):

1. layer: a module imports its own layer and lower ones only (LAYERS, low -> high); bench and diagnose, the two
   runs, never import each other (APART);
2. cycle: the import graph of the modules has no cycle, not even inside one package;
3. private: no module imports a private name of another module (``from roofline.x import _y``, or ``module._y`` read
   on a module an import bound), nor a private module of another package (``import roofline.x._y``);
4. pure: report, findings, render and gate (PURE) never import torch: not at module level, not inside a function,
   not for type hints;
5. heavy: torch, pandas, matplotlib, pyarrow and pynvml are imported when a module is imported only in the measuring
   code (HEAVY_OK); everywhere else inside the function that needs them, so ``roofline --help`` stays instant.

What counts as an import, for rules 1-4: every import statement (at module level, inside a function or a class,
under ``if TYPE_CHECKING:``), and every call of ``importlib.import_module``, ``import_module`` or ``__import__``
with a literal name. A call whose name is not a literal is a violation of its own (dynamic): the checker cannot
see what it imports. Rule 5 is about what runs at import time, so it leaves out imports inside functions and under
TYPE_CHECKING. A package's ``roofline.x`` is the package ``roofline/x/`` (or the module ``roofline/x.py``); the
root modules (``roofline.units``...) are each a package of their own. An edge of the graph goes from a module to
the module it imports (``from roofline.a import b``: to ``roofline.a.b`` when that is a module, else to
``roofline.a``); importing ``roofline.a.b`` does not count as importing the package ``roofline.a`` itself.

Only roofline/ is checked. Tests are not: a test may import a module's private helper to test it, and tests sit
above every layer.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The layers, low -> high. An entry names a module ('roofline.units') or a package and everything in it
# ('roofline.specs.*'); an entry that names the module itself beats a package entry, else the longest package
# entry that matches decides its layer.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("roofline.version", "roofline.errors", "roofline.units", "roofline.dtypes", "roofline.properties",
              "roofline.fileio", "roofline.yamlio", "roofline.resources", "roofline.samples", "roofline.extras",
              "roofline.pyproject")),
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
    ("top", ("roofline.cli.*", "roofline.api", "roofline.training", "roofline.pytest_plugin", "roofline.__main__",
             "roofline", "roofline.diagnose")),  # the two facades: the package's lazy names, the callable package
)  # fmt: skip

# Packages of one layer that never import each other.
APART: tuple[tuple[str, str], ...] = (("roofline.bench", "roofline.diagnose"),)

# The pure layers: plain values in, plain values out; they never import torch.
PURE: tuple[str, ...] = ("roofline.report.*", "roofline.findings.*", "roofline.render.*", "roofline.gate.*")

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

# Violations tolerated on purpose: none. A new entry needs a reason here and a plan to remove it (a violation in a
# file another branch is rewriting: "pending merge", removed when that branch lands).
ALLOWED: frozenset[str] = frozenset()

DYNAMIC = "<dynamic>"  # the target of an import_module/__import__ call whose name is not a literal


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, 'roofline.cli.gate'
    target: str  # the module imported, 'roofline.cli.bench' (or a library: 'torch.nn'; DYNAMIC)
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


def owning_module(target: str, root: Path = ROOT) -> str | None:
    """The longest prefix of ``target`` that is one of our modules ('roofline.a.b.name' -> 'roofline.a.b')."""
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        if exists(".".join(parts[:i]), root):
            return ".".join(parts[:i])
    return None


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_call(node: ast.AST) -> bool:
    """``importlib.import_module(...)``, ``import_module(...)`` (whatever object holds it) or ``__import__(...)``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name in ("import_module", "__import__")


def _walk(node: ast.AST, at_start: bool) -> Iterator[tuple[ast.AST, bool]]:
    """(import statement or import call, whether it runs at import time) for every import at any depth under
    ``node``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)) or _import_call(child):
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


def _relative(package: str, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` in ``package``."""
    base = package.split(".")
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _called_name(call: ast.Call, package: str) -> str:
    """The module an import call imports: its literal first argument (a leading dot: relative to the module's own
    package), else DYNAMIC."""
    arg = call.args[0] if call.args else None
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        return DYNAMIC
    name = arg.value
    level = len(name) - len(name.lstrip("."))
    return _relative(package, level, name[level:] or None) if level else name


def imports_of(path: Path, root: Path = ROOT) -> list[Import]:
    """Every import in ``path`` (statements and import calls, at any depth), and every ``module._name`` read
    through a name that an import bound to one of our modules (``from roofline.bench import run as bench_run;
    bench_run._helper()``) or on an import call (``import_module('roofline.x')._helper``)."""
    module = module_name(path, root)
    package = module if is_package(module, root) else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[Import] = []
    bound: dict[str, str] = {}  # local name -> the module of ours it names
    for node, at_start in _walk(tree, True):
        if isinstance(node, ast.Call):
            out.append(Import(module, _called_name(node, package), (), at_start, node.lineno))
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append(Import(module, alias.name, (), at_start, node.lineno))
                if alias.name.startswith("roofline"):
                    bound[alias.asname or "roofline"] = alias.name if alias.asname else "roofline"
            continue
        assert isinstance(node, ast.ImportFrom)
        target = _relative(package, node.level, node.module) if node.level else node.module or ""
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
        if not isinstance(node, ast.Attribute):
            continue
        if _import_call(node.value) and _private(node.attr):
            called = _called_name(node.value, package)  # type: ignore[arg-type]
            if called.startswith("roofline"):
                out.append(Import(module, called, (node.attr,), False, node.lineno))
            continue
        dotted = _dotted(node)
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
    best: tuple[bool, int, int] | None = None  # (the entry names the module itself, length of the entry, layer)
    for rank, (_, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            key = (pattern == module, len(pattern), rank)
            if _matches(module, pattern) and (best is None or key[:2] > best[:2]):
                best = key
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/test_import_rules.py")
    return best[2]


def package_of(module: str) -> str:
    """'roofline.cli.gate' -> 'roofline.cli'; a root module ('roofline.units') is a package of its own."""
    return ".".join(module.split(".")[:2])


def ours(target: str) -> bool:
    return target == "roofline" or target.startswith("roofline.")


def graph(imports: list[Import], root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the modules of ours it imports (itself left out)."""
    edges: dict[str, set[str]] = {}
    for imp in imports:
        edges.setdefault(imp.module, set())
        target = owning_module(imp.target, root) if ours(imp.target) else None
        if target is not None and target != imp.module:
            edges[imp.module].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module: the shortest cycle through the
    component's first module (by name), as [a, b, ..., a]."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan; the graph is small enough for recursion
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    found: list[list[str]] = []
    for component in sorted(components):
        start, inside = component[0], set(component)
        came_from: dict[str, str] = {}
        frontier = [start]
        while frontier and start not in came_from:  # breadth first, back to start
            nxt_frontier: list[str] = []
            for node in frontier:
                for nxt in sorted(edges.get(node, ())):
                    if nxt in inside and nxt not in came_from:
                        came_from[nxt] = node
                        nxt_frontier.append(nxt)
            frontier = nxt_frontier
        path = [start]
        while path[-1] != start or len(path) == 1:
            path.append(came_from[path[-1]])
        found.append(list(reversed(path)))
    return found


def violations(imports: list[Import], root: Path = ROOT) -> list[str]:
    """Every broken rule as 'module -> imported (rule: why)', sorted, each once."""
    found: set[str] = set()
    for imp in imports:
        if imp.target == DYNAMIC:
            found.add(f"{imp.module} -> {DYNAMIC} (dynamic: an import call whose name is not a literal)")
            continue
        if not ours(imp.target):
            library = imp.target.split(".")[0]
            if library in HEAVY and imp.at_start and not any(_matches(imp.module, p) for p in HEAVY_OK):
                found.add(f"{imp.module} -> {imp.target} (heavy: imported at module level)")
            if library == "torch" and any(_matches(imp.module, p) for p in PURE):
                found.add(f"{imp.module} -> {imp.target} (pure: a pure layer imports torch)")
            continue
        mine, theirs = layer_of(imp.module), layer_of(imp.target)
        if theirs > mine:
            found.add(f"{imp.module} -> {imp.target} (layer: {LAYERS[mine][0]} imports {LAYERS[theirs][0]})")
        for a, b in (*APART, *((b, a) for a, b in APART)):
            if _matches(imp.module, a + ".*") and _matches(imp.target, b + ".*"):
                found.add(f"{imp.module} -> {imp.target} (apart: {a} imports {b})")
        if package_of(imp.module) != package_of(imp.target):
            for part in imp.target.split("."):
                if _private(part):
                    found.add(f"{imp.module} -> {imp.target} (private: module {part} of another package)")
        if imp.target != imp.module:
            for name in imp.names:
                if _private(name):
                    found.add(f"{imp.module} -> {imp.target}.{name} (private: another module's name)")
    for cycle in cycles(graph(imports, root)):
        found.add(f"{' -> '.join(cycle)} (cycle)")
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
            # a cycle of function-level imports inside one package, and a private name of a sibling module
            "roofline/costs/llm.py": "def load():\n    from roofline.costs.hfconfig import read\n",
            "roofline/costs/hfconfig.py": "def read():\n    from roofline.costs.llm import _config\n",
            # imports through importlib and __import__, with literal names or not
            "roofline/costs/gemm.py": (
                "import importlib\n"
                "def f(name):\n"
                "    importlib.import_module('roofline.render.chart')\n"
                "    __import__('roofline.measure')\n"
                "    importlib.import_module(name)\n"
                "    return importlib.import_module('roofline.costs.base')._table\n"
            ),
            "roofline/report/__init__.py": "",
            "roofline/report/schema.py": "",
            # torch in a pure layer: in a function, under TYPE_CHECKING
            "roofline/report/machine.py": "def describe():\n    import torch.cuda\n",
            "roofline/gate/__init__.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from torch import Tensor\n"
            ),
            "roofline/measure/__init__.py": "",
            "roofline/measure/engine.py": "import torch\n",
            "roofline/render/__init__.py": "",
            "roofline/render/chart.py": "",
            "roofline/bench/__init__.py": "",
            "roofline/bench/run.py": "def _nvml_index(): ...\n",
            # the package's __init__ is a facade of the top layer (an entry naming it beats roofline.diagnose.*)
            "roofline/diagnose/__init__.py": "def __call__():\n    from roofline.api import diagnose\n",
            "roofline/diagnose/pipeline.py": "from roofline.bench import run as bench_run\nbench_run._nvml_index()\n",
            "roofline/api.py": "def diagnose(): ...\n",
            "roofline/cli/__init__.py": "",
            "roofline/cli/bench.py": "def _progress(): ...\n",
            "roofline/cli/gate.py": "from roofline.cli.bench import _progress\nfrom .bench import main\n",
        },
    )
    assert layer_of("roofline.diagnose") == layer_of("roofline.api")
    assert layer_of("roofline.diagnose.pipeline") < layer_of("roofline.api")
    assert violations(all_imports(root), root) == [
        "roofline.cli.gate -> roofline.cli.bench._progress (private: another module's name)",
        "roofline.costs.base -> roofline.report.schema (layer: costs imports report)",
        "roofline.costs.base -> roofline.specs._private (private: module _private of another package)",
        "roofline.costs.base -> roofline.units._helper (private: another module's name)",
        "roofline.costs.base -> torch (heavy: imported at module level)",
        "roofline.costs.gemm -> <dynamic> (dynamic: an import call whose name is not a literal)",
        "roofline.costs.gemm -> roofline.costs.base._table (private: another module's name)",
        "roofline.costs.gemm -> roofline.measure (layer: costs imports measure)",
        "roofline.costs.gemm -> roofline.render.chart (layer: costs imports render)",
        "roofline.costs.hfconfig -> roofline.costs.llm -> roofline.costs.hfconfig (cycle)",
        "roofline.costs.hfconfig -> roofline.costs.llm._config (private: another module's name)",
        "roofline.device -> roofline.specs.schema (layer: device imports specs)",
        "roofline.diagnose.pipeline -> roofline.bench.run (apart: roofline.diagnose imports roofline.bench)",
        "roofline.diagnose.pipeline -> roofline.bench.run._nvml_index (private: another module's name)",
        "roofline.gate -> torch (pure: a pure layer imports torch)",
        "roofline.report.machine -> torch.cuda (pure: a pure layer imports torch)",
    ]


def test_a_cycle_is_found_however_long_and_named_once(tmp_path):
    """a -> b -> c -> a through a module-level, a function-level and a TYPE_CHECKING import; d imports the cycle
    without being in it."""
    root = _tree(
        tmp_path,
        {
            "roofline/__init__.py": "",
            "roofline/report/__init__.py": "",
            "roofline/report/a.py": "from roofline.report import b\n",
            "roofline/report/b.py": "def f():\n    from roofline.report.c import thing\n",
            "roofline/report/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
            "roofline/report/d.py": "import roofline.report.a\nfrom roofline.report import c\n",
        },
    )
    assert violations(all_imports(root), root) == [
        "roofline.report.a -> roofline.report.b -> roofline.report.c -> roofline.report.a (cycle)"
    ]
    assert cycles({"x": {"y"}, "y": {"x", "z"}, "z": set()}) == [["x", "y", "x"]]
    assert cycles({"x": {"y"}, "y": {"z"}, "z": set()}) == []
