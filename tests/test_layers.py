"""The package's layers hold: who may import numba and OpenZL, no cycles, nothing imported from above.

Read from the source with ``ast`` (function-level imports count too), so a lazy import
cannot hide a dependency.  The order, lowest first::

    base (errors, _env, _version, _typing, _deprecation, progress) < store < format < codec < kernels < reader < writer
    < integrations < top (cli, demo, synthetic, torchgeo, stac, rumimm)

``store`` (where a file's bytes live: local files, remote objects, atomic writes) needs only
``base``; within the reader, the executors get frame bytes only through ``Store.get_ranges``.
"""

from __future__ import annotations

import ast
import functools
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parent.parent / "rumimm"
LAYERS = ["base", "store", "format", "codec", "kernels", "reader", "writer", "integrations", "top"]
BASE = {"rumimm.errors", "rumimm._deprecation", "rumimm._env", "rumimm._version", "rumimm._typing", "rumimm.progress"}
TOP = {"rumimm", "rumimm.cli", "rumimm.demo", "rumimm.synthetic", "rumimm.__main__", "rumimm.torchgeo", "rumimm.stac"}
ONLY = {"numba": "kernels", "llvmlite": "kernels", "openzl": "codec", "geozl": "codec"}


def module_name(path: pathlib.Path) -> str:
    parts = ("rumimm", *path.relative_to(PKG).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(mod: str) -> str:
    if mod in BASE:
        return "base"
    if mod in TOP:
        return "top"
    return mod.split(".")[1]


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


@functools.cache
def _tree(mod: str) -> ast.Module:
    return ast.parse(MODULES[mod].read_text())  # once per module, for every test here


def imports(mod: str):
    """(imported module, names) for every import statement of ``mod``, absolute."""
    tree = _tree(mod)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{mod}: relative import (imports are absolute)"
            yield node.module, [a.name for a in node.names]


def internal_edges(mod: str):
    """Modules of rumimm that ``mod`` imports, with the names it takes from each."""
    for target, names in imports(mod):
        if target != "rumimm" and not target.startswith("rumimm."):
            continue
        if target in MODULES and target != "rumimm" and not names:
            yield target, names
            continue
        subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
        for s in subs:
            yield s, []
        rest = [n for n in names if f"{target}.{n}" not in MODULES]
        if rest:
            yield target, rest


def test_every_module_is_in_a_layer():
    for mod in MODULES:
        assert layer(mod) in LAYERS, mod


@pytest.mark.parametrize(("package", "home"), sorted(ONLY.items()))
def test_only_its_layer_imports_a_native_package(package, home):
    for mod in MODULES:
        for target, _ in imports(mod):
            if target == package or target.startswith(package + "."):
                assert layer(mod) == home, f"{mod} imports {target}; only {home}/ may"


def test_no_module_imports_from_a_layer_above_its_own():
    upward = [f"{mod} imports {target}" for mod in MODULES if layer(mod) != "top"
              for target, _ in internal_edges(mod) if LAYERS.index(layer(target)) > LAYERS.index(layer(mod))]
    assert not upward, upward


def test_no_private_name_crosses_modules():
    found = [f"{mod} imports {n} from {target}" for mod in MODULES for target, names in internal_edges(mod)
             for n in names if n.startswith("_") and n != "__version__"]
    assert not found, found


def test_integrations_use_only_the_public_names_of_lower_modules():
    found = [f"{mod} takes {n} from {target}" for mod in MODULES if layer(mod) == "integrations"
             for target, names in internal_edges(mod) if target != "rumimm" and layer(target) != "integrations"
             for n in names if n not in _all(target)]
    assert not found, found


def _all(mod: str) -> set[str]:
    tree = _tree(mod)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def test_the_import_graph_has_no_cycles():
    graph = {m: sorted({t for t, _ in internal_edges(m) if t in MODULES and t != "rumimm"}) for m in MODULES}
    state: dict[str, int] = {}

    def visit(m, path):
        state[m] = 1
        for t in graph[m]:
            if state.get(t) == 1:
                cycle = [*path[path.index(t):], t]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t, [*path, t])
        state[m] = 2

    for m in graph:
        if m not in state and layer(m) != "top":
            visit(m, [m])



