"""The package's import layers (docs/architecture.md): imports only go downwards, nothing imports the
package root, and no module is bigger than a room should be.

Every ``import`` and ``from ... import`` in ``tileworkbench/`` counts, also those inside functions
(a lazy import is still an arrow between two rooms).
"""

from __future__ import annotations

import ast
import collections
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "tileworkbench"

# Lowest first. A unit (a top-level module or subpackage of tileworkbench) may import units of
# lower layers only; the package root (__init__.py, the public API) may import any.
LAYERS = [
    ["version", "errors", "tilelang_names", "math"],
    ["not_here"],
    ["dtypes", "target", "trace", "mime"],
    ["ir"],
    ["frontend"],
    ["language", "passes", "layout"],
    ["examples", "codegen", "analysis", "cuda", "carver", "contrib", "engine"],
    ["backend", "interpreter"],
    ["jit"],
    ["report", "autotuner", "testing", "utils", "transform"],
    ["profiler"],
    ["bench"],
    ["notebook"],
    ["cli", "as_tilelang"],
    ["demo"],
]
LAYER_OF = {unit: i for i, units in enumerate(LAYERS) for unit in units}
ROOT = "<package root>"
# Programs written as a user writes them: they import the public API (``import tileworkbench as
# tilelang``), so they stand outside the layers, above all of them; no module imports them (the
# bench loads them by path, the tests by name).
USER_PROGRAMS = "tileworkbench.examples.tilelang_programs."
MAX_FILE_LINES = 600
MAX_CLASS_LINES = 250


def unit_of(module: str) -> str:
    parts = module.split(".")
    return ROOT if len(parts) == 1 else parts[1]


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        package = name[: -len(".__init__")] if name.endswith(".__init__") else name.rsplit(".", 1)[0]
        yield path, name.removesuffix(".__init__"), package


def imports() -> list[tuple[str, str, str]]:
    """(importing unit, imported unit, 'file:line') for every import between two units."""
    out = []
    for path, name, package in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if node.module:
                    targets = [target]
                else:  # from . import x: x is a module of that package
                    targets = [f"{target}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            if name.startswith(USER_PROGRAMS):
                continue
            for target in targets:
                if target.startswith(USER_PROGRAMS):
                    out.append(("<any>", "<user programs>", f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"))
                elif target == "tileworkbench" or target.startswith("tileworkbench."):
                    a, b = unit_of(name), unit_of(target)
                    if a != b:
                        out.append((a, b, f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"))
    return out


def test_every_unit_has_a_layer():
    units = {unit_of(name) for _, name, _ in modules()} - {ROOT}
    units -= {"labextension", "runtime"}  # data: the built extension, our CUDA headers
    assert units - set(LAYER_OF) == set(), "add new units to LAYERS and to docs/architecture.md"


def test_imports_only_go_downwards():
    upward = [f"{where}: {a} imports {b}" for a, b, where in imports()
              if a != ROOT and (b == ROOT or LAYER_OF.get(b, -1) >= LAYER_OF.get(a, -1))]
    assert upward == []


def test_nothing_imports_the_user_programs():
    assert [where for a, b, where in imports() if b == "<user programs>"] == []


def test_nothing_imports_the_package_root():
    assert [where for a, b, where in imports() if b == ROOT] == []


def test_the_unit_graph_has_no_circle():
    graph = collections.defaultdict(set)
    for a, b, _ in imports():
        graph[a].add(b)
    seen, on_path = set(), []

    def visit(u):
        assert u not in on_path, f"import circle: {' -> '.join(on_path[on_path.index(u):] + [u])}"
        if u in seen:
            return
        on_path.append(u)
        for v in sorted(graph[u]):
            visit(v)
        on_path.pop()
        seen.add(u)

    for u in sorted(graph):
        visit(u)


def test_no_room_is_too_big():
    big_files, big_classes = [], []
    for path, name, _ in modules():
        text = path.read_text()
        if len(text.splitlines()) > MAX_FILE_LINES:
            big_files.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                big_classes.append(f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert big_files == [] and big_classes == []


def test_the_scan_sees_module_level_and_lazy_imports():
    found = {(a, b, where.split(":")[0]) for a, b, where in imports()}
    assert ("jit", "passes", "tileworkbench/jit/lower.py") in found  # at the top of the module
    assert ("jit", "backend", "tileworkbench/jit/lower.py") in found  # inside _start_device_compile
    assert any(a == ROOT for a, _, _ in found)  # the public API gathers the units
