"""The import map in figures: module-level circles, imports that run up a layer, and imports hidden
inside functions.

    PYTHONPATH=src python scripts/import_map.py [--verbose]

The layers are the ones declared in pyproject.toml (the import-linter contract with id "layers"); a
layer that does not exist in this tree is skipped, so the script can measure an older tree against
today's contract. Imports under `if TYPE_CHECKING:` are left out, as the contracts leave them out.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path

import grimp

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "gpuwatch_tui"


def build_graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, exclude_type_checking_imports=True, cache_dir=None)


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    modules = sorted(m for m in graph.modules if m.startswith(PACKAGE + "."))
    edges = {m: sorted(x for x in graph.find_modules_directly_imported_by(m) if x.startswith(PACKAGE + "."))
             for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in modules:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def declared_layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c.get("id") == "layers")
    return [[name.strip().strip("()") for name in layer.replace(":", "|").split("|")] for layer in contract["layers"]]


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    """The index of the layer holding `module` (0 is the top), or None for a module no layer names."""
    for depth, names in enumerate(layers):
        if any(module == name or module.startswith(name + ".") for name in names):
            return depth
    return None


def up_arrows(graph: grimp.ImportGraph, layers: list[list[str]]) -> list[tuple[str, str, int]]:
    """(importer, imported, line) for each import of a module in a higher layer than the importer's."""
    found = []
    for importer in sorted(graph.modules):
        below = layer_of(importer, layers)
        if below is None:
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            above = layer_of(imported, layers)
            if above is not None and above < below:
                for detail in graph.get_import_details(importer=importer, imported=imported):
                    found.append((importer, imported, detail["line_number"]))
    return found


def _in_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def function_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, kind, name) for each import statement inside a function; kind is project, third-party or
    stdlib."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _in_type_checking(child):
                continue
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                if isinstance(child, ast.ImportFrom) and child.level:
                    name, kind = "." * child.level + (child.module or ""), "project"
                else:
                    name = child.module if isinstance(child, ast.ImportFrom) else child.names[0].name
                    top = name.split(".")[0]
                    kind = ("project" if top == PACKAGE else "stdlib" if top in sys.stdlib_module_names
                            else "third-party")
                found.append((child.lineno, kind, name))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="list each circle, up-arrow and hidden import")
    args = parser.parse_args(argv)
    graph = build_graph()
    groups = circles(graph)
    arrows = up_arrows(graph, declared_layers())
    source = ROOT / "src" / PACKAGE
    hidden = {path: function_imports(path) for path in sorted(source.rglob("*.py"))}
    in_probe = source / "probe"
    kinds = Counter(kind for path, found in hidden.items() if in_probe not in path.parents for _, kind, _ in found)
    probe_count = sum(len(found) for path, found in hidden.items() if in_probe in path.parents)
    print(f"modules: {sum(1 for m in graph.modules if m.startswith(PACKAGE))}")
    print(f"circles: {len(groups)}")
    if args.verbose:
        for group in groups:
            print("   ", " <-> ".join(m.removeprefix(PACKAGE + ".") for m in group))
    print(f"imports up a layer: {len(arrows)}")
    if args.verbose:
        for importer, imported, line in arrows:
            print(f"    {importer.removeprefix(PACKAGE + '.')}:{line} -> {imported.removeprefix(PACKAGE + '.')}")
    print(f"imports inside functions outside probe/: {sum(kinds.values())} "
          f"({kinds['project']} project, {kinds['third-party']} third-party, {kinds['stdlib']} stdlib); "
          f"in probe/ (shipped): {probe_count}")
    if args.verbose:
        for path, found in hidden.items():
            for line, kind, name in found:
                print(f"    {path.relative_to(source)}:{line}: {kind} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