def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Local names bound to rumimm modules: ``import rumimm.a.b as c``, ``from rumimm.a import b``."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in MODULES:
                    aliases[a.asname] = a.name  # a plain ``import rumimm.a.b`` binds ``rumimm``, added below
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rumimm"):
            for a in node.names:
                if f"{node.module}.{a.name}" in MODULES:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def private_uses(mod: str, tree: ast.Module) -> list[str]:
    """Every ``other_module._name`` in ``mod``: another rumimm module's underscore name, used through the module."""
    aliases = _module_aliases(tree)
    aliases.setdefault("rumimm", "rumimm")
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        owner = _dotted(node.value)
        if owner is None:
            continue
        head, _, rest = owner.partition(".")
        if head not in aliases:
            continue
        target = f"{aliases[head]}.{rest}" if rest else aliases[head]
        if target in MODULES and target != mod:
            found.append(f"{mod} uses {target}.{node.attr}")
    return found


def test_private_uses_sees_a_module_attribute_through_any_import_form():
    src = """
import rumimm.reader.cache
import rumimm.reader.engine as eng
from rumimm.reader import layouts
from rumimm.format import grid as g

def f(img):
    rumimm.reader.cache._ALL, eng._pool(), layouts._x, g._y, img._source, g.Grid, g.__name__
"""
    found = private_uses("rumimm.cli", ast.parse(src))
    assert sorted(found) == ["rumimm.cli uses rumimm.format.grid._y", "rumimm.cli uses rumimm.reader.cache._ALL",
                             "rumimm.cli uses rumimm.reader.engine._pool", "rumimm.cli uses rumimm.reader.layouts._x"]


def test_no_module_uses_another_modules_private_names():
    """``other_module._name`` is as private as ``from other_module import _name``; ruff's SLF001 sees neither."""
    found = [use for mod in MODULES for use in private_uses(mod, _tree(mod))]
    assert not found, found


IO_MODULES = {"os", "io", "mmap", "socket", "pathlib", "shutil", "tempfile", "urllib", "http", "requests", "fsspec",
              "obstore", "aiohttp", "builtins"}


def test_format_reads_and_writes_no_file():
    """format/ says what a rumi file is from bytes it is given: no module there imports I/O or calls ``open``."""
    found = []
    for mod in MODULES:
        if layer(mod) != "format":
            continue
        found += [f"{mod} imports {target}" for target, _ in imports(mod) if target.split(".")[0] in IO_MODULES]
        found += [f"{mod}:{node.lineno} calls open" for node in ast.walk(_tree(mod))
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open"]
    assert not found, found


#: The planner and its executors: frame bytes reach them only through ``Store.get_ranges``.
EXECUTORS = ["rumimm.reader.source", "rumimm.reader.planner", "rumimm.reader.engine", "rumimm.reader.small_reads",
             "rumimm.reader.frame_checks", "rumimm.reader.layouts", "rumimm.reader.cube"]
#: What would let an executor tell stores apart or reach past get_ranges.
STORE_SPECIFIC = {"mapping", "read_into", "read_ranges", "remote", "frame_addresses", "LocalStore", "RemoteStore",
                  "RemoteError", "is_remote"}


@pytest.mark.parametrize("mod", EXECUTORS)
def test_executors_get_frame_bytes_only_through_get_ranges(mod):
    names = {n.attr for n in ast.walk(_tree(mod)) if isinstance(n, ast.Attribute)}
    names |= {n.id for n in ast.walk(_tree(mod)) if isinstance(n, ast.Name)}
    names |= {a for _, taken in imports(mod) for a in taken}
    assert not names & STORE_SPECIFIC, f"{mod} uses {sorted(names & STORE_SPECIFIC)}"
    stores = [t for t, _ in imports(mod) if t.startswith("rumimm.store")]
    assert set(stores) <= {"rumimm.store"}, f"{mod} imports {stores}; executors take rumimm.store's interface only"


def test_the_store_package_imports_only_base_modules():
    found = [f"{mod} imports {t}" for mod in MODULES if layer(mod) == "store"
             for t, _ in internal_edges(mod) if layer(t) not in ("base", "store")]
    assert not found, found
