"""The house's layer rule and shape (ARCHITECTURE.md), read from the code with ``ast``.

Every import counts: module-level, inside functions, ``importlib.import_module`` and the twins'
``compiled("module", ...)`` with a literal name, and the compiled twins' ``cimport`` lines;
only imports under ``if TYPE_CHECKING:`` are left out (they never run). Each test fails naming
the offending modules, so that a break is fixed where it is made.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "crawler"

# The package root's own helpers, which import nothing of the project: anyone may use them.
ROOT_MODULES = {"crawler", "crawler._version", "crawler._twins"}
# Each layer and the layers it may import (besides itself and the root helpers), bottom up.
# ARCHITECTURE.md draws the same picture: change both together.
MAY_IMPORT: dict[str, set[str]] = {
    "extract": set(),
    "urls": {"extract"},
    "config": set(),
    "http": {"config"},
    "state": {"urls", "extract", "config"},
    "output": {"http", "urls", "extract", "config"},
    "render": {"http", "urls", "extract", "config"},
    "core": {"render", "output", "state", "http", "urls", "extract", "config"},
    "check": {"core", "render", "output", "state", "http", "urls", "extract", "config"},
    "audit": {"check", "core", "render", "output", "state", "http", "urls", "extract", "config"},
    "cli": {
        "audit",
        "check",
        "core",
        "render",
        "output",
        "state",
        "http",
        "urls",
        "extract",
        "config",
    },
}
# One machine written twice by design (the pure-Python twin and the compiled one).
TWINS = {"crawler/extract/_machine.py", "crawler/extract/_extract_c.pyx"}
MAX_LINES = 600

_PYX_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+c?import[ \t]+\(?([\w, \t]+)|c?import[ \t]+([\w.]+))",
    re.M,
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyx")]):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def layer_of(module: str) -> str:
    """The layer a module belongs to: ``root`` or the name of its top package."""
    if module in ROOT_MODULES:
        return "root"
    if module == "crawler.__main__":  # `python -m crawler`: the commands' entry point
        return "cli"
    return module.split(".")[1]


def _absolute(module: str, path: Path, level: int, target: str) -> str:
    if level == 0:
        return target
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _known(name: str) -> str | None:
    """The project module ``name`` stands for (a module, or the module holding a name)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def imports_of(module: str) -> set[str]:
    """The project modules ``module`` imports at run time (see the module docstring)."""
    path = MODULES[module]
    text = path.read_text(encoding="utf-8")
    names: set[str] = set()
    if path.suffix == ".pyx":
        pxd = path.with_suffix(".pxd")  # its cimports are imports too
        if pxd.exists():
            text += "\n" + pxd.read_text(encoding="utf-8")
        for m in _PYX_IMPORT.finditer(text):
            if m.group(3):
                names.add(m.group(3))
                continue
            target = m.group(1)
            level = len(target) - len(target.lstrip("."))
            base = _absolute(module, path, level, target.lstrip("."))
            for alias in m.group(2).split(","):
                sub = f"{base}.{alias.split()[0]}" if alias.strip() else base
                names.add(sub if sub in MODULES else base)
    else:
        tree = ast.parse(text)
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                base = _absolute(module, path, node.level, node.module or "")
                for alias in node.names:  # a submodule by name, else a name of ``base``
                    sub = f"{base}.{alias.name}"
                    names.add(sub if sub in MODULES else base)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.Call) and node.args:
                func = ast.unparse(node.func)
                first = node.args[0]
                if func in ("compiled", "importlib.import_module") and isinstance(
                    first, ast.Constant
                ):
                    names.add(str(first.value))
    deps = {_known(n) for n in names if n == "crawler" or n.startswith("crawler.")}
    return {d for d in deps if d is not None and d != module}


GRAPH = {module: imports_of(module) for module in MODULES}


def _edges() -> Iterator[tuple[str, str]]:
    for module, deps in sorted(GRAPH.items()):
        for dep in sorted(deps):
            yield module, dep


def test_the_graph_is_read() -> None:
    """The reader finds what it must (a guard against a rule that can no longer fail)."""
    assert "crawler.core.engine" in GRAPH
    assert "crawler.http.client" in GRAPH["crawler.core.page"]
    assert "crawler.extract._intake_base_c" in GRAPH["crawler.urls._intake_c"]
    assert "crawler.urls._hash_c" in GRAPH["crawler.urls.seen"]  # compiled("...")
    assert all(layer_of(m) in MAY_IMPORT or layer_of(m) == "root" for m in MODULES)


def test_layers() -> None:
    """Each layer imports only the layers below it (``MAY_IMPORT``) and the root helpers."""
    breaks = []
    for module, dep in _edges():
        mine, theirs = layer_of(module), layer_of(dep)
        if theirs == mine or dep in ROOT_MODULES:
            continue
        if mine == "root" or theirs not in MAY_IMPORT[mine]:
            breaks.append(f"{module} ({mine}) imports {dep} ({theirs})")
    assert not breaks, "layer breaks:\n" + "\n".join(breaks)


def _cycles() -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    """No two modules import each other, directly or through others."""
    pairs = []
    for comp in _cycles():
        members = set(comp)
        pairs.append(", ".join(f"{a} -> {b}" for a in comp for b in sorted(GRAPH[a] & members)))
    assert not pairs, "import cycles:\n" + "\n".join(pairs)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module: str) -> None:
    """One job a module: at most MAX_LINES lines, but the extractor's two twins."""
    path = MODULES[module]
    rel = path.relative_to(ROOT).as_posix()
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if rel in TWINS:
        pytest.skip(f"{rel}: an extractor twin ({lines} lines)")
    assert lines <= MAX_LINES, f"{rel} has {lines} lines (at most {MAX_LINES})"


def test_every_package_says_its_job() -> None:
    """Each package's __init__ opens with a docstring naming what it may import."""
    missing = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if init.parent != PACKAGE and "import" not in doc:
            missing.append(init.relative_to(ROOT).as_posix())
    assert not missing, f"packages whose docstring does not say what they may import: {missing}"
